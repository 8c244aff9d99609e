"""Intake: where an input record enters the worker, and why none is ever skipped.

The input reader (`reader`, librdkafka in a thread) fetches exactly the
active partitions' input topics from the positions stored with their state.
Each record it hands over is *offered* here: the gate (`inputs`) takes it
only if it is the next offset expected of its topic-partition.  A record
above that means the fetch skipped something, and the missing offsets are
read directly from the broker (`gaps.GapReader`) before it; a record below
it was taken already.  Taken records go to the sequencer (`sequencer`),
which releases them to the applier in the broker's time order.

Housekeeping, called by the applier every `HOUSEKEEPING_S`: a topic that
stays behind the end offset of the last probe for `STUCK_S` (its remaining
offsets hold only transaction markers, or the fetch starved it) is read
directly; and the fetch is steered (`flow`): topic-partitions that hold
enough pause while a partition waits for another of its topics.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor

from streams.processor import flow
from streams.processor.gaps import GapReader
from streams.processor.inputs import Gap, InputGate, Verdict
from streams.processor.latency import Latencies
from streams.processor.model import INPUT_ROLES, InputRecord, Role
from streams.processor.reader import InputReader
from streams.processor.sequencer import Sequencer

log = logging.getLogger(__name__)

# How long a topic may hold the others back while records below its end
# offset do not arrive, before the worker reads that range itself (offsets
# that hold transaction markers only never arrive through the fetch).
STUCK_S = 2.0
# Most records one such direct read takes (the rest come through the fetch).
STALLED_READ_MAX = 1000
# Direct reads at once (gaps and stalls): more than one, so that one slow read does not
# hold every other partition's.
READ_THREADS = 4
# Direct reads of one input in a row that found records the fetch did not deliver, after
# which the reader takes a new consumer (`InputReader.renew`).
RENEW_AFTER = 3

Fail = Callable[[BaseException, str], Awaitable[None]]
TP = tuple[str, int]


def now_ms() -> int:
    return int(time.time() * 1000)


class Intake:
    """Offers what the reader fetched to the gate; reads gaps and stalls; steers the fetch."""

    def __init__(self, reader: InputReader, gaps: GapReader, gate: InputGate,
                 sequencer: Sequencer, topics: Mapping[Role, str], counters: Counter[str],
                 latency: Latencies, wake: asyncio.Event, fail: Fail) -> None:
        self.reader = reader
        self.gaps = gaps
        self.gate = gate
        self.sequencer = sequencer
        self.topics = dict(topics)
        self.roles = {name: role for role, name in self.topics.items()}
        self.counters = counters
        self.latency = latency
        self.wake = wake
        self.fail = fail
        self.paused: set[TP] = set()  # input partitions paused (flow control)
        # (role, partition) behind its end -> (next offset, since when it has not moved)
        self._stuck_since: dict[tuple[Role, int], tuple[int, float]] = {}
        # Direct reads of stalled ranges under way: beside the applier, never awaited by
        # it (a read can take up to gaps.READ_TIMEOUT_S while the broker is away, and the
        # applier waited for it: nothing was decided meanwhile, in any partition).
        self._stall_reads: dict[tuple[Role, int], asyncio.Task[None]] = {}
        # Direct reads in a row that found records the fetch did not deliver, per input.
        self._undelivered: Counter[tuple[Role, int]] = Counter()
        # Direct reads on threads of their own: a read whose client hangs (a consumer's
        # close can wait for a coordinator that is away) must not take the threads the
        # rest of the worker needs.
        self._reads = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="xwait-reads")
        self.failure: BaseException | None = None

    # -- the reader's batches ----------------------------------------------------------
    async def run(self) -> None:
        """Offer each batch the input reader fetched, then let it fetch the next."""
        self.reader.start()
        try:
            while self.failure is None:
                fetched = await self.reader.next_batch()
                if self.reader.failure is not None:
                    await self.fail(self.reader.failure, "reading the input topics")
                    return
                for rec in fetched.records:
                    await self.offer(rec)
                for topic, p, start, stop in fetched.passed:
                    self._passed_over(self.roles[topic], p, start, stop)
                self.reader.taken()
        finally:
            for read in self._stall_reads.values():
                read.cancel()
            self.reader.stop()

    def _passed_over(self, role: Role, p: int, start: int, stop: int) -> None:
        """The fetch passed over offsets without records (transaction markers): expect `stop`."""
        passed = self.gate.passed(role, p, start, stop)
        if passed:
            self.sequencer.skipped(role, p, stop)
            self.counters["inputs.markers_passed"] += passed
            self.wake.set()

    async def offer(self, rec: InputRecord) -> None:
        """Take a fetched record if it is the next one expected of its partition."""
        epoch = self.gate.epoch
        verdict = self.gate.check(rec.role, rec.partition, rec.offset, rec.follows)
        if verdict is Verdict.APPLY and rec.follows is not None:
            want = self.gate.expected(rec.role, rec.partition)
            if want is not None and rec.offset > want:
                self.counters["inputs.markers_passed"] += rec.offset - want
        if verdict is Verdict.GAP:
            gap = self.gate.gap(rec.role, rec.partition, rec.offset)
            filled = await self._read_gap(gap)
            if filled is None or self.gate.epoch != epoch:
                return
            # The stall reader may have moved on meanwhile: take what is still
            # expected, then `rec` if it is next.
            for early in self.gate.read_directly(rec.role, rec.partition, gap.start,
                                                 rec.offset, filled) or ():
                self.take(early)
            verdict = self.gate.check(rec.role, rec.partition, rec.offset)
        if verdict is Verdict.APPLY:
            self.take(rec)
        else:
            self.counters[f"inputs.{verdict.value}"] += 1

    def take(self, rec: InputRecord) -> None:
        self.gate.advance(rec.role, rec.partition, rec.offset)
        now = now_ms()
        if rec.log_append_time and rec.timestamp is not None:
            self.latency.add("taken", now - rec.timestamp)
        self.sequencer.add(rec, now)
        self.wake.set()
        if self.sequencer.held(rec.partition, rec.role) >= flow.HELD_MAX:
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
            await self.fail(exc, f"reading offsets {gap.start}..{gap.stop - 1} of "
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

    def take_over(self, starts: Mapping[int, dict[Role, int]]) -> None:
        """Read these partitions' inputs from `starts` on (the positions stored with their
        state), besides those read already."""
        for partition, offsets in starts.items():
            self.gate.assign(partition, offsets)
        self.paused = {tp for tp in self.paused if tp[1] not in starts}
        self.read_owned()

    def forget(self, partitions: set[int]) -> None:
        self.gate.revoke(partitions)
        self.read_owned()
        self.paused = {tp for tp in self.paused if tp[1] not in partitions}
        self._stuck_since = {k: v for k, v in self._stuck_since.items()
                             if k[1] not in partitions}
        # A read under way checks the gate's epoch before it takes anything: let it end.

    # -- housekeeping ------------------------------------------------------------------
    async def housekeep(self) -> None:
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
                    if flow.should_pause(held, role, waiting):
                        self._pause(tp)
                elif flow.may_resume(held, role, waiting):
                    self.paused.discard(tp)
                    self.reader.resume(*tp)
                    self.counters["inputs.resumed"] += 1

    def _unstick(self) -> None:
        """Read directly what a topic behind its end offset does not deliver.

        A topic not taken to the end offset of the last probe holds its
        partition's stream time back.  If it makes no progress for STUCK_S,
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
                  if (self.topics[role], p) not in self.paused}
        for key in list(self._stuck_since):
            if key not in behind or behind[key][0] != self._stuck_since[key][0]:
                del self._stuck_since[key]
        for key in [k for k, f in self._stall_reads.items() if f.done()]:
            del self._stall_reads[key]
        for key, (start, stop) in behind.items():
            if key in self._stall_reads:
                continue  # one read at a time per topic-partition
            _, since = self._stuck_since.setdefault(key, (start, now))
            if now - since < STUCK_S:
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
                                               start, stop, STALLED_READ_MAX)
        except Exception as exc:  # noqa: BLE001 - the broker is away: try again later
            log.warning("reading a stalled input range failed topic=%s partition=%d: %s",
                        self.topics[role], p, exc)
            return
        covered = stop if len(found) < STALLED_READ_MAX else found[-1].offset + 1
        taken = None if self.gate.epoch != epoch else self.gate.read_directly(
            role, p, start, covered, found)
        if taken is None:
            # `start` came from an older state: taking this would skip what lies
            # below it (a whole range was lost that way in a crash run).
            self.counters["inputs.stall_reads_dropped"] += 1
            return
        for rec in taken:
            self.take(rec)
        self.sequencer.skipped(role, p, covered)
        self.counters["inputs.stalls_read"] += 1
        if found:
            self._undelivered[(role, p)] += 1
            if self._undelivered[(role, p)] >= RENEW_AFTER:
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
        self.wake.set()


__all__ = ["STALLED_READ_MAX", "STUCK_S", "Intake"]
