"""Intake: where an input record enters the worker, and why none is ever skipped.

The input reader (`reader`, librdkafka in a thread) fetches exactly the
active partitions' input topics from the positions stored with their state.
Each record it hands over is *offered* here: the gate (`inputs`) takes it
only if it is the next offset expected of its topic-partition.  A record
above that means the fetch skipped something, and the missing offsets are
read directly from the broker (`gaps.GapReader`) before it; a record below
it was taken already.  Taken records go to the sequencer (`sequencer`),
which releases them to the applier in the broker's time order.

A gap is read beside intake, never in its way: the topic-partition whose
fetch passed offsets over pauses, its later records wait behind the read
(in order), and every other partition's records go on being taken.  (The
read waited inside `offer` until 2026-12: a gap read held every partition's
intake, up to `Tuning.gap_read_timeout_s` while a broker was away.)

Housekeeping, its own task every `Tuning.housekeeping_s`: a topic that
stays behind the end offset of the last probe for `Tuning.stuck_s` (its
remaining offsets hold only transaction markers, or the fetch starved it)
is read directly; and the fetch is steered (`flow`): topic-partitions that
hold enough pause while a partition waits for another of its topics.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from streams.processor import flow
from streams.processor.context import PartitionStart, Room, WorkerContext
from streams.processor.gaps import GapReader
from streams.processor.inputs import Gap, InputGate, Verdict
from streams.processor.model import INPUT_ROLES, InputRecord, Role
from streams.processor.reader import InputReader
from streams.processor.sequencer import Sequencer

log = logging.getLogger(__name__)

TP = tuple[str, int]


@dataclass
class _GapRead:
    """A gap being read, and the fetched records of its topic-partition waiting behind it
    (the one that revealed the gap first), with the offsets the fetch passed over
    meanwhile."""

    gap: Gap
    waiting: list[InputRecord]
    passed: list[tuple[int, int]] = field(default_factory=list)


class Intake(Room):
    """Offers what the reader fetched to the gate; reads gaps and stalls; steers the fetch."""

    def __init__(self, ctx: WorkerContext, reader: InputReader, gaps: GapReader,
                 gate: InputGate, sequencer: Sequencer) -> None:
        super().__init__(ctx)
        self.reader = reader
        self.gaps = gaps
        self.gate = gate
        self.sequencer = sequencer
        self.paused: set[TP] = set()  # input partitions paused (flow control)
        # Gaps being read, by topic-partition, with the records waiting behind them.
        self._gap_reads: dict[tuple[Role, int], _GapRead] = {}
        # (role, partition) behind its end -> (next offset, since when it has not moved)
        self._stuck_since: dict[tuple[Role, int], tuple[int, float]] = {}
        # Direct reads of stalled ranges under way: beside the applier, never awaited by
        # it (a read can take up to Tuning.gap_read_timeout_s while the broker is away, and the
        # applier waited for it: nothing was decided meanwhile, in any partition).
        self._stall_reads: dict[tuple[Role, int], asyncio.Task[None]] = {}
        # Direct reads in a row that found records the fetch did not deliver, per input.
        self._undelivered: Counter[tuple[Role, int]] = Counter()
        # Direct reads on threads of their own: a read whose client hangs (a consumer's
        # close can wait for a coordinator that is away) must not take the threads the
        # rest of the worker needs.
        self._reads = ThreadPoolExecutor(self.tuning.read_threads,
                                         thread_name_prefix="xwait-reads")

    # -- the reader's batches ----------------------------------------------------------
    async def run(self) -> None:
        """Offer each batch the input reader fetched, then let it fetch the next."""
        self.reader.start()
        try:
            while not self.ctx.failed:
                fetched = await self.reader.next_batch()
                if self.reader.failure is not None:
                    await self.ctx.fail(self.reader.failure, "reading the input topics")
                    return
                for rec in fetched.records:
                    self.offer(rec)
                for topic, p, start, stop in fetched.passed:
                    self._passed_over(self.roles[topic], p, start, stop)
                self.reader.taken()
        finally:
            for read in self._stall_reads.values():
                read.cancel()
            self.reader.stop()

    def _passed_over(self, role: Role, p: int, start: int, stop: int) -> None:
        """The fetch passed over offsets without records (transaction markers): expect `stop`."""
        waiting = self._gap_reads.get((role, p))
        if waiting is not None:  # behind a gap being read: after its records
            waiting.passed.append((start, stop))
            return
        passed = self.gate.passed(role, p, start, stop)
        if passed:
            self.sequencer.skipped(role, p, stop)
            self.counters["inputs.markers_passed"] += passed
            self.ctx.wake.set()

    def offer(self, rec: InputRecord) -> None:
        """Take a fetched record if it is the next one expected of its partition; behind a
        gap, read the gap beside intake first."""
        behind = self._gap_reads.get((rec.role, rec.partition))
        if behind is not None:
            behind.waiting.append(rec)
            return
        verdict = self.gate.check(rec.role, rec.partition, rec.offset, rec.follows)
        if verdict is Verdict.APPLY and rec.follows is not None:
            want = self.gate.expected(rec.role, rec.partition)
            if want is not None and rec.offset > want:
                self.counters["inputs.markers_passed"] += rec.offset - want
        if verdict is Verdict.GAP:
            read = _GapRead(self.gate.gap(rec.role, rec.partition, rec.offset), [rec])
            self._gap_reads[(rec.role, rec.partition)] = read
            self._pause((rec.topic, rec.partition))  # nothing piles up behind the read
            asyncio.ensure_future(self._fill(read, self.gate.epoch))
        elif verdict is Verdict.APPLY:
            self._take(rec)
        else:
            self.counters[f"inputs.{verdict.value}"] += 1

    async def _fill(self, read: _GapRead, epoch: int) -> None:
        """Read a gap; take what it held, then offer the records waiting behind it."""
        gap = read.gap
        key = (gap.role, gap.partition)
        filled = await self._read_gap(gap)
        if self._gap_reads.get(key) is read:
            del self._gap_reads[key]
        if filled is None or self.gate.epoch != epoch:
            return  # the partition moved meanwhile: its next owner reads all of it
        first = read.waiting[0]
        # The stall reader may have moved on meanwhile: take what is still expected.
        for early in self.gate.read_directly(gap.role, gap.partition, gap.start,
                                             first.offset, filled) or ():
            self._take(early)
        for rec in read.waiting:
            self.offer(rec)
        again = self._gap_reads.get(key)  # a later gap among the records that waited
        for start, stop in read.passed:
            if again is not None:
                again.passed.append((start, stop))
            else:
                self._passed_over(gap.role, gap.partition, start, stop)
        topic = self.topics[gap.role]
        if again is None and (topic, gap.partition) in self.paused and \
                self.sequencer.held(gap.partition, gap.role) < self.tuning.held_max // 2:
            self.paused.discard((topic, gap.partition))
            self.reader.resume(topic, gap.partition)
        self.ctx.wake.set()

    def _take(self, rec: InputRecord) -> None:
        self.gate.advance(rec.role, rec.partition, rec.offset)
        now = self.ctx.clock()
        if rec.log_append_time and rec.timestamp is not None:
            self.ctx.latency.add("taken", now - rec.timestamp)
        self.sequencer.add(rec, now)
        self.ctx.wake.set()
        if self.sequencer.held(rec.partition, rec.role) >= self.tuning.held_max:
            self._pause((rec.topic, rec.partition))

    async def _read_gap(self, gap: Gap) -> list[InputRecord] | None:
        """The records the fetch passed over below `gap.stop` (streams.processor.gaps)."""
        role, partition = gap.role, gap.partition
        loop = asyncio.get_running_loop()
        try:
            found = await loop.run_in_executor(self._reads, self.gaps.read, role,
                                               self.topics[role],
                                               partition, gap.start, gap.stop)
        except Exception as exc:  # noqa: BLE001 - any failure: stop rather than skip
            await self.ctx.fail(exc, f"reading offsets {gap.start}..{gap.stop - 1} of "
                                     f"{self.topics[role]}[{partition}]")
            return None
        self.counters["inputs.gaps"] += 1
        self.counters["inputs.gap_records"] += len(found)
        level = logging.WARNING if found else logging.INFO
        log.log(level, "input gap topic=%s partition=%d offsets=%d..%d records_read=%d%s",
                self.topics[role], partition, gap.start, gap.stop - 1, len(found),
                " (the fetch skipped them: applied now)" if found
                else " (no records there: transaction markers, aborts or retention)")
        return found

    # -- ownership -------------------------------------------------------------------
    def read_owned(self) -> None:
        """Have the reader read the owned partitions from the next offsets expected."""
        self.reader.assign({(self.topics[role], p): expected
                            for p in self.gate.owned() for role in INPUT_ROLES
                            if (expected := self.gate.expected(role, p)) is not None})

    def take(self, starts: Sequence[PartitionStart]) -> None:
        """Read these partitions' inputs from where their stored positions say, besides
        those read already (ownership's `Partitioned.take`)."""
        taken = {start.partition for start in starts}
        for start in starts:
            self.gate.assign(start.partition, start.next_offset)
        self.paused = {tp for tp in self.paused if tp[1] not in taken}
        self.read_owned()

    def forget(self, partitions: set[int]) -> None:
        self.gate.revoke(partitions)
        self.read_owned()
        self.paused = {tp for tp in self.paused if tp[1] not in partitions}
        self._stuck_since = {k: v for k, v in self._stuck_since.items()
                             if k[1] not in partitions}
        self._gap_reads = {k: v for k, v in self._gap_reads.items() if k[1] not in partitions}
        # A read under way checks the gate's epoch before it takes anything: let it end.

    # -- housekeeping ------------------------------------------------------------------
    async def housekeeping(self) -> None:
        """Every `Tuning.housekeeping_s`, for as long as the worker runs: stalls, the fetch."""
        while not self.ctx.failed:
            await asyncio.sleep(self.tuning.housekeeping_s)
            self.housekeep()

    def housekeep(self) -> None:
        self._unstick()
        self._steer_fetch()

    def _pause(self, tp: TP) -> None:
        if tp not in self.paused:
            self.paused.add(tp)
            self.reader.pause(*tp)
            self.counters["inputs.paused"] += 1

    def _steer_fetch(self) -> None:
        """Pause what is held while a partition waits for the fetch; resume the rest (`flow`)."""
        owned = self.sequencer.partitions()
        waiting = flow.waited_for(self.sequencer, owned)
        for p in owned:
            for role in INPUT_ROLES:
                tp = (self.topics[role], p)
                held = self.sequencer.held(p, role)
                if tp not in self.paused:
                    if flow.should_pause(held, role, waiting, self.tuning):
                        self._pause(tp)
                elif (role, p) not in self._gap_reads and \
                        flow.may_resume(held, role, waiting, self.tuning):
                    self.paused.discard(tp)
                    self.reader.resume(*tp)
                    self.counters["inputs.resumed"] += 1

    def _unstick(self) -> None:
        """Read directly what a topic behind its end offset does not deliver.

        A topic not taken to the end offset of the last probe holds its
        partition's stream time back.  If it makes no progress for `stuck_s`,
        the offsets may hold no records (the commit markers of a
        transactional producer), or the fetch skipped them: the range is read
        from the broker, whatever it holds is taken, and the offsets without
        records are passed.  A topic paused because too much of it is held is
        not behind for want of fetching; it is left alone.

        The read runs beside the applier, not in its way: a range whose leader
        is a broker that just died is not read until another leader is elected
        (about broker.session.timeout.ms, 9 s by default), and the applier,
        which calls this, decides every other partition meanwhile.
        """
        now = time.monotonic()
        behind = {(role, p): (start, stop) for role, p, start, stop in self.sequencer.behind()
                  if (self.topics[role], p) not in self.paused
                  and (role, p) not in self._gap_reads}
        for key in list(self._stuck_since):
            if key not in behind or behind[key][0] != self._stuck_since[key][0]:
                del self._stuck_since[key]
        for key in [k for k, f in self._stall_reads.items() if f.done()]:
            del self._stall_reads[key]
        for key, (start, stop) in behind.items():
            if key in self._stall_reads:
                continue  # one read at a time per topic-partition
            _, since = self._stuck_since.setdefault(key, (start, now))
            if now - since < self.tuning.stuck_s:
                continue
            del self._stuck_since[key]
            running = self._stall_reads.get(key)
            if running is None or running.done():
                self._stall_reads[key] = asyncio.ensure_future(
                    self._read_stalled(*key, start, stop))

    async def _read_stalled(self, role: Role, p: int, start: int, stop: int) -> None:
        epoch = self.gate.epoch
        loop = asyncio.get_running_loop()
        try:
            found = await loop.run_in_executor(self._reads, self.gaps.read, role,
                                               self.topics[role], p,
                                               start, stop, self.tuning.stalled_read_max)
        except Exception as exc:  # noqa: BLE001 - the broker is away: try again later
            log.warning("reading a stalled input range failed topic=%s partition=%d: %s",
                        self.topics[role], p, exc)
            return
        covered = stop if len(found) < self.tuning.stalled_read_max else found[-1].offset + 1
        taken = None if self.gate.epoch != epoch else self.gate.read_directly(
            role, p, start, covered, found)
        if taken is None:
            # `start` came from an older state: taking this would skip what lies
            # below it (a whole range was lost that way in a crash run).
            self.counters["inputs.stall_reads_dropped"] += 1
            return
        for rec in taken:
            self._take(rec)
        self.sequencer.skipped(role, p, covered)
        self.counters["inputs.stalls_read"] += 1
        if found:
            self._undelivered[(role, p)] += 1
            if self._undelivered[(role, p)] >= self.tuning.renew_after:
                # The fetch stands still below records that are there: a new consumer.
                self._undelivered.clear()
                self.counters["inputs.reader_renewed"] += 1
                self.reader.renew()
                self.read_owned()
        else:
            self._undelivered.pop((role, p), None)
        self.counters["inputs.stall_records"] += len(found)
        log.log(logging.WARNING if found else logging.INFO,
                "input range read directly topic=%s partition=%d offsets=%d..%d records=%d%s",
                self.topics[role], p, start, covered - 1, len(found),
                " (the fetch did not deliver them)" if found
                else " (no records there: transaction markers or aborted records)")
        self.ctx.wake.set()


__all__ = ["Intake"]
