"""End offsets asked of the broker while a partition's leader moves (a broker restarted)."""

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
    """The real admin client, except that each partition's first answer is `error`:
    what a broker answers a client whose metadata predates its restart."""

    def __init__(self, bootstrap: str, error: int) -> None:
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.error = error
        self.asked: list[set[TopicPartition]] = []

    def list_offsets(self, specs: dict[TopicPartition, Any], **kwargs: Any
                     ) -> dict[TopicPartition, Future[Any]]:
        self.asked.append(set(specs))
        answers = self.admin.list_offsets(specs, **kwargs)
        if len(self.asked) > 1:
            return answers
        failed: dict[TopicPartition, Future[Any]] = {}
        for tp in answers:
            future: Future[Any] = Future()
            future.set_exception(KafkaException(KafkaError(self.error)))
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


def test_a_partition_whose_leader_moved_is_asked_again_and_answers(
        kafka_bootstrap: str, topic: str) -> None:
    admin = LeaderMovedOnce(kafka_bootstrap, KafkaError.FENCED_LEADER_EPOCH)
    ends = EndOffsets({}, admin=admin).get([(topic, 0), (topic, 1)])
    assert ends == {(topic, 0): 2, (topic, 1): 1}
    assert len(admin.asked) == 2  # the first answer was the moved leader's


def test_an_error_that_asking_again_cannot_clear_is_raised_at_once(
        kafka_bootstrap: str, topic: str) -> None:
    admin = LeaderMovedOnce(kafka_bootstrap, KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED|[Aa]uthoriz"):
        EndOffsets({}, admin=admin).get([(topic, 0)])
    assert len(admin.asked) == 1
