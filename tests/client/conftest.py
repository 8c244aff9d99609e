"""SDK tests run against the real broker, each with its own topic prefix.

Helpers are fixtures (not a sibling module) so that mypy resolves them the same
way pytest does.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from streams.cli import main
from streams.config import Settings
from tests.records import first_records


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
    return first_records
