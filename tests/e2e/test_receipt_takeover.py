"""Receipts across a worker killed with SIGKILL, under both guarantees.

Replies asking for receipts are sent while the worker is frozen and then
killed (the next run decides them), and while it is deciding (killed in the
middle).  Every sender gets one receipt, the one its reply's decision made:
``won`` with the id of the wait's outcome.  On the receipts topic every copy
of a receipt is the same record (a reply decided again after the kill is
decided alike), and under exactly_once each is there once.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from streams import codec
from streams.client import Receipt, Verdict, XwaitClient
from streams.config import Guarantee, Settings
from tests.e2e.conftest import new_e2e
from tests.e2e.harness import Watcher, WorkerProcess
from tests.records import end_offsets
from tests.waiting import until

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

WAITS = 16


def _all(settings: Settings, role: str, committed: bool = True) -> list[tuple[bytes, Any]]:
    """Every record of a topic, to its end: (key, decoded value)."""
    topic = settings.topic(role)
    consumer = Consumer(settings.confluent(**{
        "group.id": "all", "enable.auto.commit": False, "enable.partition.eof": True,
        "isolation.level": "read_committed" if committed else "read_uncommitted"}))
    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        at_end: set[int] = set()
        found: list[tuple[bytes, Any]] = []
        deadline = time.monotonic() + 60
        while len(at_end) < len(parts):
            assert time.monotonic() < deadline, f"{topic} not read to its end"
            msg = consumer.poll(0.3)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    at_end.add(int(msg.partition() or 0))
                continue
            at_end.discard(int(msg.partition() or 0))
            found.append((msg.key() or b"", codec.decode(
                {"receipts": "Receipt", "outcomes": "Outcome"}[role], msg.value())))
        return found
    finally:
        consumer.close()


class _FirstRecord:
    """A read_uncommitted reader placed at a topic's end: `wait` returns as soon as a
    record is written there, committed or not (an open transaction's too)."""

    def __init__(self, settings: Settings, role: str) -> None:
        topic = settings.topic(role)
        self.consumer = Consumer(settings.confluent(**{
            "group.id": "first", "enable.auto.commit": False,
            "isolation.level": "read_uncommitted", "fetch.wait.max.ms": 5}))
        parts = self.consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = [TopicPartition(topic, p, self.consumer.get_watermark_offsets(
            TopicPartition(topic, p), timeout=10)[1]) for p in parts]
        self.consumer.assign(ends)

    def wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                msg = self.consumer.poll(0.01)
                if msg is not None and msg.error() is None:
                    return
            raise AssertionError("no record was written")
        finally:
            self.consumer.close()


class Senders:
    """One thread per reply, each with a client of its own, each waiting for its receipt."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.receipts: dict[str, Receipt] = {}
        self.errors: list[BaseException] = []
        self.threads: list[threading.Thread] = []

    def send(self, keys: list[str]) -> None:
        for key in keys:
            thread = threading.Thread(target=self._reply, args=(key,), daemon=True)
            thread.start()
            self.threads.append(thread)

    def _reply(self, key: str) -> None:
        try:
            with XwaitClient(self.settings, check_keys=False) as xw:
                receipt = xw.reply(key, {"decision": "approved"}, channel="portal",
                                   wait=240.0)
            assert receipt is not None
            self.receipts[key] = receipt
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.errors.append(exc)

    def join(self) -> None:
        for thread in self.threads:
            thread.join(300)
        assert self.errors == []


@pytest.mark.parametrize("guarantee", list(Guarantee))
def test_every_sender_gets_the_receipt_of_its_decision_across_a_kill_9(
    kafka_bootstrap: str, tmp_path: Path, guarantee: Guarantee
) -> None:
    settings = new_e2e(kafka_bootstrap, tmp_path, "r", guarantee=guarantee).with_overrides(
        session_timeout=7.0)  # a restarted worker owns its partitions 7 s after the kill
    worker = WorkerProcess(settings, tmp_path).start()
    watcher = Watcher(settings)
    try:
        with XwaitClient(settings) as xw:
            keys = [str(xw.start_wait("slow-approval")) for _ in range(WAITS)]
        for key in keys:
            watcher.parked(key, timeout=60)
        senders = Senders(settings)

        # 1. Sent to a frozen worker, which is then killed: its next run decides them.
        before = sum(end_offsets(settings, "replies"))
        worker.freeze()
        senders.send(keys[:WAITS // 2])
        until(lambda: senders.errors or
              sum(end_offsets(settings, "replies")) == before + WAITS // 2,
              "the replies to reach the topic", every=0.05)
        assert senders.errors == [], "a sender failed before its reply was written"
        worker.kill9()
        worker.start(timeout=180)

        # 2. Sent while the worker decides: stopped (SIGSTOP, then SIGKILL) the moment
        # the first receipt is written, before its batch's commit is done if it can be.
        first = _FirstRecord(settings, "receipts")
        senders.send(keys[WAITS // 2:])
        first.wait(60)
        worker.freeze()
        worker.kill9()
        worker.start(timeout=180)
        senders.join()

        outcomes: dict[str, set[str]] = defaultdict(set)
        for raw, outcome in _all(settings, "outcomes"):
            outcomes[raw.decode()].add(outcome["outcomeId"])
        copies: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for raw, record in _all(settings, "receipts"):
            copies[raw.decode()].append(record)
        for key in keys:
            receipt = senders.receipts[key]
            assert receipt.verdict is Verdict.WON, receipt
            assert outcomes[key] == {receipt.outcome_id}, "the receipt names the one outcome"
            seen = copies[receipt.receipt_id]
            assert seen and all(c == seen[0] for c in seen), "decided again, decided alike"
            assert receipt.to_record() == seen[0]
            if guarantee is Guarantee.EXACTLY_ONCE:
                assert len(seen) == 1
        uncommitted = len(_all(settings, "receipts", committed=False))
        print(f"{guarantee.value}: {len(keys)} receipts, {sum(map(len, copies.values()))} "
              f"committed copies, {uncommitted} written in all (aborted or not)")
    finally:
        watcher.close()
        worker.stop()
