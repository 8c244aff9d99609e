"""Inputs produced in transactions: a commit marker, never delivered, after each one.

A service with exactly-once processing (a Kafka Streams application, a
transactional producer) commits its requests and replies in transactions,
often one per record; each commit puts a marker at the next offset, which
no consumer ever receives.  The worker expects every offset in turn, so it
used to read each such offset directly from the broker, on a consumer of its
own, before the record after it: 26 gap reads and 8 reads of a topic stalled
behind its last marker for these 200 records (173 of them read twice), and
replies decided seconds after they were committed.  The fetch now says
which offsets it passed over without a record.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import Producer

from tests.e2e.harness import Client, Watcher, WorkerProcess, new_key

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

WAITS = 100


def test_inputs_committed_one_transaction_each_are_taken_without_reading_the_markers(
    workers: Callable[..., WorkerProcess], client: Client, watcher: Watcher
) -> None:
    worker = workers("w1")
    client.producer = Producer(client.settings.confluent(partitioner="murmur2_random", **{
        "transactional.id": f"svc-{new_key()}", "linger.ms": 0}))
    client.producer.init_transactions(30)
    keys = [new_key() for _ in range(WAITS)]
    for role in ("requests", "replies"):
        for key in keys:
            client.producer.begin_transaction()
            if role == "requests":
                client.start(key, "slow-approval")
            else:
                client.reply(key, {"decision": "approved"})
            client.producer.commit_transaction(30)
    seen = watcher.until(lambda s: all(s.for_key("outcomes", k) for k in keys), 120,
                         "an outcome for every wait")
    assert {o["outcome"] for o in seen.outcomes if o["correlationKey"] in keys} == {
        "RECEIVED"}

    # The counters move when a batch's state is committed, a moment after its outputs
    # were acknowledged; the last markers are passed at the fetch's next turn.
    got = worker.wait_until(
        lambda st: st["counters"].get("inputs.markers_passed", 0) >= 2 * WAITS
        and st["counters"].get("processed.replies", 0) >= WAITS, 60,
        "never passed every marker and counted every reply")["counters"]
    assert (got.get("processed.requests"), got.get("processed.replies")) == (WAITS, WAITS), got
    assert got.get("inputs.markers_passed") == 2 * WAITS, got  # one per transaction
    assert got.get("inputs.gaps", 0) == 0, got  # none read directly ...
    assert got.get("inputs.stalls_read", 0) == 0, got  # ... nor waited for
    assert "input gap" not in worker.log_path.read_text(errors="replace")
