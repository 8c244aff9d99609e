"""The applier with a fake committer: batches decided, made durable in order, or not at all.

Commits are pipelined one deep: a batch is decided while the previous one
waits for the broker, reading that batch's rows from memory.  A commit that
fails stores nothing and stops the worker; the timers of waits with input in
flight wait for it, and only theirs.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

from streams.processor.applier import Applier
from streams.processor.batch import Batch
from streams.processor.latency import Latencies
from streams.processor.model import INPUT_ROLES, Role
from streams.processor.partitions import PartitionBook
from streams.processor.positions import Positions
from streams.processor.sequencer import Sequencer
from streams.processor.state import StateStores
from streams.timers.due import DueTimers
from tests.processor.test_records import KEY, PART, handler, reply, request


class FakeCommitter:
    """Acknowledges a batch when the test says so (or fails it)."""

    def __init__(self) -> None:
        self.batches: list[Batch] = []
        self.gates: list[asyncio.Future[None]] = []
        self.offset = 0

    async def commit(self, batch: Batch) -> dict[int, int]:
        gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.batches.append(batch)
        self.gates.append(gate)
        await gate
        self.offset += 10
        return {p: self.offset for p in batch.parts}


class FakeIntake:
    async def housekeep(self) -> None:
        pass


def port(fake: object) -> Any:
    """A fake where the room expects the real thing (it uses only what the fake has)."""
    return fake


class World:
    def __init__(self, tmp_path: Path) -> None:
        self.stores = StateStores(tmp_path)
        self.stores.open(PART)
        self.sequencer = Sequencer()
        start = {role: 0 for role in INPUT_ROLES}
        self.sequencer.assign(PART, start, 0)
        self.book = PartitionBook()
        self.book.decided[PART] = self.book.durable[PART] = Positions(start, 0)
        self.committer = FakeCommitter()
        self.failures: list[str] = []
        self.index = DueTimers(self.stores.db)
        self.index.take(PART, 0)

        async def fail(exc: BaseException, what: str) -> None:
            self.failures.append(f"{what}: {exc}")

        self.applier = Applier(
            handler=handler, sequencer=self.sequencer, stores=self.stores,
            committer=port(self.committer), book=self.book, index=self.index,
            intake=port(FakeIntake()), counters=Counter(), latency=Latencies(),
            observers=[], lock=asyncio.Lock(), wake=asyncio.Event(), fail=fail,
            probe_soon=lambda: None)

    def stage(self, *records: Any) -> None:
        self.applier._staged += list(records)

    async def settle(self) -> None:
        for _ in range(20):
            await asyncio.sleep(0)


def test_a_batch_decided_while_the_previous_commits_reads_its_rows_and_both_land_in_order(
    tmp_path: Path
) -> None:
    async def scenario() -> None:
        w = World(tmp_path)
        w.stage(request(0))
        await w.applier.run_batch()  # decided; its commit waits for the broker
        assert w.stores.get(PART, KEY.encode()) is None  # nothing stored before the ack
        w.stage(reply(0, {"decision": "approved"}))
        second = asyncio.ensure_future(w.applier.run_batch())
        await w.settle()
        assert len(w.committer.batches) == 1  # commits stay in order: it waits for the first
        w.committer.gates[0].set_result(None)
        await second
        await w.settle()
        # The reply was decided against the parked wait held in memory, and ended it.
        assert len(w.committer.batches) == 2
        assert [o.role for o in w.committer.batches[1].parts[PART].out].count(
            Role.OUTCOMES) == 1
        w.committer.gates[1].set_result(None)
        await w.applier.drain()
        state = w.stores[PART]
        assert state.changelog_offset() == 20
        assert state.positions() == w.book.durable[PART]
        assert w.book.durable[PART].next_offset[Role.REPLIES] == 1
        assert w.failures == []

    asyncio.run(scenario())


def test_a_commit_that_fails_stores_nothing_and_stops_the_worker(tmp_path: Path) -> None:
    async def scenario() -> None:
        w = World(tmp_path)
        w.stage(request(0))
        await w.applier.run_batch()
        await w.settle()
        w.committer.gates[0].set_exception(RuntimeError("refused by the broker"))
        await w.applier.drain()
        assert w.failures == ["a batch of 1 records: refused by the broker"]
        assert w.stores.get(PART, KEY.encode()) is None
        assert w.stores[PART].positions() is None
        assert w.book.durable[PART].next_offset[Role.REQUESTS] == 0

    asyncio.run(scenario())


def test_only_the_timers_of_waits_with_input_in_flight_wait_for_it(tmp_path: Path) -> None:
    async def scenario() -> None:
        w = World(tmp_path)
        assert w.applier.in_flight({PART}) == {}
        w.stage(request(0))
        staged = w.applier.in_flight({PART})
        assert set(staged) == {PART} and KEY in staged[PART].wait_keys
        assert "another-wait" not in staged[PART].wait_keys
        await w.applier.run_batch()
        await w.settle()
        committing = w.applier.in_flight({PART})
        assert KEY in committing[PART].wait_keys  # its rows are not stored yet
        w.committer.gates[0].set_result(None)
        await w.applier.drain()
        assert w.applier.in_flight({PART}) == {}

    asyncio.run(scenario())


def test_a_commit_that_never_returns_stops_the_worker(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Every step of a commit is bounded; one that still has not returned long after hangs
    in the Kafka client, and the worker stops (to be started again) instead of idling."""
    from types import SimpleNamespace

    from streams.processor import worker as worker_module

    monkeypatch.setattr(worker_module, "COMMIT_HANG_S", 0.05)
    monkeypatch.setattr(worker_module, "WATCH_EVERY_S", 0.01)

    async def scenario() -> list[str]:
        w = World(tmp_path)
        w.stage(request(0))
        await w.applier.run_batch()
        await w.settle()  # the commit waits for the broker, for good
        stopped: list[str] = []

        async def fail(exc: BaseException, what: str) -> None:
            stopped.append(f"{what}: {exc}")
            host.failure = exc

        host = SimpleNamespace(failure=None, applier=w.applier, fail=fail)
        await asyncio.wait_for(worker_module.Worker.watch(host), 5)  # type: ignore[arg-type]
        return stopped

    assert asyncio.run(scenario()) == ["a commit: the commit in flight has not returned in 0 s"]
