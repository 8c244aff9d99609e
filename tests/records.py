"""Reading what a test's topics hold, the way any consumer would (no group, from the start)."""

from __future__ import annotations

import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Message, TopicPartition

from streams.config import Settings


def first_records(settings: Settings, role: str, count: int,
                  timeout: float = 15.0) -> list[Message]:
    """The first `count` records of `role`'s topic, read with a plain confluent consumer;
    fails unless there are that many within `timeout`."""
    topic = settings.topic(role)
    consumer = Consumer(settings.confluent(**{"group.id": "raw-reader",
                                              "enable.auto.commit": False}))
    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        found: list[Message] = []
        deadline = time.monotonic() + timeout
        while len(found) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                found.append(msg)
        assert len(found) == count, f"expected {count} records on {topic}, got {len(found)}"
        return found
    finally:
        consumer.close()


def end_offsets(settings: Settings, role: str) -> list[int]:
    """High watermark of each partition of `role`'s topic, in partition order: all zero
    means nothing was ever produced, and the sum is how many records it holds."""
    consumer = Consumer(settings.confluent(**{"group.id": "probe"}))
    try:
        topic = settings.topic(role)
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        deadline = time.monotonic() + 10
        while True:
            try:
                return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                        for p in sorted(parts)]
            except KafkaException:  # a topic created a moment ago may have no leader yet
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        consumer.close()
