"""End offsets: which errors are asked again (a broker restart itself: tests/e2e/test_crash.py)."""

from __future__ import annotations

import time
from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from streams.processor.gaps import EndOffsets
from tests.prefixes import unique_prefix

pytestmark = pytest.mark.kafka


class LeaderMovedOnce:
    """Real admin clients, except that the first one answers `error` for every
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


@pytest.fixture
def topic(kafka_bootstrap: str) -> str:
    name = f"{unique_prefix('eo')}.ends"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(name, 2, 1)])[name].result(timeout=30)
    deadline = time.monotonic() + 15
    while name not in admin.list_topics(timeout=5).topics and time.monotonic() < deadline:
        time.sleep(0.1)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for i in range(3):
        producer.produce(name, value=b"x", partition=i % 2)
    producer.flush(30)
    return name


def test_an_error_that_asking_again_cannot_clear_is_raised_at_once(
        kafka_bootstrap: str, topic: str) -> None:
    admin = LeaderMovedOnce(kafka_bootstrap, KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED|[Aa]uthoriz"):
        EndOffsets({}, make_admin=admin).get([(topic, 0)])
    assert len(admin.asked) == 1
