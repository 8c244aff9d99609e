"""The chaos load sends again, through a new producer, what a stuck one kept queued.

After a broker restart a librdkafka producer kept the load's records queued for
the rest of a crash test's run (no acknowledgement after its 25th second): 40
waits counted lost that no worker ever saw.  `Load._unstick` purges records
that stood still and produces them again from the load's loop (never from
inside a delivery report: librdkafka's poll is running there).  A record
queued again for a retry may be in the log already, so a resent reply is
judged by its first copy there.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from typing import Any

from confluent_kafka import KafkaError, Producer

from streams import topics
from streams.config import Settings
from streams.testing import load as load_module
from streams.testing.load import (
    DEADLINE_MS,
    Load,
    Wait,
    expected_outcome,
    reread_replies,
    reviews_due,
)


class _Message:
    def __init__(self, topic: str, key: bytes, value: bytes, offset: int) -> None:
        self._record = (topic, key, value, offset)

    def topic(self) -> str:
        return self._record[0]

    def key(self) -> bytes:
        return self._record[1]

    def value(self) -> bytes:
        return self._record[2]

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._record[3]

    def timestamp(self) -> tuple[int, int]:
        return (0, 0)


class _FakeProducer:
    """Keeps what it is given queued until purged or answered; reports only in `poll`,
    as librdkafka does, and refuses to be produced to from inside a report."""

    def __init__(self) -> None:
        self.queue: list[tuple[_Message, Any]] = []
        self.reports: list[tuple[KafkaError | None, _Message, Any]] = []
        self.polling = False
        self.offset = 0

    def __len__(self) -> int:
        return len(self.queue) + len(self.reports)

    def produce(self, topic: str, key: bytes, value: bytes, on_delivery: Any) -> None:
        assert not self.polling, "produced from inside a delivery report"
        self.queue.append((_Message(topic, key, value, len(self.queue)), on_delivery))

    def poll(self, timeout: float) -> int:
        served, self.reports = self.reports, []
        self.polling = True
        try:
            for err, msg, report in served:
                report(err, msg)
        finally:
            self.polling = False
        return len(served)

    def purge(self, in_queue: bool, in_flight: bool, blocking: bool) -> None:
        assert in_queue and not in_flight, "only what was never sent is purged"
        purged, self.queue = self.queue, []
        self.reports += [(KafkaError(KafkaError._PURGE_QUEUE), m, r) for m, r in purged]

    def answer(self) -> None:
        answered, self.queue = self.queue, []
        self.reports += [(None, m, r) for m, r in answered]


class _Load(Load):
    """A Load around fake producers (the real constructor warms a real one)."""

    def __init__(self) -> None:
        threading.Thread.__init__(self, daemon=True)
        self.settings = Settings(topic_prefix="stuck")
        self.made: list[_FakeProducer] = []
        waits = [Wait(f"k{i}", 0, "silent") for i in range(3)]
        self.waits, self.rate, self.rng = waits, 1.0, random.Random(0)
        self.by_key = {w.key: w for w in waits}
        self.producer = self._new_producer()
        self._replaced = []
        self._last_report_at, self._purged, self.resent = time.monotonic(), [], 0
        self.resent_replies = set()
        self.offered, self.acked, self.failed = Counter(), Counter(), Counter()
        self.errors, self.produced, self.last_ack_at = [], Counter(), None
        self._lock, self._due, self._seq = threading.Lock(), [], 0

    def _new_producer(self) -> Any:
        self.made.append(_FakeProducer())
        return self.made[-1]


def test_records_a_stuck_producer_kept_are_sent_again_by_a_new_one() -> None:
    load = _Load()
    for key in load.by_key:
        load._send("requests", key, {"correlationKey": key}, "request")
    load._drain_due(until=time.monotonic())
    assert len(load.made) == 1  # reports may still come: not stuck yet

    load._last_report_at -= load_module.LOAD_STALL_S  # nothing heard for that long
    load._drain_due(until=time.monotonic())
    stuck, fresh = load.made
    assert (len(stuck), len(fresh), load.resent) == (0, 3, 3)
    assert load.failed == Counter(), "a purged record is sent again, not failed"

    fresh.answer()
    load._drain_due(until=time.monotonic())
    assert load.acked["requests"] == 3
    assert load.offered["requests"] == 3, "offered once, however often it was sent"
    assert len(load.made) == 2 and load._queued() == 0


def test_a_producer_that_keeps_answering_is_never_replaced() -> None:
    load = _Load()
    load._send("requests", "k0", {"correlationKey": "k0"}, "request")
    load.made[0].answer()
    load._last_report_at -= load_module.LOAD_STALL_S
    load._drain_due(until=time.monotonic())  # the answer is a report: progress
    load._send("requests", "k1", {"correlationKey": "k1"}, "request")
    load._drain_due(until=time.monotonic())
    assert len(load.made) == 1 and load.acked["requests"] == 1


def test_a_resent_reply_is_judged_by_its_first_copy_in_the_log(settings: Settings) -> None:
    """A cluster run judged a wait "wrong": its reply, resent 15 s after a leader kill, was
    appended after the deadline, but its first copy (queued again for a retry, appended
    by the killed leader) was in the log before it, and the worker received it."""
    load = _Load()
    load.settings = settings
    wait = load.by_key["k0"]
    wait.kind = "valid"
    load._send("replies", "k0", {"correlationKey": "k0"}, "valid")
    load._last_report_at -= load_module.LOAD_STALL_S
    load._drain_due(until=time.monotonic())
    assert load.resent_replies == {"k0"}

    # The two copies in the log, as the stuck and the new producer left them.
    topics.ensure(settings)
    # The copy that reported is appended later than the first: on a busy machine (load 30)
    # a second copy once had the first's append time, to the millisecond.
    producer, appended = Producer(settings.confluent()), list[int]()
    while len(appended) < 2 or appended[-1] <= appended[0]:
        assert len(appended) < 20, f"no copy appended after the first: {appended}"
        producer.produce(settings.topic("replies"), key=b"k0", value=b"{}",
                         on_delivery=lambda err, msg: appended.append(msg.timestamp()[1]))
        assert producer.flush(30) == 0
        while time.time() * 1000 <= appended[-1] + 1:  # the next copy later
            time.sleep(0.001)
    first, resent = appended[0], appended[-1]
    wait.requested_at = resent - DEADLINE_MS  # the deadline between the copies
    wait.reply_appended, wait.reply_acked = resent, resent + 5
    assert expected_outcome(wait) == "ESCALATED", "by the copy that reported"

    reread_replies(load)
    assert _reply_times(wait) == (first, None)
    assert expected_outcome(wait) is None, "committed when is unknown: either is right"


def test_only_an_invalid_reply_appended_before_its_deadline_is_a_review_due() -> None:
    """A crash run on a machine at load ~100 appended every reply after its deadline:
    it opened no review, rightly, and its test must tell that from a worker that fails
    to open one."""
    def wait(kind: str, appended_after_ms: int | None) -> Wait:
        at = None if appended_after_ms is None else 1_000 + appended_after_ms
        return Wait("k", 1_000, kind, 0, reply_appended=at)

    in_time, late = DEADLINE_MS - 1, DEADLINE_MS
    assert reviews_due([wait("invalid", in_time)]) == 1
    assert reviews_due([wait("invalid", late), wait("invalid", None),
                        wait("valid", in_time), wait("silent", None)]) == 0


def _reply_times(wait: Wait) -> tuple[int | None, int | None]:
    """The reply's append and acknowledgement as the judge will read them."""
    return wait.reply_appended, wait.reply_acked
