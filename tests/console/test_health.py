"""/healthz and /readyz: alive while the loop turns, ready once taken over and caught up."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from streams.config import Settings
from streams.console.health import BEAT_S, LOOP_STALL_S, Health
from tests.console.conftest import Cluster, http


@dataclass
class FakeHost:
    """What /readyz reads of a worker: its ready flag, its partitions and their lag."""

    ready: asyncio.Event = field(default_factory=asyncio.Event)
    lag: dict[tuple[str, int], int] = field(default_factory=dict)
    settings: Settings = field(default_factory=Settings)

    def owned_partitions(self) -> set[int]:
        return {p for _, p in self.lag}

    def input_lag(self) -> dict[tuple[str, int], int]:
        return dict(self.lag)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _health(host: FakeHost, clock: Clock, max_lag: int = 100) -> Health:
    health = Health(host, max_lag, clock=clock)  # type: ignore[arg-type]
    health.beating = True
    return health


def test_a_worker_not_taken_over_is_not_ready_and_says_why() -> None:
    host = FakeHost(lag={("x.requests", 0): 0})
    status, body = _health(host, Clock()).readyz()
    assert status == 503
    assert body["ready"] is False
    assert "not taken over yet" in body["reasons"][0]


def test_a_worker_behind_its_bound_is_not_ready_until_it_catches_up_then_stays_ready() -> None:
    host = FakeHost(lag={("x.requests", 0): 5000, ("x.replies", 0): 20})
    host.ready.set()
    health = _health(host, Clock())
    status, body = health.readyz()
    assert status == 503
    assert body["reasons"] == ["catching up: 1 input partition(s) more than 100 records behind "
                               "(XWAIT_READY_MAX_LAG), the furthest x.requests[0] at 5000"]
    host.lag[("x.requests", 0)] = 100
    assert health.readyz()[0] == 200
    # A burst later does not take it out: it proved itself since the takeover.
    host.lag[("x.requests", 0)] = 9000
    status, body = health.readyz()
    assert status == 200 and body["maxLag"] == 9000
    # A new assignment does.
    health.reassigned()
    assert health.readyz()[0] == 503


def test_a_rebalance_clears_readiness() -> None:
    host = FakeHost(lag={("x.requests", 0): 0})
    host.ready.set()
    health = _health(host, Clock())
    assert health.readyz()[0] == 200
    host.ready.clear()
    assert health.readyz()[0] == 503
    host.ready.set()
    host.lag[("x.requests", 0)] = 500
    assert health.readyz()[0] == 503, "after the rebalance it must catch up again"


def test_a_worker_owning_nothing_is_ready_and_alive() -> None:
    host = FakeHost()
    host.ready.set()
    clock = Clock()
    health = _health(host, clock)
    assert health.readyz() == (200, {"ready": True, "reasons": [], "ownedPartitions": [],
                                     "maxLag": 0, "maxLagAllowed": 100})
    assert health.healthz()[0] == 200


def test_a_loop_held_past_the_stall_bound_is_reported_stuck_and_its_hold_is_kept() -> None:
    clock = Clock()
    health = _health(FakeHost(), clock)
    clock.now += BEAT_S
    health.beat()
    assert health.healthz()[0] == 200
    clock.now += LOOP_STALL_S + 5  # the loop held: no beat, and the probe comes late
    status, body = health.healthz()
    assert status == 503 and body["status"] == "stuck"
    assert "the event loop was held 35 s" in body["reason"]
    health.beat()
    status, body = health.healthz()
    assert status == 200 and body["longestHoldS"] == LOOP_STALL_S + 5 - BEAT_S


def test_a_heartbeat_that_stopped_is_not_alive() -> None:
    health = _health(FakeHost(), Clock())
    health.beating = False
    status, body = health.healthz()
    assert status == 503 and "heartbeat task is not running" in body["reason"]


def test_the_heartbeat_task_beats_on_a_running_loop() -> None:
    async def run() -> Health:
        health = Health(FakeHost(), 100)  # type: ignore[arg-type]
        task = asyncio.ensure_future(health.beat_forever())
        await asyncio.sleep(0)
        assert health.beating
        first = health.last_beat
        await asyncio.sleep(BEAT_S * 1.5)
        assert health.last_beat > first
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert not health.beating
        return health

    asyncio.run(run())


def test_both_workers_of_a_settled_cluster_are_alive_and_ready_without_a_token(
    cluster: Cluster,
) -> None:
    for w in cluster.workers:
        status, body = http("GET", f"{w.url}/healthz", token=None)
        assert status == 200, body
        assert body["status"] == "ok"
        status, body = http("GET", f"{w.url}/readyz", token=None)
        assert status == 200, body
        assert body["ready"] is True and len(body["ownedPartitions"]) == 2
