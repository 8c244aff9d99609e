"""Taking partitions over and giving them up, with fakes for Kafka: the order and the races.

A takeover fences the previous owner, then restores to the last stable offset
read after the fence, then seeks the inputs; each partition decides as soon
as its own restore is done.  A revocation waits for the batch in flight and
cuts restores short.  These run in milliseconds, without a broker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from streams.processor.context import PartitionStart
from streams.processor.model import INPUT_ROLES, Role
from streams.processor.partitions import PartitionBook
from streams.processor.positions import Positions
from streams.processor.restore import Restored, RestoreFailed
from streams.processor.sequencer import Sequencer
from streams.processor.state import StateStores
from streams.processor.takeover import Ownership
from streams.processor.tuning import TUNING
from streams.timers.due import DueTimers
from tests.processor.contexts import Escalations, context

TOPICS = {role: f"t.{role.value}" for role in Role}  # as `context()` names them
CHANGELOG = "t-processor-waits-changelog"


class Log:
    """The order in which the fakes were called."""

    def __init__(self) -> None:
        self.calls: list[str] = []


class FakeCommitter:
    def __init__(self, log: Log) -> None:
        self.log = log

    async def assign(self, partitions: set[int]) -> None:
        self.log.calls.append(f"fence {sorted(partitions)}")

    async def revoke(self, partitions: set[int]) -> None:
        self.log.calls.append(f"unfence {sorted(partitions)}")


class FakePunctuator:
    def __init__(self, log: Log, earliest: dict[tuple[str, int], int] | None = None) -> None:
        self.log = log
        self.earliest = earliest or {}

    async def ask(self, tps: list[tuple[str, int]], *, earliest: bool = False
                  ) -> dict[tuple[str, int], int]:
        if not earliest:
            self.log.calls.append(f"ends {[p for _, p in tps]}")
            return {tp: 100 + tp[1] for tp in tps}
        return {tp: self.earliest.get(tp, 0) for tp in tps}


class FakeRestorer:
    """Restores that finish when the test says so."""

    def __init__(self, log: Log, stores: StateStores) -> None:
        self.log = log
        self.stores = stores
        self.pending: dict[int, asyncio.Future[Restored]] = {}
        self.followed: set[int] = set()
        self.released: list[int] = []

    def restore(self, partition: int, until: int) -> asyncio.Future[Restored]:
        self.log.calls.append(f"restore {partition} to {until}")
        self.stores.open(partition)
        self.followed.discard(partition)  # a standby's copy becomes the restore's start
        future: asyncio.Future[Restored] = asyncio.get_running_loop().create_future()
        self.pending[partition] = future
        return future

    def finish(self, partition: int) -> None:
        self.pending.pop(partition).set_result(Restored(partition, 3, 0, 3, 0.01))

    def follow(self, partition: int) -> None:
        self.stores.open(partition)
        self.followed.add(partition)

    def release(self, partition: int) -> asyncio.Future[Restored]:
        self.released.append(partition)
        self.followed.discard(partition)
        future = self.pending.pop(partition, None)
        if future is not None and not future.done():
            future.set_exception(RestoreFailed("stopped"))
        done: asyncio.Future[Restored] = asyncio.get_running_loop().create_future()
        done.set_result(Restored(partition, 0, 0, 0, 0.0))
        return done

    def stop(self) -> None:
        pass


class FakeIntake:
    def __init__(self, log: Log) -> None:
        self.log = log
        self.starts: dict[int, dict[Role, int]] = {}

    def take(self, starts: Sequence[PartitionStart]) -> None:
        self.log.calls.append(f"seek {sorted(s.partition for s in starts)}")
        self.starts.update({s.partition: s.next_offset for s in starts})

    def forget(self, partitions: set[int]) -> None:
        self.log.calls.append(f"forget {sorted(partitions)}")


class FakeApplier:
    def __init__(self, log: Log) -> None:
        self.log = log
        self.committing = asyncio.Event()
        self.committing.set()

    async def drain(self) -> None:
        await self.committing.wait()
        self.log.calls.append("drained")

    def take(self, starts: Sequence[PartitionStart]) -> None:
        pass

    def forget(self, partitions: set[int]) -> None:
        pass


def port(fake: object) -> Any:
    """A fake where the room expects the real thing (it uses only what the fake has)."""
    return fake


class World:
    def __init__(self, tmp_path: Path, earliest: dict[tuple[str, int], int] | None = None,
                 retake_after: float = 20.0) -> None:
        self.log = Log()
        self.stores = StateStores(tmp_path)
        self.restorer = FakeRestorer(self.log, self.stores)
        self.intake = FakeIntake(self.log)
        self.applier = FakeApplier(self.log)
        self.sequencer = Sequencer()
        self.book = PartitionBook()
        self.escalations = Escalations()
        self.failures = self.escalations.failures
        ctx = context(escalations=self.escalations, changelog=CHANGELOG,
                      session_timeout=retake_after)
        index = DueTimers(self.stores.db, scan_slack=TUNING.timer_scan_slack)
        self.ownership = Ownership(
            ctx, self.stores, port(self.restorer), port(FakeCommitter(self.log)),
            port(self.applier), port(FakePunctuator(self.log, earliest)),
            rooms=[self.book, self.sequencer, index, port(self.applier), port(self.intake)])
        self.ready = self.ownership.ready

    async def settle(self) -> None:
        for _ in range(20):
            await asyncio.sleep(0)

    async def take(self, active: set[int], standbys: set[int] | None = None) -> None:
        """Assign the partitions and let each active one's restore finish: taken over."""
        self.ownership.assign(active, standbys or set())
        await self.settle()
        for partition in sorted(active):
            self.restorer.finish(partition)
        await self.settle()


def run(coro: Any) -> None:
    asyncio.run(coro)


def test_each_partition_decides_as_soon_as_its_own_restore_is_done(tmp_path: Path) -> None:
    async def scenario() -> None:
        w = World(tmp_path)
        w.ownership.assign({0, 1}, set())
        await w.settle()
        assert w.ownership.active == set() and not w.ready.is_set()
        w.restorer.finish(1)
        await w.settle()
        assert w.ownership.active == {1} and set(w.intake.starts) == {1}
        assert 1 in w.sequencer.partitions() and not w.ready.is_set()
        w.restorer.finish(0)
        await w.settle()
        assert w.ownership.active == {0, 1} and w.ready.is_set()
        assert w.failures == []

    run(scenario())


def test_the_old_owner_is_fenced_before_the_restore_target_is_read(tmp_path: Path) -> None:
    async def scenario() -> None:
        w = World(tmp_path)
        await w.take({2})
        assert w.log.calls == ["fence [2]", "ends [2]", "restore 2 to 102", "seek [2]"]

    run(scenario())


def test_inputs_start_at_the_stored_positions_or_the_earliest_record_kept(
    tmp_path: Path
) -> None:
    earliest = {(TOPICS[Role.REQUESTS], 0): 7, (TOPICS[Role.REPLIES], 1): 4}

    async def scenario() -> None:
        w = World(tmp_path, earliest)
        stored = {Role.REQUESTS: 5, Role.REPLIES: 9, Role.COMMANDS: 2, Role.TIMERS: 11}
        w.stores.open(0).write({}, Positions(stored, 1234), 0)
        await w.take({0, 1})
        # Below what retention kept: from the earliest record (a warning says so).
        assert w.intake.starts[0] == {**stored, Role.REQUESTS: 7}
        # Never decided: every input from its earliest record.
        assert w.intake.starts[1] == {role: earliest.get((TOPICS[role], 1), 0)
                                      for role in INPUT_ROLES}
        assert w.sequencer.time(0) == 1234 and w.book.decided[0].stream_time == 1234

    run(scenario())


def test_a_partition_revoked_while_it_restores_is_never_taken_over(tmp_path: Path) -> None:
    async def scenario() -> None:
        w = World(tmp_path)
        w.ownership.assign({0, 1}, set())
        await w.settle()
        w.restorer.finish(0)
        await w.settle()
        await w.ownership.revoke({0, 1})
        await w.settle()
        assert 1 in w.restorer.released
        assert w.ownership.active == set() and not w.ready.is_set()
        assert w.failures == []  # a restore cut short on purpose is no failure
        assert "seek [1]" not in w.log.calls
        # Its transactional producer goes too, made at the takeover's first step: kept,
        # it came back with the partition after another owner had fenced it, and the
        # first commit failed (exactly_once, a CI run at load 15).
        assert w.log.calls.count("fence [0, 1]") == 1
        assert "unfence [0, 1]" in w.log.calls

    run(scenario())


def test_a_revocation_waits_for_the_batch_in_flight_before_it_forgets(tmp_path: Path) -> None:
    async def scenario() -> None:
        w = World(tmp_path)
        await w.take({0})
        w.applier.committing.clear()  # a batch is being committed
        revoking = asyncio.ensure_future(w.ownership.revoke({0}))
        await w.settle()
        assert not revoking.done() and w.ownership.active == {0}
        w.applier.committing.set()
        await revoking
        tail = w.log.calls[-3:]
        assert tail == ["drained", "forget [0]", "unfence [0]"]
        assert w.ownership.active == set() and 0 not in w.sequencer.partitions()

    run(scenario())


def test_standbys_are_followed_and_databases_neither_owned_nor_standby_are_closed(
    tmp_path: Path
) -> None:
    async def scenario() -> None:
        w = World(tmp_path)
        await w.take({0}, {1, 2})
        assert w.restorer.followed == {1, 2}
        await w.ownership.revoke({0})
        w.ownership.assign({0, 1}, {3})  # 1 becomes active, 2 is nobody's here, 3 is new
        await w.settle()
        assert w.restorer.followed == {3}
        assert 2 in w.restorer.released and 2 not in w.stores
        w.restorer.finish(0)
        w.restorer.finish(1)
        await w.settle()
        assert w.ownership.active == {0, 1} and w.ready.is_set()

    run(scenario())


def test_a_restore_that_fails_stops_the_worker(tmp_path: Path) -> None:
    async def scenario() -> None:
        w = World(tmp_path)
        w.ownership.assign({0}, set())
        await w.settle()
        w.restorer.pending.pop(0).set_exception(RestoreFailed("the broker is gone"))
        await w.settle()
        assert w.failures and "taking over partitions [0]" in w.failures[0]
        assert w.ownership.active == set()

    run(scenario())


@pytest.mark.parametrize("stopping_with_a_failure", [False, True])
def test_a_stopping_worker_gives_every_partition_up_unless_it_failed(
    tmp_path: Path, stopping_with_a_failure: bool
) -> None:
    async def scenario() -> None:
        w = World(tmp_path)
        await w.take({0, 1})
        await w.ownership.stop(failed=stopping_with_a_failure)
        if stopping_with_a_failure:
            assert w.ownership.active == {0, 1}  # it commits nothing more anyway
        else:
            assert w.ownership.active == set() and "unfence [0, 1]" in w.log.calls
            assert w.stores.partitions() == set()
            w.ownership.assign({0}, set())  # a rebalance while stopping takes nothing
            assert w.ownership.assigned == set()

    run(scenario())


def test_a_fenced_partition_is_given_up_and_the_groups_next_assignment_decides(
    tmp_path: Path
) -> None:
    """Commit F5: a zombie's fenced commit gives the partition up at once; the rebalance
    its next heartbeat brings then revokes and assigns as usual, and no retake follows."""
    async def scenario() -> None:
        w = World(tmp_path, retake_after=0.05)
        await w.take({0, 1})
        w.ownership.lost(frozenset({1}))
        await w.settle()
        assert w.ownership.active == {0} and "unfence [1]" in w.log.calls
        assert not w.ready.is_set(), "not every partition faust gave it is decided"
        await w.ownership.revoke({0, 1})  # the rebalance: the group moved it elsewhere
        w.ownership.assign({0}, set())
        await w.settle()
        w.restorer.finish(0)
        await asyncio.sleep(0.2)  # past retake_after: nothing of the lost partition comes back
        await w.settle()
        assert w.ownership.active == {0} and w.ready.is_set()
        assert [c for c in w.log.calls if c.startswith("fence")] == ["fence [0, 1]", "fence [0]"]

    run(scenario())


def test_a_partition_lost_without_a_rebalance_is_taken_over_again(tmp_path: Path) -> None:
    """The fence came from a takeover cut short, not from a new owner of the group: faust
    still gives the partition to this worker, so it takes it back after `retake_after`."""
    async def scenario() -> None:
        w = World(tmp_path, retake_after=0.05)
        await w.take({0})
        w.ownership.lost(frozenset({0}))
        for _ in range(200):
            await asyncio.sleep(0.01)
            if 0 in w.restorer.pending:
                break
        w.restorer.finish(0)
        await w.settle()
        assert w.ownership.active == {0} and w.ready.is_set()
        assert [c for c in w.log.calls if c.startswith("fence")] == ["fence [0]", "fence [0]"]

    run(scenario())
