"""The applier: decides what the sequencer releases, a batch at a time, and makes it durable.

Where a record is decided: `Applier.run_batch` -> `batch.decide_batch` ->
`records.RecordHandler.handle` -> `streams.core.decide`; the timers due by
stream time are taken from the index before each batch and decided after
their partition's records (`streams.timers.firing`).  Where it is made
durable: `Applier._commit`, in the order `streams.processor.commit` writes
down (outputs acknowledged, the partitions' transactions committed, then one
RocksDB write per partition, on a thread of its own: the event loop never
waits on the disk), and only then in memory (`_remember`).

Commits are pipelined one deep: a batch is decided while the previous one
may still wait for the broker's acknowledgements, reading that batch's rows
from memory (`_pending_rows`) until they are in RocksDB.  Batches are
committed strictly in order, so a crash leaves a prefix of them durable.
The applier and the ownership changes (`takeover`) take one lock, so a batch
is never cut by a change of ownership: a revocation waits for the batch in
flight (`drain`), and records staged for a partition given up are dropped and
read again by its next owner.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from streams.codec import RegistryUnavailable
from streams.core import TimerKind
from streams.processor.batch import Batch, decide_batch
from streams.processor.commit import Committed, Committer
from streams.processor.context import PartitionStart, Room, WorkerContext
from streams.processor.model import InputRecord
from streams.processor.partitions import PartitionBook
from streams.processor.records import RecordHandler
from streams.processor.sequencer import Sequencer
from streams.processor.state import StateStores
from streams.processor.stream_clock import StreamClock
from streams.processor.tracing import BatchTracer
from streams.timers.due import DueTimers
from streams.timers.firing import FiredTimer
from streams.timers.stored import Summary

log = logging.getLogger(__name__)


class Applier(Room):
    """Stages released records, decides them in batches, commits the batches in order."""

    def __init__(self, ctx: WorkerContext, handler: RecordHandler, sequencer: Sequencer,
                 stores: StateStores, committer: Committer, book: PartitionBook,
                 index: DueTimers, clock: StreamClock | None) -> None:
        """`clock`: asked to probe when released records wait for proof (None: never)."""
        super().__init__(ctx)
        # Alike in shape with takeover.py's (duplicates lists the pair), deliberately: each
        # room keeps the collaborators it is given.
        self.handler = handler
        self.sequencer = sequencer
        self.stores = stores
        self.committer = committer
        self.book = book
        self.index = index
        self.clock = clock
        # Makes each batch's spans (`streams.processor.tracing`); None: none are made.
        self.tracer = ctx.tracer
        self.latency = ctx.latency
        # Least seconds between two batches' starts (`run`): the batch linger.
        self.linger = ctx.settings.batch_linger
        # Partitions a newer owner fenced (commit F5), until ownership has given them up:
        # nothing more of theirs is decided or committed here.
        self.fenced: set[int] = set()
        # RocksDB's writes (step 4 of the commit protocol), off the event loop.
        self._store_thread = ThreadPoolExecutor(1, thread_name_prefix="xwait-store")
        self._staged: list[InputRecord] = []  # released, to be decided in the next batch
        self._pending_rows: dict[int, Mapping[bytes, bytes | None]] = {}
        self._committing: asyncio.Future[None] | None = None
        self.committing_since: float | None = None  # monotonic start of the commit in flight

    async def run(self) -> None:
        """Stage what the sequencer releases; decide and commit it batch by batch.

        A batch is decided when the previous one is committed, or as soon as
        BATCH_MAX records are staged (then its decisions overlap the previous
        commit's wait for acknowledgements).  While a commit waits, released
        records gather, so batches grow with the load instead of shrinking to
        one record each.

        With a `linger`, a batch starts that long after the previous one
        started (a full one at once), or sooner once the records taken since
        then are released as far as a probe can release them
        (`_fetch_settled`): what is released meanwhile joins it.  The fetch
        waits at the broker for the linger, so this is about one batch a
        fetch.  A batch costs a fixed part (a commit, a RocksDB write per
        partition) and its first decisions run on cold caches, so a few
        larger batches take less CPU than many small ones.
        """
        last_batch = 0.0
        taken_then = 0  # the sequencer's `taken` when the last batch started
        idle = self.tuning.idle_wake_s
        timeout = idle
        wake = self.ctx.wake
        while not self.ctx.failed:
            try:
                await asyncio.wait_for(wake.wait(), timeout=timeout)
            except TimeoutError:
                pass
            timeout = idle
            wake.clear()
            released = self.sequencer.release(self.tuning.batch_max - len(self._staged))
            if released:
                now = self.ctx.clock()
                self.latency.add_all("released", (now - r.timestamp for r in released
                                                  if r.log_append_time and r.timestamp))
                self._staged += released
            if self.sequencer.wants_probe() and self.clock is not None:
                self.clock.probe_soon()
            busy = self._committing is not None and not self._committing.done()
            due = not busy and self.index.may_be_due(self._due_by())
            full = len(self._staged) >= self.tuning.batch_max
            if (self._staged and (not busy or full)) or due:
                early = self.linger - (time.monotonic() - last_batch)
                if early > 0 and not full and not self._fetch_settled(taken_then):
                    timeout = early  # decided then, with whatever is released meanwhile
                else:
                    last_batch = time.monotonic()
                    taken_then = self.sequencer.taken
                    await self.run_batch()
                    if self.sequencer.held():
                        wake.set()  # more may be releasable now

    def _fetch_settled(self, taken_then: int) -> bool:
        """Records were taken since the last batch started, and all of them a probe could
        release are released: the batch need not wait out the linger.

        The fetch waits at the broker for the linger already, so a batch paced
        by the linger on its own clock started up to a linger after the fetch
        that filled it, and waited a probe more for records of partitions
        whose commands topic is quiet.  The probe sent once the fetch is taken
        (`StreamClock.probe_soon`) releases them; deciding then keeps about
        one batch a fetch, and takes that wait off the reply's latency.
        """
        taken = self.sequencer.taken
        if taken == taken_then:
            return False
        return (self.clock is None or not self.sequencer.wants_probe()
                or self.clock.covered >= taken)

    async def run_batch(self) -> None:
        """Decide the staged records and start committing them (see the module docstring)."""
        async with self.ctx.lock:
            records, self._staged = self._staged, []
            if self.ctx.failed:
                return
            if self.fenced:
                records = [r for r in records if r.partition not in self.fenced]
            timers = self._due()
            if not records and not timers:
                return
            started_ns = time.time_ns() if self.tracer is not None else 0
            batch = await self._decide(records, timers)
            span = None
            if self.tracer is not None and batch is not None:
                span = self._decide_span(self.tracer, batch, started_ns, len(records),
                                         len(timers))
            await self.drain()
            if batch is None:  # unreleased: staged again
                await asyncio.sleep(self.tuning.registry_retry_s)
                return
            if self.fenced:  # the batch just drained lost partitions this one decided
                _drop(batch, self.fenced)
            if not self.ctx.failed and batch.parts:
                for p, part in batch.parts.items():
                    self._pending_rows[p] = part.rows
                self._committing = asyncio.ensure_future(self._commit(batch, span))
                self._committing.add_done_callback(lambda _f: self.ctx.wake.set())

    def _due(self) -> list[FiredTimer]:
        """The timers due by their partition's stream time, to decide after the staged records.

        The worker fires its timers itself, in the batch: a timer's decision
        is made and stored with the batch like an input's, and reads the rows
        of the batch being committed (`_pending_rows`), so a timer whose wait
        a reply in flight ended is found stale there.  Up to TIMERS_MAX,
        whatever input is staged, so that a steady input cannot hold due
        timers back.  Each wait's timer taken fires all of the wait's timers
        due by then (`streams.timers.firing`).
        """
        scan = time.perf_counter()
        due = self.index.pop_due(self._due_by(), self.tuning.timers_max)
        self.latency.add("scan_us", round((time.perf_counter() - scan) * 1e6))
        if self.fenced:
            due = [t for t in due if t.partition not in self.fenced]
        return due

    def _due_by(self) -> dict[int, int]:
        """Per partition with decided positions, its stream time: what its timers are due by."""
        durable = self.book.decided
        return {p: t for p, t in self.sequencer.times().items() if p in durable}

    async def _decide(self, records: list[InputRecord],
                      timers: list[FiredTimer]) -> Batch | None:
        """Decide the batch, letting the event loop run every YIELD_AFTER_S.

        Nothing a turn of the loop may run changes what the batch reads: the
        lock keeps ownership still, the batch committing meanwhile writes
        the rows `_pending_rows` holds already, and only this task releases
        records, takes timers from the index or moves the decided positions.
        """
        stream_times = self.sequencer.times()
        pending_rows = self._pending_rows
        stores = self.stores

        def load(partition: int, key: bytes) -> bytes | None:
            pending = pending_rows.get(partition)
            if pending is not None and key in pending:
                return pending[key]
            return stores.get(partition, key)

        steps = decide_batch(self.handler, records, load, self.book.decided, stream_times,
                             self.ctx.clock(), timers)
        yield_after = self.tuning.yield_after_s
        held_since = time.perf_counter()
        try:
            while True:
                try:
                    next(steps)
                except StopIteration as done:
                    batch: Batch = done.value
                    break
                if time.perf_counter() - held_since >= yield_after:
                    await asyncio.sleep(0)
                    held_since = time.perf_counter()
        except RegistryUnavailable as exc:
            # Not the records' fault: decide them again once the registry answers.
            self.sequencer.unrelease(records)  # timers-first order is restored by release
            for t in timers:
                self.index.requeue(t)
            self.counters["registry_unavailable"] += 1
            log.warning("schema registry unavailable, %d records wait: %s", len(records), exc)
            return None
        book = self.book
        _drop(batch, self.fenced)  # partitions lost while it was decided: never committed
        for p, part in batch.parts.items():
            part.positions = replace(part.positions, stream_time=stream_times.get(p, 0))
            book.decided[p] = part.positions  # durable once the commit is done
            summary = book.summaries.setdefault(p, Summary())
            low = self.index.low(p)  # how far the index found nothing pending
            summary.armed += part.armed
            for change in part.changes:
                for armed in change.after.timers:
                    low = min(low, armed.due_at)
                book.census.move(p, change.before, change.after)
            summary.low = low
            summary.waits = book.census.counts(p)
            part.summary = summary.copy()
        return batch

    @staticmethod
    def _decide_span(tracer: BatchTracer, batch: Batch, started_ns: int, records: int,
                     timers: int) -> Any:
        """The batch's decide span, linked to the traces of the waits it decided for."""
        links = tracer.links(handled.traceparent for _, handled, _ in batch.decided)
        return tracer.decided(links, started_ns, time.time_ns(), {
            "xwait.records": records, "xwait.timers": timers,
            "xwait.partitions": sorted(batch.parts), "xwait.traced_waits": len(links)})

    async def _commit(self, batch: Batch, span: Any = None) -> None:
        """Commit `batch`; `span`: its decide span, parent of its commit span (if traced)."""
        started = self.ctx.clock()
        started_ns = time.time_ns() if span is not None else 0
        self.committing_since = time.monotonic()
        loop = asyncio.get_running_loop()
        try:
            committed: Committed = await self.committer.commit(batch)
            # Commit step 4, on the store's thread: written only once committed (F4).
            await loop.run_in_executor(self._store_thread, self._store, batch, committed)
        except Exception as exc:  # noqa: BLE001 - nothing of the batch is stored
            if span is not None and self.tracer is not None:
                self._commit_span(self.tracer, span, batch, started_ns, exc)
            await self.ctx.fail(exc, f"a batch of {len(batch)} records")
            return
        finally:
            self.committing_since = None
        if span is not None and self.tracer is not None:
            self._commit_span(self.tracer, span, batch, started_ns, None, committed.fenced)
        if committed.fenced:
            # Commit F5: those partitions moved to another worker.  Nothing of theirs
            # is stored; the next batch drops what it decided for them, and ownership
            # gives them up.
            self.fenced |= committed.fenced
            _drop(batch, committed.fenced)
            self.ctx.lose(committed.fenced)
        done = self.ctx.clock()
        self.latency.add("commit", done - started)
        self.latency.add_all("durable", (done - rec.timestamp for rec, _, _ in batch.decided
                                         if isinstance(rec, InputRecord)
                                         and rec.log_append_time and rec.timestamp))
        self._remember(batch)

    def _commit_span(self, tracer: BatchTracer, decide: Any, batch: Batch, started_ns: int,
                     error: BaseException | None, fenced: frozenset[int] = frozenset()) -> None:
        links = tracer.links(handled.traceparent for _, handled, _ in batch.decided)
        tracer.committed(decide, links, started_ns, time.time_ns(), {
            "xwait.records": len(batch), "xwait.outputs": len(batch.out),
            "xwait.partitions": sorted(batch.parts), "xwait.fenced": sorted(fenced),
            "xwait.guarantee": self.ctx.settings.guarantee.value}, error)

    def _store(self, batch: Batch, committed: Committed) -> None:
        """One atomic RocksDB write per committed partition (in the store's thread).

        The loop goes on meanwhile: the next batch may be decided, reading this
        batch's rows from memory (`_pending_rows`, cleared by `drain` only once
        this write is done), and nothing else reads or writes these keys.
        """
        for p, part in batch.parts.items():
            if p not in committed.fenced:
                self.stores[p].write(part.rows, part.positions, committed.offsets.get(p),
                                     part.index, part.summary)

    async def drain(self) -> None:
        """Wait for the batch being committed, if any: its rows are in RocksDB after this."""
        committing, self._committing = self._committing, None
        if committing is not None:
            await committing
        self._pending_rows.clear()

    def _remember(self, batch: Batch) -> None:
        """Step 6 of the commit protocol: what the worker keeps in memory."""
        for p, part in batch.parts.items():
            self.book.durable[p] = part.positions
            for change in part.changes:
                self.index.changed(p, change.wait_key, change.before.timers,
                                   change.after.timers)
            for key, timer_kind, due_at in part.unindexed:
                self.index.forget_entry(p, key, timer_kind, due_at)
            for key, kind, due_at, generation in part.not_due:
                self.index.requeue(FiredTimer(p, key, TimerKind(kind), due_at, generation))
        self.counters.update(batch.counters)
        self.counters["batches"] += 1
        observers = self.ctx.observers
        for about, handled, now in batch.decided:
            for observe in observers:
                observe(about, handled, now)

    def take(self, starts: Sequence[PartitionStart]) -> None:
        """Nothing to hold for a partition taken over: its records come through the
        sequencer (ownership's `Partitioned`)."""

    def forget(self, partitions: set[int]) -> None:
        """Drop what was staged for partitions given up (their next owner reads it again)."""
        self._staged = [r for r in self._staged if r.partition not in partitions]
        self.fenced -= partitions


def _drop(batch: Batch, partitions: set[int] | frozenset[int]) -> None:
    """Take the parts of `partitions` out of a batch: their records are not committed here
    (their owner decides them again), and nothing of them is remembered."""
    for p in partitions & batch.parts.keys():
        del batch.parts[p]
    batch.decided = [d for d in batch.decided if d[0].partition not in partitions]


__all__ = ["Applier"]
