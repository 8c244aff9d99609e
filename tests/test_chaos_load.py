"""The chaos load sends again what its producer kept queued past a broker restart.

After a broker restart a librdkafka producer kept the load's records queued for
the rest of a crash test's run (no acknowledgement after its 25th second): 40
waits counted lost that no worker ever saw.  `Load._unstick` purges records
that stood still, never sent, and their reports send them again.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

from confluent_kafka import KafkaError

from streams.config import Settings
from streams.testing import load as load_module
from streams.testing.load import Load, Wait


class _Message:
    def __init__(self, topic: str, key: bytes, value: bytes) -> None:
        self._record = (topic, key, value)

    def topic(self) -> str:
        return self._record[0]

    def key(self) -> bytes:
        return self._record[1]

    def value(self) -> bytes:
        return self._record[2]

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return 0

    def timestamp(self) -> tuple[int, int]:
        return (0, 0)


class _StuckProducer:
    """Keeps what it is given queued until purged (or, with `answer`, acknowledged)."""

    def __init__(self) -> None:
        self.queue: list[tuple[_Message, Any]] = []
        self.purges = 0

    def __len__(self) -> int:
        return len(self.queue)

    def produce(self, topic: str, key: bytes, value: bytes, on_delivery: Any) -> None:
        self.queue.append((_Message(topic, key, value), on_delivery))

    def poll(self, timeout: float) -> int:
        return 0

    def purge(self, in_queue: bool, in_flight: bool, blocking: bool) -> None:
        self.purges += 1
        purged, self.queue = self.queue, []
        for msg, report in purged:
            report(KafkaError(KafkaError._PURGE_QUEUE), msg)

    def answer(self) -> None:
        answered, self.queue = self.queue, []
        for msg, report in answered:
            report(None, msg)


def _load(producer: _StuckProducer) -> Load:
    """A Load around the fake producer (its constructor would warm a real one)."""
    load = Load.__new__(Load)
    load.settings = Settings(topic_prefix="stuck")
    load.producer = producer  # type: ignore[assignment]
    load.by_key = {f"k{i}": Wait(f"k{i}", 0, "silent") for i in range(3)}
    load.offered, load.acked, load.failed = Counter(), Counter(), Counter()
    load.errors, load.produced = [], Counter()
    load.last_ack_at = None
    load._last_report_at, load._last_purge_at, load.resent = time.monotonic(), 0.0, 0
    load._lock, load._due = threading.Lock(), []
    return load


def test_records_queued_with_no_report_are_purged_and_sent_again_once_a_stall() -> None:
    producer = _StuckProducer()
    load = _load(producer)
    for key in load.by_key:
        load._send("requests", key, {"correlationKey": key}, "request")
    load._unstick()
    assert producer.purges == 0  # reports may still come: not stalled yet

    load._last_report_at -= load_module.LOAD_STALL_S  # nothing heard for that long
    load._unstick()
    assert (producer.purges, load.resent, len(producer)) == (1, 3, 3)  # queued again
    load._unstick()
    assert producer.purges == 1  # the resent ones get their own stall's time

    producer.answer()
    assert (load.acked["requests"], load.failed["requests"]) == (3, 0)
