"""The stream clock: stream time from end-offset probes, so that quiet partitions' timers fall due.

Every `timer_tick` seconds it probes the inputs' end offsets (the
sequencer's proof that nothing older is still to come: a record's partition
has a stream time only as far as every topic of it is known to be taken) and
wakes the applier, which decides the timers due by each partition's stream
time in its next batch (where a timer fires: `streams.timers.firing`).
Under load, records move stream time on their own; on a quiet partition
only a probe does.  Its tick also commits the durable input positions as the
consumer group's offsets, for lag monitors (the worker starts from the
positions stored with its state, never from these), and it answers the
takeovers' end and earliest offsets on its own connections.

The applier asks for a probe of its own when released records wait for proof
(`probe_soon`): under a steady load a record of a partition whose commands
topic is quiet would otherwise wait for the next tick.  For records taken
since the last probe was sent (a fetch just taken) it goes at once, and
the applier holds their batch for its answer; otherwise probes keep to the
batch linger's pace.

A probe proves less than its send time: Kafka shows a record only once it
is committed (on the in-sync replicas, or its producer's transaction), so a
record appended shortly before the probe may still be invisible to it.  The
sequencer is told the probe was sent `commit_grace` earlier than it was
(XWAIT_COMMIT_GRACE; auto: `REPLICATED_COMMIT_GRACE` when an input topic
has more than one replica, else 0), and every record committed within that
grace of its append keeps its place in the broker's order.

Probes could be answered from a fetch's own watermarks (KIP-695's way), but
librdkafka's cached `get_watermark_offsets` gives the high watermark, not
the last stable offset, and carries no time: the sequencer's proof ("the end
offset seen by a request sent at wall time S") needs the ListOffsets request.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import KafkaException

from streams.config import REPLICATED_COMMIT_GRACE
from streams.processor.context import Room, WorkerContext
from streams.processor.gaps import EndOffsets
from streams.processor.model import INPUT_ROLES
from streams.processor.partitions import PartitionBook
from streams.processor.reader import InputReader
from streams.processor.sequencer import CLOCKED_ROLES, Sequencer

log = logging.getLogger(__name__)

REPLICATED_GRACE_MS = round(REPLICATED_COMMIT_GRACE * 1000)


def grace_for_replicas(replicas: int) -> int:
    """The automatic commit grace (ms) of inputs whose partitions have at most `replicas`
    replicas: with one, a record is committed as it is appended."""
    return REPLICATED_GRACE_MS if replicas > 1 else 0


class StreamClock(Room):
    """Probes the inputs' end offsets: stream time for quiet partitions (module docstring)."""

    def __init__(self, ctx: WorkerContext, sequencer: Sequencer, book: PartitionBook,
                 reader: InputReader, end_offsets: EndOffsets,
                 active: Callable[[], set[int]]) -> None:
        super().__init__(ctx)
        self.settings = settings = ctx.settings
        self.sequencer = sequencer
        self.book = book
        self.reader = reader
        self.end_offsets = end_offsets
        self.active = active
        self.ends: dict[tuple[str, int], int] = {}  # input end offsets seen by the last probe
        self._probe_thread = ThreadPoolExecutor(1, thread_name_prefix="xwait-probe")
        self._probing = asyncio.Lock()
        self._last_probe = 0.0
        # Least time between two probes of the applier's: with a batch linger,
        # records wait for the next batch anyway, and probing for them more often
        # than batches start costs a request each (90 a second at 100 waits/s).
        self._least_gap = max(self.tuning.probe_min_s, settings.batch_linger)
        self._probe_gap = self._least_gap  # least time before the next probe of the applier's
        # The sequencer's `taken` when the latest probe was sent, and when the latest
        # probe answered was sent: that one proved quiet topics caught up past every
        # record taken before it (the applier starts a fresh fetch's batch then).
        self._sent_after = 0
        self.covered = 0
        self._background: asyncio.Future[None] | None = None
        self._last_group_commit = 0.0
        fixed = settings.commit_grace
        # Milliseconds a probe proves less than its send time; None until the
        # input topics' replicas are known (auto).
        self.grace_ms: int | None = None if fixed is None else round(fixed * 1000)
        self._grace_due = 0.0 if fixed is None else math.inf  # monotonic time of the next look

    async def run(self) -> None:
        """A tick, then `timer_tick` seconds' sleep, for as long as the worker runs.

        Not faust's `app.timer`, which logs a WARNING ("Timer ... is
        overlapping") for every tick that takes longer than its interval.
        Under a backlog most ticks do - each waits for the event loop between
        batches and for its probe - and a timer storm logged one a second:
        noise in the logs of a worker that is only busy.  Each tick's duration
        is in /xwait/stats (`latencyMs.tick`).
        """
        try:
            while not self.ctx.failed:
                await asyncio.sleep(self.settings.timer_tick)
                await self.tick()
        finally:
            if self._background is not None:
                self._background.cancel()

    async def tick(self) -> None:
        """Probe the inputs' end offsets (stream time); the applier then fires what fell due."""
        owned = self.active()
        if not owned or self.ctx.failed:
            self.counters["punctuator.skipped"] += 1
            return
        started = time.monotonic()
        try:
            await self.probe(owned)
            self.ctx.wake.set()
            self._commit_group_offsets(owned)
        except (KafkaException, TimeoutError) as exc:  # the broker is away: next tick again
            log.warning("stream clock tick failed: %s", exc)
        self.ctx.latency.add("tick", round((time.monotonic() - started) * 1000))

    # -- stream time -----------------------------------------------------------------
    def probe_soon(self) -> None:
        """Probe while the applier decides: records held for proof need not wait for a tick.

        A record is released once no other input topic of its partition can
        still hold an older one; a topic with nothing fetched proves that only
        by a probe sent after the record was appended.  The probe goes to its
        own thread; its answer wakes the applier.
        """
        if not self.active():
            return
        if self._background is not None and not self._background.done():
            return
        self._background = asyncio.ensure_future(self._probe_and_wake())

    async def _probe_and_wake(self) -> None:
        try:
            # Records taken since the last probe was sent (a fetch just taken): their
            # batch waits for this probe (`Applier._fetch_settled`), so it goes at once.
            fresh = self.sequencer.taken > self._sent_after
            gap = self.tuning.probe_min_s if fresh else self._probe_gap
            early = gap - (time.monotonic() - self._last_probe)
            if early > 0:
                await asyncio.sleep(early)
            if self._probing.locked() or time.monotonic() - self._last_probe < gap:
                return
            owned = self.active()
            targets = [(self.topics[role], p) for role, p in self.sequencer.probe_targets()
                       if p in owned]
            if not targets:
                return
            try:
                await self.probe(owned, targets)
            except (KafkaException, TimeoutError) as exc:
                log.warning("probe failed: %s", exc)
                return
            self.ctx.wake.set()
        except Exception as exc:  # noqa: BLE001 - a bug here must stop the worker, loudly
            await self.ctx.fail(exc, "probing the inputs' end offsets")

    async def probe(self, owned: set[int], tps: list[tuple[str, int]] | None = None) -> None:
        """Ask the end offsets of `tps` (by default every input of `owned`) for stream time."""
        if not owned:
            return
        async with self._probing:
            self._last_probe = time.monotonic()
            self._sent_after = taken = self.sequencer.taken
            if tps is None:
                tps = [(self.topics[r], p) for p in sorted(owned) for r in INPUT_ROLES]
            loop = asyncio.get_running_loop()
            if time.monotonic() >= self._grace_due:
                await self._resolve_grace(loop)
            at = self.ctx.clock()  # before the request leaves: later records are not below
            # Partial: while a broker is down, the partitions it led are left out and the
            # others prove their partitions' stream time (gaps.EndOffsets.get).
            ends = await loop.run_in_executor(
                self._probe_thread, lambda: self.end_offsets.get(tps, partial=True))
            self.ends.update(ends)
            self.counters["probes"] += 1
            self.counters["probes.partitions"] += len(tps)
            self._probe_gap = (self._least_gap if len(ends) == len(tps)
                               else max(self.tuning.probe_retry_s, self._least_gap))
            if len(ends) < len(tps):
                self.counters["probes.unanswered"] += len(tps) - len(ends)
            self.sequencer.probed(at - self._grace_in_use(),
                                  [(self.roles[t], p, end) for (t, p), end in ends.items()])
            if len(ends) == len(tps):
                self.covered = max(self.covered, taken)

    def _grace_in_use(self) -> int:
        """The commit grace (ms): until an automatic one is known, the replicated one."""
        return self.grace_ms if self.grace_ms is not None else REPLICATED_GRACE_MS

    async def _resolve_grace(self, loop: asyncio.AbstractEventLoop) -> None:
        """The automatic commit grace: none while every clocked input has one replica."""
        inputs = [self.topics[role] for role in CLOCKED_ROLES]
        try:
            replicas = await loop.run_in_executor(
                self._probe_thread, lambda: self.end_offsets.replicas(inputs))
        except KafkaException as exc:  # meanwhile the replicated grace: the safe side
            log.warning("input topics' replicas unknown, commit grace %d ms: %s",
                        self._grace_in_use(), exc)
            self._grace_due = time.monotonic() + (
                self.tuning.grace_retry_s if self.grace_ms is None
                else self.tuning.grace_recheck_s)
            return
        grace = grace_for_replicas(replicas)
        if grace != self.grace_ms:
            log.info("commit grace %d ms (input topics have up to %d replicas)", grace, replicas)
        self.grace_ms = grace
        self._grace_due = time.monotonic() + self.tuning.grace_recheck_s

    async def ask(self, tps: list[tuple[str, int]], *, earliest: bool = False
                  ) -> dict[tuple[str, int], int]:
        """End (or earliest) offsets on the probe's own connections (for takeovers)."""
        loop = asyncio.get_running_loop()
        got: dict[tuple[str, int], int] = await loop.run_in_executor(
            self._probe_thread, lambda: self.end_offsets.get(tps, earliest=earliest))
        return got

    def _commit_group_offsets(self, owned: set[int]) -> None:
        if time.monotonic() - self._last_group_commit < self.tuning.group_commit_interval_s:
            return
        self._last_group_commit = time.monotonic()
        durable = self.book.durable
        self.reader.commit({(self.topics[role], p): offset
                            for p in owned if p in durable
                            for role, offset in durable[p].next_offset.items()})

    def input_lag(self) -> dict[tuple[str, int], int]:
        """Per active input partition: records not yet applied, as of the last probe."""
        lag: dict[tuple[str, int], int] = {}
        for (topic, p), end in self.ends.items():
            pos = self.book.decided.get(p)
            if pos is None:
                continue
            at = pos.get(self.roles[topic])
            if at is not None:
                lag[(topic, p)] = max(0, end - at)
        return lag


__all__ = ["REPLICATED_GRACE_MS", "StreamClock", "grace_for_replicas"]
