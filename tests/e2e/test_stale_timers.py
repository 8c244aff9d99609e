"""A worker catching up sends no reminder or escalation for a wait its backlog has ended.

Every reply here is appended before its wait's deadline, and the worker
starts only once every deadline has passed, so its inputs' stream time runs
past all of them while it works through the backlog.  The reply is decided
before the deadline it beat: a deadline fired in the same batch as its
wait's reply, or while that batch commits, is decided against the row the
reply left and found stale (`discarded.stale_timer`), changing nothing.
(Until 2026-12 each such timer was a record written to the timers topic and
read back, thousands of them under a real backlog, and the worker held
timers back until the batches in flight were stored; a stale timer decided
in the batch costs a row's head and no record.)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from streams.config import Settings
from tests.e2e.conftest import new_e2e
from tests.e2e.harness import Client, Watcher, WorkerProcess, new_key, until_time

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

WAITS = 3000
# Each request's own deadline (the "race" definition's is 2 s): beside two suites (load
# ~70) flushing the 3,000 requests and their replies once took longer than 2 s, and the
# replies appended after it rightly escalated their waits.
DEADLINE_S = 10


@pytest.fixture(scope="module")
def e2e(kafka_bootstrap: str, e2e_folder: Path) -> Settings:
    return new_e2e(kafka_bootstrap, e2e_folder, "st", partitions=2)


def test_no_timer_sends_anything_for_a_wait_its_backlog_ended(
    workers: Callable[..., WorkerProcess], client: Client, watcher: Watcher
) -> None:
    keys = [new_key() for _ in range(WAITS)]
    for key in keys:
        client.start(key, "race", deadline=f"PT{DEADLINE_S}S")
    client.flush()
    requested = time.time()  # every request stamped and appended: all due DEADLINE_S later
    for key in keys:
        client.reply(key, {"ok": True})
    client.flush()  # appended within the deadline
    until_time(requested + DEADLINE_S + 0.5)  # every deadline has passed when the worker starts

    worker = workers("w1")
    seen = watcher.until(lambda s: len(s.outcomes) >= WAITS, 120, "an outcome for every wait")
    assert {o["outcome"] for o in seen.outcomes} == {"RECEIVED"}
    # Two ticks of the punctuator after the last outcome (each probes the inputs).
    probes = int(worker.wait_until(lambda st: True, 30, "answers")["counters"].get("probes", 0))
    worker.wait_until(lambda st: st["counters"].get("probes", 0) >= probes + 2, 30,
                      "ticks twice after the last outcome")
    counters = (worker.stats() or {}).get("counters") or {}
    assert counters.get("processed.replies") == WAITS, counters
    # Every timer fired found its wait ended by the reply: nothing was sent for one.
    assert counters.get("timers.fired", 0) == counters.get("discarded.stale_timer", 0), counters
    assert not any(k.startswith(("actions.SEND_REMINDER", "actions.RUN_ESCALATION",
                                 "outcomes.deadline")) for k in counters), counters
