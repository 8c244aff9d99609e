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

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from streams.config import Guarantee, Settings
from tests.e2e.conftest import new_e2e
from tests.e2e.harness import Client, Watcher, WorkerProcess, new_key

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

WAITS = 4000


@pytest.fixture(scope="module")
def e2e(kafka_bootstrap: str, e2e_folder: Path) -> Settings:
    return new_e2e(kafka_bootstrap, e2e_folder, "lv", partitions=4,
                   guarantee=Guarantee.EXACTLY_ONCE)


def _applied(stats: dict[str, Any]) -> int:
    return sum(o for part in stats.get("positions", {}).values()
               for role, o in part.items() if role in ("requests", "replies"))


def test_a_worker_stopped_while_behind_leaves_no_duplicate_outcome(
    workers: Callable[..., WorkerProcess], client: Client, watcher: Watcher
) -> None:
    keys = [new_key() for _ in range(WAITS)]
    for key in keys:
        client.start(key, "crash", deadline="PT120S")
    client.flush()
    for key in keys:
        client.reply(key, {"ok": True})
    client.flush()

    first = workers("w1", wait_owned=False)
    second = workers("w2", wait_owned=False)
    for w in (first, second):
        w.wait_until(lambda s: len(s["ownedPartitions"]) == 2, 120, "shares no partitions")
    stats = second.wait_until(lambda s: _applied(s) >= 200, 60, "applied nothing")
    second.stop()
    behind = 2 * WAITS // 2 - _applied(stats)
    assert behind > 1000, f"stopped while behind: {behind} inputs of its share not applied"

    first.wait_until(lambda s: len(s["ownedPartitions"]) == 4, 60, "took the partitions over")
    seen = watcher.until(lambda s: all(s.for_key("outcomes", k) for k in keys), 180,
                         "an outcome for every wait")
    watcher.poll(3.0)  # a duplicate, if any, would be committed by now
    twice = [k for k in keys if len(seen.for_key("outcomes", k)) > 1]
    assert not twice, f"{len(twice)} waits ended twice for a read_committed consumer"
    assert {o["outcome"] for o in seen.outcomes} == {"RECEIVED"}
