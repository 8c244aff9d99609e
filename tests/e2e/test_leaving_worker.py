"""A worker stopped while behind hands its partitions over without a duplicate.

Under exactly_once a read_committed consumer sees each outcome once, also when
a worker is stopped (SIGTERM) in the middle of a backlog and another one takes
its partitions over.  faust leaves the consumer group only after it stopped
its fetch and agents, and the worker's applier used to go on deciding and
committing what it held meanwhile: the next owner had restored the changelog
without those commits and decided the same inputs again (2,809 duplicate
outcomes in one long crash run).  Now the stopping worker gives its partitions
up first, and the next owner, once it has fenced the previous one, reads what
the changelog holds beyond its restore before it trusts rows and positions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from streams.config import Guarantee, Settings
from streams.partitioning import partition_for
from tests.e2e.conftest import new_e2e
from tests.e2e.harness import Client, Watcher, WorkerProcess, new_key

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

WAITS = 12_000
# Long enough that the second worker, frozen while the load is produced, stays in the
# group however slowly a busy machine produces it.
SESSION_TIMEOUT_S = 90.0


@pytest.fixture(scope="module")
def e2e(kafka_bootstrap: str, e2e_folder: Path) -> Settings:
    return new_e2e(kafka_bootstrap, e2e_folder, "lv", partitions=4,
                   guarantee=Guarantee.EXACTLY_ONCE).with_overrides(
                       session_timeout=SESSION_TIMEOUT_S)


def _applied(stats: dict[str, Any]) -> int:
    """Requests and replies applied (their stored positions) in the worker's partitions."""
    return sum(o for part in stats.get("positions", {}).values()
               for role, o in part.items() if role in ("requests", "replies"))


def _key(outcome: dict[str, Any]) -> str:
    key: str = outcome["correlationKey"].split("~")[0]
    return key


def _inputs(keys: list[str], stats: dict[str, Any], partitions: int) -> int:
    """Requests and replies (one each a key) produced to the worker's partitions."""
    owned = set(stats["ownedPartitions"])
    return 2 * sum(1 for k in keys if partition_for(k.encode(), partitions) in owned)


def test_a_worker_stopped_while_behind_leaves_no_duplicate_outcome(
    e2e: Settings, workers: Callable[..., WorkerProcess], client: Client, watcher: Watcher
) -> None:
    first = workers("w1", wait_owned=False)
    second = workers("w2", wait_owned=False)
    for w in (first, second):
        w.wait_until(lambda s: len(s["ownedPartitions"]) == 2, 120, "shares no partitions")
    # The load comes once both share the partitions, with the second worker frozen
    # meanwhile: preloaded, the first worker (alone until the second joined) had drained
    # it all before the second got its share; produced while both ran, on a busy machine
    # the test's producer was the slower one and the second worker kept up (0 behind).
    keys = [new_key() for _ in range(WAITS)]
    second.freeze()
    try:
        for key in keys:
            client.start(key, "crash", deadline="PT120S")
        client.flush()
        for key in keys:
            client.reply(key, {"ok": True})
        client.flush()
    finally:
        second.thaw()
    # Stopped as soon as it decides and commits at full speed, with plenty fetched and
    # held: a second's sleep here let a worker three times faster apply all but 76 of
    # its 12,000 inputs first.
    stats = second.wait_until(lambda s: len(s["ownedPartitions"]) == 2 and _applied(s) > 0,
                              10, "lost partitions, or applied nothing")
    second.stop()
    behind = _inputs(keys, stats, e2e.partitions) - _applied(stats)
    assert behind > 1000, f"stopped while behind: {behind} inputs of its share not applied"
    log = second.log_path.read_text(errors="replace")
    gave_up = log.find("stopping: the batch in flight is committed, every partition given up")
    assert 0 <= gave_up < log.find("LeaveGroup request succeeded"), \
        "the stopped worker gave its partitions up before it left the group"

    first.wait_until(lambda s: len(s["ownedPartitions"]) == 4, 60, "took the partitions over")
    seen = watcher.until(lambda s: len({_key(o) for o in s.outcomes}) >= WAITS,
                         180, "an outcome for every wait")
    watcher.poll(3.0)  # a duplicate, if any, would be committed by now
    ended = Counter(_key(o) for o in seen.outcomes)
    assert set(ended) == set(keys)
    twice = [k for k, n in ended.items() if n > 1]
    assert not twice, f"{len(twice)} waits ended twice for a read_committed consumer"
    assert {o["outcome"] for o in seen.outcomes} == {"RECEIVED"}
