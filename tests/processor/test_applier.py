"""The applier with a fake committer: batches decided, made durable in order, or not at all.

Commits are pipelined one deep: a batch is decided while the previous one
waits for the broker, reading that batch's rows from memory.  A commit that
fails stores nothing and stops the worker.  Timers due by stream time are
decided in the batches, after the staged records, against the rows in flight,
as many as input records fit; a long batch lets the event loop run between
its decisions.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from streams import codec
from streams.partitioning import partition_for
from streams.processor.applier import Applier
from streams.processor.batch import Batch
from streams.processor.commit import Committed
from streams.processor.context import wall_ms as now_ms
from streams.processor.model import INPUT_ROLES, Role
from streams.processor.partitions import PartitionBook
from streams.processor.positions import Positions
from streams.processor.sequencer import Sequencer
from streams.processor.state import StateStores
from streams.processor.tuning import TUNING, Tuning
from streams.timers.due import DueTimers
from tests.processor.contexts import Escalations, context
from tests.processor.test_records import KEY, NOW, PART, PARTITIONS, handler, record, reply, request

pytestmark = [pytest.mark.rule2]  # timers fire after the records appended before them

DAY_MS = 86_400_000


class FakeCommitter:
    """Acknowledges a batch when the test says so (or fails it, or says which of its
    partitions a newer owner fenced: the gate's result)."""

    def __init__(self) -> None:
        self.batches: list[Batch] = []
        self.gates: list[asyncio.Future[frozenset[int] | None]] = []
        self.offset = 0

    async def commit(self, batch: Batch) -> Committed:
        gate: asyncio.Future[frozenset[int] | None] = \
            asyncio.get_running_loop().create_future()
        self.batches.append(batch)
        self.gates.append(gate)
        fenced = await gate or frozenset()
        self.offset += 10
        return Committed({p: self.offset for p in batch.parts if p not in fenced}, fenced)


def port(fake: object) -> Any:
    """A fake where the room expects the real thing (it uses only what the fake has)."""
    return fake


# The scenario tests are alike in shape, with each other and with test_tracing.py's
# (duplicates lists the pairs), deliberately: async scenarios run by asyncio.run, each
# with its own World and its own steps.
class World:
    def __init__(self, tmp_path: Path, partitions: tuple[int, ...] = (PART,),
                 tuning: Tuning = TUNING) -> None:
        self.stores = StateStores(tmp_path)
        self.sequencer = Sequencer()
        self.book = PartitionBook()
        start = {role: 0 for role in INPUT_ROLES}
        for p in partitions:
            self.stores.open(p)
            self.sequencer.assign(p, start, 0)
            self.book.decided[p] = self.book.durable[p] = Positions(start, 0)
        self.committer = FakeCommitter()
        self.escalations = Escalations()
        self.failures = self.escalations.failures
        self.lost = self.escalations.lost
        self.index = DueTimers(self.stores.db, scan_slack=tuning.timer_scan_slack)
        for p in partitions:
            self.index.own(p, 0)
        self.ctx = context(tuning=tuning, escalations=self.escalations, partitions=PARTITIONS,
                           batch_linger=0.0)
        self.applier = Applier(self.ctx, handler, self.sequencer, self.stores,
                               port(self.committer), self.book, self.index, None)
        self.applier_starts: list[float] = []  # when `run` began each batch (monotonic)
        run_batch = self.applier.run_batch

        async def timed_batch() -> None:
            self.applier_starts.append(time.monotonic())
            await run_batch()

        self.applier.run_batch = timed_batch  # type: ignore[method-assign]

    def stop(self) -> None:
        """The worker failed: every loop ends."""
        self.ctx.failure.exc = RuntimeError("the test is over")
        self.ctx.wake.set()

    def stage(self, *records: Any) -> None:
        self.applier._staged += list(records)

    async def settle(self) -> None:
        for _ in range(20):
            await asyncio.sleep(0)

    async def park(self) -> None:
        """The test's wait parked: its request decided, committed and stored."""
        self.stage(request(0))
        await self.applier.run_batch()
        await self.settle()
        self.committer.gates[-1].set_result(None)
        await self.applier.drain()


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


def test_a_fenced_partition_stores_nothing_and_the_worker_goes_on(tmp_path: Path) -> None:
    """Commit F4/F5: a newer owner fenced the partition's transaction.  Nothing of the
    batch is stored (the database stays a prefix of the log), the worker does not stop,
    the batch decided meanwhile on the fenced rows is not committed for that partition,
    and ownership hears which partitions were lost."""
    async def scenario() -> None:
        w = World(tmp_path)
        w.stage(request(0))
        await w.applier.run_batch()
        w.stage(reply(0, {"decision": "approved"}))  # decided on the first batch's rows
        second = asyncio.ensure_future(w.applier.run_batch())
        await w.settle()
        w.committer.gates[0].set_result(frozenset({PART}))
        await second
        await w.applier.drain()
        assert w.failures == []
        assert w.lost == [frozenset({PART})]
        assert w.stores.get(PART, KEY.encode()) is None
        assert w.stores[PART].positions() is None
        assert w.stores[PART].changelog_offset() is None
        assert w.book.durable[PART].next_offset[Role.REQUESTS] == 0
        assert len(w.committer.batches) == 1  # the reply's batch held nothing else
        w.stage(reply(1, {"decision": "approved"}))  # fetched before ownership gave it up
        await w.applier.run_batch()
        assert len(w.committer.batches) == 1

    asyncio.run(scenario())


def start_request(key: str, partition: int, offset: int = 0) -> Any:
    return record(Role.REQUESTS, codec.encode("StartWait", {
        "correlationKey": key, "definition": "expense-approval", "requestedAt": NOW}), offset,
        key, partition)


def requests_in_partitions(count: int) -> list[Any]:
    """One request each for waits in `count` different partitions."""
    keys: dict[int, str] = {}
    n = 0
    while len(keys) < count:
        key = f"k-{n:016x}"
        keys.setdefault(partition_for(key.encode(), PARTITIONS), key)
        n += 1
    return [start_request(key, p) for p, key in keys.items()]


def requests_in(partition: int, count: int, first: int = 0, name: str = "w") -> list[Any]:
    """Requests for `count` waits of `partition` (keys `name-...`), at offsets from `first`."""
    keys = (f"{name}-{n:016x}" for n in range(10**9))
    mine = (k for k in keys if partition_for(k.encode(), PARTITIONS) == partition)
    return [start_request(next(mine), partition, first + i) for i in range(count)]


@pytest.mark.parametrize("yield_after_s", [0.0, 600.0])
def test_a_long_batch_lets_the_loop_run_between_its_decisions_and_decides_the_same(
    tmp_path: Path, yield_after_s: float
) -> None:
    """A long batch does not hold the event loop: other tasks run between its decisions."""
    requests = requests_in_partitions(3)
    tuning = replace(TUNING, yield_after_s=yield_after_s,
                     idle_wake_s=max(TUNING.idle_wake_s, 2 * yield_after_s))

    async def scenario() -> None:
        w = World(tmp_path, tuple(r.partition for r in requests), tuning)
        turns = 0

        async def other_task() -> None:
            nonlocal turns
            while True:
                turns += 1
                await asyncio.sleep(0)

        other = asyncio.ensure_future(other_task())
        await asyncio.sleep(0)
        w.stage(*requests)
        before = turns
        await w.applier.run_batch()
        ran_between = turns - before
        other.cancel()
        await w.settle()  # the commit starts
        if yield_after_s == 0:
            assert ran_between >= 2  # after the first and the second decision at least
        else:
            assert ran_between == 0
        [batch] = w.committer.batches
        assert sorted(batch.parts) == sorted(r.partition for r in requests)
        for r in requests:
            part = batch.parts[r.partition]
            assert list(part.rows) == [r.key]  # each wait parked in its own partition
            assert part.positions.next_offset[Role.REQUESTS] == 1
        assert batch.counters["processed.requests"] == 3
        assert len(batch) == 3
        w.committer.gates[0].set_result(None)
        await w.applier.drain()
        for r in requests:
            assert r.key is not None and w.stores.get(r.partition, r.key) is not None
        assert w.failures == []

    asyncio.run(scenario())


def far_ahead(w: World) -> None:
    """A probe that finds every input caught up a month from now: stream time moves there."""
    w.sequencer.probed(now_ms() + 30 * DAY_MS, [(role, PART, 0) for role in INPUT_ROLES])


# The tests here begin alike in shape, with each other and test_tracing.py's (duplicates
# lists the pairs), deliberately: each scenario runs its own World in asyncio.run.
def test_a_due_timer_is_decided_in_a_batch_of_its_own_and_moves_no_input_position(
    tmp_path: Path
) -> None:
    async def scenario() -> None:
        w = World(tmp_path)
        await w.park()
        await w.applier.run_batch()  # stream time 0: nothing is due
        assert len(w.committer.batches) == 1
        far_ahead(w)
        assert w.applier.index.may_be_due(w.sequencer.times())
        # Nothing staged: the due timers make the batches.  Firing a wait's last
        # due timer fires every earlier one at its own time; what that arms is
        # due too and fires once stored, until the wait's escalations end it.
        outcomes = 0
        for n in range(1, 20):
            await w.applier.run_batch()
            await w.settle()
            if len(w.committer.batches) == n:
                break
            fired = w.committer.batches[n]
            assert fired.counters["timers.fired"] >= 1
            assert fired.counters["processed.timers"] == 0  # no timer record was read
            assert fired.parts[PART].positions.next_offset == w.book.durable[PART].next_offset
            outcomes += [o.role for o in fired.parts[PART].out].count(Role.OUTCOMES)
            w.committer.gates[n].set_result(None)
            await w.applier.drain()
            assert w.stores[PART].positions() == w.book.durable[PART]
        assert outcomes == 1
        assert 2 < len(w.committer.batches) < 19
        assert not w.applier.index.may_be_due(w.sequencer.times())
        assert w.book.durable[PART].next_offset[Role.TIMERS] == 0
        assert w.failures == []

    asyncio.run(scenario())


def test_due_timers_are_not_held_back_by_a_full_batch_of_input(tmp_path: Path) -> None:
    """A saturated worker decides as many due timers per batch as input records.

    With a small share beside a full batch of input, deadlines fell seconds
    behind the replies decided with them.
    """
    async def scenario() -> None:
        w = World(tmp_path)
        parked = requests_in(PART, TUNING.timers_max + 50)
        w.stage(*parked)
        await w.applier.run_batch()
        await w.settle()
        w.committer.gates[0].set_result(None)
        await w.applier.drain()
        far_ahead(w)  # every parked wait's first timer is due
        w.stage(*requests_in(PART, TUNING.batch_max, first=len(parked), name="new"))
        await w.applier.run_batch()
        await w.settle()
        batch = w.committer.batches[1]
        assert batch.counters["processed.requests"] == TUNING.batch_max
        # new waits, then the fired ones
        assert len(batch.parts[PART].rows) == TUNING.batch_max + TUNING.timers_max
        assert batch.counters["timers.fired"] == TUNING.timers_max
        assert w.failures == []

    asyncio.run(scenario())


def test_a_timer_due_while_the_reply_that_ended_its_wait_commits_is_found_stale(
    tmp_path: Path
) -> None:
    async def scenario() -> None:
        w = World(tmp_path)
        await w.park()
        w.stage(reply(0, {"decision": "approved"}))
        await w.applier.run_batch()  # the reply ends the wait; its commit waits
        await w.settle()
        far_ahead(w)  # the stored index still lists the wait's timers
        third = asyncio.ensure_future(w.applier.run_batch())
        await w.settle()
        w.committer.gates[1].set_result(None)
        await third
        await w.settle()
        assert len(w.committer.batches) == 3
        timers = w.committer.batches[2]
        assert timers.counters["discarded.stale_timer"] == 1
        assert timers.parts[PART].out == []  # no escalation after the reply's outcome
        w.committer.gates[2].set_result(None)
        await w.applier.drain()
        assert w.failures == []

    asyncio.run(scenario())


def test_a_commit_that_never_returns_stops_the_worker(tmp_path: Path) -> None:
    """Every step of a commit is bounded; one that still has not returned long after hangs
    in the Kafka client, and the worker stops (to be started again) instead of idling."""
    from types import SimpleNamespace

    from streams.processor.worker import Worker

    quick = replace(TUNING, message_timeout_s=0.01, flush_timeout_s=0.02,
                    transaction_timeout_s=0.01, stall_s=0.001, commit_hang_s=0.05,
                    watch_every_s=0.01)

    async def scenario() -> list[str]:
        w = World(tmp_path)
        w.stage(request(0))
        await w.applier.run_batch()
        await w.settle()  # the commit waits for the broker, for good
        stopped: list[str] = []

        async def fail(exc: BaseException, what: str) -> None:
            stopped.append(f"{what}: {exc}")
            host.failure = exc

        host = SimpleNamespace(failure=None, applier=w.applier, fail=fail,
                               ctx=SimpleNamespace(tuning=quick),
                               committer=SimpleNamespace(steps=SimpleNamespace(started=None)))
        await asyncio.wait_for(Worker.watch(host), 5)  # type: ignore[arg-type]
        return stopped

    assert asyncio.run(scenario()) == [
        "a commit: a step of the commit in flight has not returned in 0 s"]


def test_without_a_linger_each_record_after_the_previous_commit_is_a_batch_of_its_own(
    tmp_path: Path
) -> None:
    """`XWAIT_BATCH_LINGER=0`: a record that comes after the previous commit is decided at
    once, in a batch of its own."""

    async def scenario() -> list[int]:
        w = World(tmp_path)
        running = asyncio.ensure_future(w.applier.run())
        await offer(w, request(0))
        await asyncio.wait_for(committed(w, 1), 10)
        await offer(w, reply(0, {"decision": "approved"}))  # comes after the commit ...
        # ... and its batch begins at once: the command comes after that (on a busy
        # machine, load 20, twenty loop turns were not enough for it).
        await asyncio.wait_for(began(w, 2), 10)
        await offer(w, record(Role.COMMANDS, None, 0))  # ... and so does this one, later
        await asyncio.wait_for(committed(w, 2), 10)
        await asyncio.wait_for(committed(w, 3), 10)
        w.stop()
        await asyncio.wait_for(running, 10)
        return [len(b) for b in w.committer.batches]

    assert asyncio.run(scenario()) == [1, 1, 1]


class FakeClock:
    """The stream clock as the applier sees it: asked to probe; `covered` moved by the test
    (the sequencer's `taken` when the latest probe answered was sent)."""

    def __init__(self) -> None:
        self.covered = 0
        self.asked = 0

    def probe_soon(self) -> None:
        self.asked += 1


OTHER = (PART + 1) % PARTITIONS


@pytest.mark.parametrize("answered", [True, False])
def test_a_batch_waits_for_the_linger_only_while_records_taken_wait_for_a_probe(
    tmp_path: Path, answered: bool
) -> None:
    """`XWAIT_BATCH_LINGER`: a batch starts a linger after the previous one, or as soon as
    every record taken since then that a probe could release is released (the fetch waited
    at the broker for the linger already).  Here a reply is released at once and a request
    of another partition waits for a probe of its quiet topics: the batch waits for the
    probe's answer and takes both - or, unanswered, starts when the linger has passed,
    with the reply alone."""
    linger = 30.0 if answered else 0.3  # answered: a batch that waited for it would time out

    async def scenario() -> tuple[list[int], float]:
        w = World(tmp_path, partitions=(PART, OTHER))
        clock = FakeClock()
        w.applier.clock = port(clock)
        w.applier.linger = linger
        w.sequencer.probed(now_ms(), [(role, OTHER, 0) for role in INPUT_ROLES])
        running = asyncio.ensure_future(w.applier.run())
        await offer(w, request(0))
        await asyncio.wait_for(committed(w, 1), 10)  # the first batch: nothing to linger after
        first = w.applier_starts[0]
        # One fetch: a reply, proven at once, and a request of OTHER, whose quiet topics
        # were probed before it came.
        await offer(w, reply(0, {"decision": "approved"}),
                    record(Role.REQUESTS, b"anything", 0, partition=OTHER))
        await asyncio.wait_for(asked(clock), 10)  # the loop has looked at the fetch ...
        assert len(w.applier_starts) == 1  # ... and waits for the probe it asked for
        if answered:
            w.sequencer.probed(now_ms() + 10, [(role, OTHER, 0) for role in INPUT_ROLES
                                               if role is not Role.REQUESTS])
            clock.covered = w.sequencer.taken
            w.ctx.wake.set()
        await asyncio.wait_for(committed(w, 2), 10)
        w.stop()
        await asyncio.wait_for(running, 10)
        return [len(b) for b in w.committer.batches], w.applier_starts[1] - first

    sizes, gap = asyncio.run(scenario())
    if answered:
        assert sizes == [1, 2]
        assert gap < linger
    else:
        assert sizes == [1, 1]
        assert gap >= linger - 0.01  # started by `run` once the linger had passed


async def offer(w: World, rec: Any, held: Any = None) -> None:
    """One fetch taken: `rec`, its partition's other topics proven caught up by a probe,
    and `held`, taken after that probe (its partition's other topics are not proven)."""
    w.sequencer.add(rec, now_ms())
    w.sequencer.probed(now_ms() + 1, [(role, rec.partition, 0) for role in INPUT_ROLES
                                      if role is not rec.role])
    if held is not None:
        w.sequencer.add(held, now_ms() + 5)
    w.ctx.wake.set()
    await w.settle()


async def committed(w: World, n: int) -> None:
    """Batch n was handed to the committer: acknowledge it."""
    while len(w.committer.batches) < n:
        await asyncio.sleep(0.005)
    w.committer.gates[n - 1].set_result(None)
    await w.settle()


async def began(w: World, n: int) -> None:
    while len(w.applier_starts) < n:
        await asyncio.sleep(0.005)


async def asked(clock: FakeClock) -> None:
    """The applier asked for a probe (after which, in the same turn of its loop, it chose
    whether to begin a batch)."""
    while not clock.asked:
        await asyncio.sleep(0.005)


def test_a_full_batch_does_not_wait_for_the_linger(tmp_path: Path) -> None:
    """500 records released are decided at once, whatever the linger: a backlog is
    never paced (here 30 s, so a batch that waited for it would time the test out)."""

    async def scenario() -> list[int]:
        w = World(tmp_path)
        w.applier.linger = 30.0
        running = asyncio.ensure_future(w.applier.run())
        roles = [role for role in INPUT_ROLES if role is not Role.REQUESTS]
        w.sequencer.add(request(0), now_ms())
        w.sequencer.probed(now_ms() + 1, [(role, PART, 0) for role in roles])
        w.ctx.wake.set()
        await asyncio.wait_for(committed(w, 1), 10)  # the first batch: nothing to linger after
        for offset in range(1, TUNING.batch_max + 1):  # one wait's requests, repeated: refused
            w.sequencer.add(request(offset), now_ms())
        w.sequencer.probed(now_ms() + 1, [(role, PART, 0) for role in roles])
        w.ctx.wake.set()
        await asyncio.wait_for(committed(w, 2), 10)
        w.stop()
        await asyncio.wait_for(running, 10)
        return [len(b) for b in w.committer.batches]

    assert asyncio.run(scenario()) == [1, TUNING.batch_max]
