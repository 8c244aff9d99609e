"""A second worker joins: it takes over partitions, and their timers still fire."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from streams.config import Settings
from streams.partitioning import partition_for
from tests.e2e.harness import Client, Watcher, WorkerProcess, new_key

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def test_a_joining_worker_takes_over_partitions_and_fires_their_timers(
    e2e: Settings, workers: Callable[..., WorkerProcess], client: Client, watcher: Watcher
) -> None:
    first = workers("w1")
    keys = [new_key() for _ in range(200)]
    for key in keys:
        # No reply: every wait ends by its timer, due well after the second worker joined.
        # (At 20 s, beside a crash bench, parking and the join took about that long: the
        # first worker escalated some moved waits itself before it handed them over.)
        client.start(key, "crash", deadline="PT40S")
    client.flush()
    first.wait_until(lambda s: s["counters"].get("processed.requests", 0) >= len(keys), 30,
                     "did not park every wait")

    second = workers("w2")
    # A partition is owned once its own restore is done: wait until the two workers'
    # partitions are all the partitions, each owned once, before reading which moved.
    every = set(range(e2e.partitions))

    found: list[set[int]] = []

    def settled() -> bool:
        mine = set((second.stats() or {}).get("ownedPartitions", []))
        kept = set((first.stats() or {}).get("ownedPartitions", []))
        found.append(mine)
        return bool(mine) and not mine & kept and mine | kept == every

    second.wait_until(lambda s: settled(), 60, "took no partition")
    moved = found[-1]
    moved_keys = [k for k in keys if partition_for(k.encode(), e2e.partitions) in moved]
    assert moved_keys, "some waits were parked on the partitions that moved"
    # Each counts the waits of its partitions, from the rows it restored or
    # kept (a wait already ended is still there, done, for its retention).
    second.wait_until(lambda s: sum(s["waits"].values()) == len(moved_keys), 30,
                      f"did not count the {len(moved_keys)} waits it took over")
    first.wait_until(lambda s: sum(s["waits"].values()) == len(keys) - len(moved_keys), 30,
                     "lost count of the waits it kept")

    seen = watcher.until(lambda s: all(s.for_key("outcomes", k) for k in keys), 90,
                         "every wait to end")
    for key in keys:
        assert [o["outcome"] for o in seen.for_key("outcomes", key)][:1] == ["ESCALATED"]
    # The joiner decided them: its counters count a batch once its rows are stored,
    # a moment after the batch's outcomes were published (a read at once found 0).
    second.wait_until(lambda s: s["counters"].get("outcomes.deadline_exhausted", 0)
                      >= len(moved_keys), 30, "did not escalate the waits it took over")
    stats = second.stats() or {}
    assert stats["counters"].get("timers.fired", 0) >= len(moved_keys)
