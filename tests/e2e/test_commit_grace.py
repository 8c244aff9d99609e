"""A reply appended before its deadline but committed after it: the commit grace.

Kafka shows a record to consumers only once it is committed: copied to the
in-sync replicas, or its producer's transaction committed.  A reply appended
29 ms before its deadline, on three brokers, was still being replicated
when the worker's probe proved the replies topic empty past the deadline,
and the deadline won.  A transaction held open across the deadline is the
same case, slowed down enough to test on one broker: the reply's append time
is before the deadline, its commit after.  Within XWAIT_COMMIT_GRACE of the
deadline the reply wins; an open transaction holds the deadline no longer.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.e2e.conftest import new_e2e
from tests.e2e.harness import Client, Watcher, WorkerProcess, new_key, until_time

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.rule2]

DEADLINE_MS = 4_000  # each request's own (the "race" definition's is 2 s)
GRACE_S = 6.0


def transactional(client: Client) -> Client:
    client.producer = Producer(client.settings.confluent(partitioner="murmur2_random", **{
        "transactional.id": f"replies-{new_key()}", "linger.ms": 0}))
    client.producer.init_transactions(30)
    client.producer.begin_transaction()
    return client


@pytest.mark.parametrize("grace", [None, GRACE_S], ids=["auto-one-replica", "grace-6s"])
def test_a_reply_committed_after_its_deadline_wins_within_the_grace_and_not_after_it(
    kafka_bootstrap: str, tmp_path: Path, grace: float | None,
) -> None:
    settings = new_e2e(kafka_bootstrap, tmp_path, "g", partitions=1).with_overrides(
        commit_grace=grace)
    worker = WorkerProcess(settings, tmp_path, "w1").start()
    watcher = Watcher(settings)
    try:
        client = Client(settings)
        first, second = transactional(Client(settings)), transactional(Client(settings))
        within, beyond = new_key(), new_key()
        requested = int(time.time() * 1000)
        deadline = requested + DEADLINE_MS
        for key in (within, beyond):
            client.start(key, "race", requestedAt=requested, deadline="PT4S")
        client.flush()  # parked once proven first (with a grace, that takes the grace)
        # Both replies appended two seconds before the deadline, each in a transaction
        # left open: `within`'s first, so that committing it shows it (the topic's
        # last stable offset stops at the first open transaction).
        until_time((deadline - 2_000) / 1000, watcher)
        for tx, key in ((first, within), (second, beyond)):
            tx.reply(key, {"ok": True})
            tx.flush()  # appended, not committed
        appended = int(time.time() * 1000)
        assert appended < deadline, "the machine took two seconds to append two replies"
        until_time((deadline + 3_000) / 1000, watcher)
        first.producer.commit_transaction(30)  # within the grace
        committed = time.time()
        stats = worker.stats() or {}
        expected_grace = 0 if grace is None else round(grace * 1000)  # auto: one replica
        assert stats.get("commitGraceMs") == expected_grace, stats.get("commitGraceMs")
        until_time(deadline / 1000 + (grace or 0) + 2.0, watcher)
        second.producer.commit_transaction(30)  # beyond it

        seen = watcher.until(lambda s: all(s.for_key("outcomes", k) for k in (within, beyond)),
                             60, "an outcome for both waits")
        [won] = seen.for_key("outcomes", within)
        if grace is None:  # no grace: the deadline was proven passed before the commit
            assert (won["outcome"], won["endedAt"]) == ("ESCALATED", deadline), won
        else:
            assert committed < deadline / 1000 + grace, "the commit came after the grace"
            assert won["outcome"] == "RECEIVED", won
            assert won["endedAt"] < deadline, won  # decided at the reply's append time
        [lost] = seen.for_key("outcomes", beyond)
        # An open transaction holds the deadline back for the grace, no longer:
        # the deadline is decided at its due time and the reply comes too late.
        assert (lost["outcome"], lost["reason"], lost["endedAt"]) == (
            "ESCALATED", "deadline_exhausted", deadline), lost
        late = [within, beyond] if grace is None else [beyond]
        watcher.until(lambda s: all(any(r["reason"] == "late" for r in s.for_key("rejected", k))
                                    for k in late), 30, "the late replies rejected")
    finally:
        watcher.close()
        worker.stop()
