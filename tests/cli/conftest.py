"""CLI tests run `streams.cli.main` in-process against the real broker, one prefix per test.

Helpers are fixtures (not a sibling module) so that mypy resolves them the same
way pytest does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer

from streams import codec
from streams.cli import main
from streams.codec import RecordType
from streams.config import Settings
from tests.records import first_records

# The fixtures' types, for the tests' signatures.
Flags = Callable[[Settings], list[str]]
Read = Callable[[Settings, str, RecordType, int], list[tuple[bytes, dict[str, Any]]]]
Produce = Callable[..., None]  # (settings, role, [(key, value)], headers=None)


def _flags(settings: Settings) -> list[str]:
    return ["--bootstrap", settings.bootstrap, "--prefix", settings.topic_prefix,
            "--partitions", str(settings.partitions)]


def _read(settings: Settings, role: str, record_type: RecordType, count: int,
          timeout: float = 15.0) -> list[tuple[bytes, dict[str, Any]]]:
    """(key, decoded value) of the first ``count`` records of a topic, via a plain consumer."""
    return [(msg.key() or b"", codec.decode(record_type, msg.value()))
            for msg in first_records(settings, role, count, timeout)]


def _produce(settings: Settings, role: str, records: list[tuple[str, bytes]],
             headers: dict[str, str] | None = None) -> None:
    producer = Producer(settings.confluent(partitioner="murmur2_random"))
    for key, value in records:
        producer.produce(settings.topic(role), key=key.encode(), value=value,
                         headers=list((headers or {}).items()))
    assert producer.flush(10) == 0


@pytest.fixture
def topics(settings: Settings, monkeypatch: pytest.MonkeyPatch,
           capsys: pytest.CaptureFixture[str]) -> Settings:
    """``settings`` whose contract topics exist; the creation's output is discarded."""
    monkeypatch.setenv("XWAIT_APP_ID", settings.app_id)
    assert main(["topics", "create", *_flags(settings)]) == 0
    capsys.readouterr()
    return settings


@pytest.fixture
def flags() -> Flags:
    """The flags that point a command at the test's broker and prefix."""
    return _flags


@pytest.fixture
def read() -> Read:
    return _read


@pytest.fixture
def produce() -> Produce:
    return _produce
