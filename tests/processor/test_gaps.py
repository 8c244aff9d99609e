"""Reading the broker directly: a skipped range, end offsets across leader moves."""

from __future__ import annotations

import gc
import time
import weakref
from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from streams.processor.gaps import EndOffsets, GapReader
from streams.processor.model import Role
from tests.made_topics import create_topics
from tests.prefixes import unique_prefix

pytestmark = pytest.mark.kafka


@pytest.fixture
def topic(kafka_bootstrap: str) -> str:
    name = f"{unique_prefix('g')}.gaps"
    create_topics(kafka_bootstrap, NewTopic(name, 1, 1))
    return name


def test_a_range_is_read_whole_or_up_to_a_limit(kafka_bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for i in range(10):
        producer.produce(topic, key=b"k", value=str(i).encode(), partition=0)
    producer.flush(30)
    reader = GapReader({"bootstrap.servers": kafka_bootstrap, "group.id": f"{topic}-test"})

    found = reader.read(Role.REPLIES, topic, 0, 2, 7)
    assert [(r.offset, r.value) for r in found] == [(i, str(i).encode()) for i in range(2, 7)]
    assert all(r.role is Role.REPLIES and r.timestamp for r in found)
    assert [r.offset for r in reader.read(Role.REPLIES, topic, 0, 0, 10, limit=4)] == [0, 1, 2, 3]


def test_a_range_that_ends_at_the_log_end_is_read_without_waiting_for_a_next_record(
    kafka_bootstrap: str, topic: str
) -> None:
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for i in range(3):
        producer.produce(topic, key=b"k", value=str(i).encode(), partition=0)
    producer.flush(30)
    reader = GapReader({"bootstrap.servers": kafka_bootstrap, "group.id": f"{topic}-test"})
    started = time.monotonic()
    assert [r.offset for r in reader.read(Role.COMMANDS, topic, 0, 0, 3)] == [0, 1, 2]
    assert [r.offset for r in reader.read(Role.COMMANDS, topic, 0, 1, 3)] == [1, 2]
    assert time.monotonic() - started < 20, "done at the end, not after a timeout"


class LeaderMovedOnce:
    """Real admin clients, except that the first answers `error` for every
    partition, however often it is asked: a client whose metadata predates a
    broker's restart, and that does not refresh it on that answer."""

    def __init__(self, bootstrap: str, error: int) -> None:
        self.bootstrap = bootstrap
        self.error = error
        self.made = 0
        self.asked: list[set[TopicPartition]] = []

    def __call__(self, conf: dict[str, Any]) -> Any:
        self.made += 1
        return _Admin(self, AdminClient({"bootstrap.servers": self.bootstrap}),
                      stale=self.made == 1)


class _Admin:
    def __init__(self, moved: LeaderMovedOnce, admin: AdminClient, stale: bool) -> None:
        self.moved, self.admin, self.stale = moved, admin, stale

    def list_offsets(self, specs: dict[TopicPartition, Any], **kwargs: Any
                     ) -> dict[TopicPartition, Future[Any]]:
        self.moved.asked.append(set(specs))
        answers = self.admin.list_offsets(specs, **kwargs)
        if not self.stale:
            return answers
        failed: dict[TopicPartition, Future[Any]] = {}
        for tp in answers:
            future: Future[Any] = Future()
            future.set_exception(KafkaException(KafkaError(self.moved.error)))
            failed[tp] = future
        return failed


def test_an_error_that_asking_again_cannot_clear_is_raised_at_once(
        kafka_bootstrap: str, topic: str) -> None:
    admin = LeaderMovedOnce(kafka_bootstrap, KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED|[Aa]uthoriz"):
        EndOffsets({}, make_admin=admin).get([(topic, 0)])
    assert len(admin.asked) == 1


class _FailingAdmin:
    """Fails every request as confluent-kafka does a whole failed one: one exception,
    shared by the futures of all its partitions."""

    def list_offsets(self, specs: dict[TopicPartition, Any], **kwargs: Any
                     ) -> dict[TopicPartition, Future[Any]]:
        shared = KafkaException(KafkaError(KafkaError.LEADER_NOT_AVAILABLE))
        failed: dict[TopicPartition, Future[Any]] = {}
        for tp in specs:
            future: Future[Any] = Future()
            future.set_exception(shared)
            failed[tp] = future
        return failed


def test_a_failed_request_leaves_nothing_holding_the_client_once_dropped() -> None:
    """A failed request's exception, raised through `get`, kept its frame - the
    EndOffsets and its admin client - alive in a cycle only the garbage collector
    frees: meanwhile a client keeps reconnecting to a broker that may be gone."""
    gc.disable()
    try:
        offsets = EndOffsets({}, make_admin=lambda conf: _FailingAdmin())
        assert offsets.get([("t", 0), ("t", 1)], partial=True) == {}
        dropped = weakref.ref(offsets)
        del offsets
        assert dropped() is None
    finally:
        gc.enable()
