"""SDK tests run against the real broker, each with its own topic prefix.

Helpers are fixtures (not a sibling module) so that mypy resolves them the same
way pytest does.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Message, TopicPartition

from streams.cli import main
from streams.config import Settings


def _create_topics(settings: Settings) -> None:
    """The contract's topics under the test's prefix, through the CLI a user runs."""
    args = ["topics", "create", "--bootstrap", settings.bootstrap, "--prefix",
            settings.topic_prefix, "--partitions", str(settings.partitions)]
    assert main(args) == 0


def _end_offsets(settings: Settings, role: str) -> list[int]:
    """High watermark of each partition: all zero means nothing was ever produced."""
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


def _read_raw(settings: Settings, role: str, count: int, timeout: float = 15.0) -> list[Message]:
    """The first ``count`` records of a topic, read with a plain confluent consumer."""
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


@pytest.fixture
def topics(settings: Settings, monkeypatch: pytest.MonkeyPatch,
           capsys: pytest.CaptureFixture[str]) -> Settings:
    """``settings`` whose contract topics exist (the changelog is named after XWAIT_APP_ID)."""
    monkeypatch.setenv("XWAIT_APP_ID", settings.app_id)
    _create_topics(settings)
    capsys.readouterr()
    return settings


@pytest.fixture
def end_offsets() -> Callable[[Settings, str], list[int]]:
    return _end_offsets


@pytest.fixture
def read_raw() -> Callable[[Settings, str, int], list[Message]]:
    return _read_raw
