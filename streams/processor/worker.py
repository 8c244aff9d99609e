"""The worker: the composition root of the rooms that process records.

One input record's path, and where each guarantee is kept:

    reader (librdkafka, thread)  fetches the active partitions' inputs   reader.py
      -> intake                   takes each offset once, reads gaps      intake.py, inputs.py
      -> sequencer                releases in the broker's time order     sequencer.py
      -> applier                  decides a batch (core.decide)           applier.py, batch.py
      -> committer                outputs, then a txn per partition       commit.py
      -> state                    one RocksDB write per partition         state.py
    stream clock                  probes end offsets: stream time for     stream_clock.py
                                  quiet partitions
    timers                        due by stream time, fired in a batch    streams/timers/firing.py
    ownership (takeover.py): fence -> restore (restore.py) -> seek, per partition;
    faust (streams/frame/app.py): group membership, the tasks, the web server.

What the rooms share is one `context.WorkerContext`, built here, with the
two policies the worker sets: a batch that cannot be made durable stops the
process (`fail`, exit 70) before any position moves, to be restarted by its
supervisor and read its inputs again; partitions whose commit another owner
fenced are given up (`lose`, `takeover.Ownership.lost`).  Tuning constants
and how they relate: `tuning.Tuning`.
"""

from __future__ import annotations

import asyncio
import faulthandler
import gc
import logging
import os
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

from streams.config import Guarantee, Settings
from streams.core import WaitDefinition
from streams.processor import collector, tracing
from streams.processor.applier import Applier
from streams.processor.census import Census
from streams.processor.commit import AtLeastOnce, Committer, ExactlyOnce
from streams.processor.context import WorkerContext
from streams.processor.gaps import EndOffsets, GapReader
from streams.processor.inputs import InputGate
from streams.processor.intake import Intake
from streams.processor.latency import Latencies
from streams.processor.looplag import LoopLag
from streams.processor.model import INPUT_ROLES, Role
from streams.processor.partitions import PartitionBook
from streams.processor.reader import InputReader
from streams.processor.records import RecordHandler
from streams.processor.restore import ChangelogReader
from streams.processor.sequencer import Sequencer
from streams.processor.state import StateStores
from streams.processor.stream_clock import StreamClock
from streams.processor.takeover import Ownership
from streams.processor.tuning import TUNING, Tuning
from streams.testing.clock import worker_clock
from streams.timers.due import DueTimers
from streams.topics import assignment_topic, changelog_topic

log = logging.getLogger(__name__)

# Exit code of a worker stopped because a batch could not be made durable.
EXIT_COMMIT_FAILED = 70


class Worker:
    """Builds the rooms, holds what they share, and answers the console (`ConsoleHost`)."""

    def __init__(self, settings: Settings, definitions: Mapping[str, WaitDefinition],
                 tuning: Tuning = TUNING) -> None:
        self.settings = settings
        self.definitions = definitions
        # Spans of each batch, when OTEL_EXPORTER_OTLP_ENDPOINT is set (else None: none made).
        self.tracer = tracing.from_env(os.environ, settings.app_id,
                                       max_links=tuning.batch_max + tuning.timers_max)
        self.ctx = ctx = WorkerContext(
            settings, changelog_topic(settings), tuning,
            latency=Latencies(tuning.latency_window), fail=self.fail,
            lose=lambda partitions: self.ownership.lost(partitions), tracer=self.tracer,
            clock=worker_clock(settings))  # the wall clock, or the test kit's (XWAIT_CLOCK)
        self.counters = ctx.counters
        self.latency = ctx.latency
        self.observers = ctx.observers  # called after each record is durable
        self.loop_lag = LoopLag(interval_s=tuning.loop_lag_interval_s,
                                window_s=tuning.loop_lag_window_s)
        self.gc_watch: collector.GcWatch | None = None  # set by `run` (a whole process)
        self.app: Any = None  # the faust app (`streams.frame.app.build`)
        self.topics = dict(ctx.topics)
        self.changelog = ctx.changelog
        self.assignment = assignment_topic(settings)
        app_id = settings.app_id

        self.stores = StateStores(settings.data_dir / app_id, tuning=tuning)
        self.sequencer = Sequencer()
        self.book = PartitionBook()
        self.index = DueTimers(self.stores.db, scan_slack=tuning.timer_scan_slack)
        conf = settings.confluent(**{"partitioner": "murmur2_random", "linger.ms": 5})
        self.committer: Committer = (
            ExactlyOnce(ctx, conf) if settings.guarantee is Guarantee.EXACTLY_ONCE
            else AtLeastOnce(ctx, conf))
        self.reader = InputReader(settings.confluent(**{"group.id": f"{app_id}-inputs"}),
                                  {self.topics[r]: r for r in INPUT_ROLES},
                                  linger=settings.batch_linger, tuning=tuning)
        self.intake = Intake(
            ctx, self.reader,
            GapReader(settings.confluent(**{"group.id": f"{app_id}-gaps"}), tuning),
            InputGate(), self.sequencer)
        self.stream_clock = StreamClock(
            ctx, self.sequencer, self.book, self.reader,
            EndOffsets(settings.confluent(), tuning=tuning), self.owned_partitions)
        self.handler = RecordHandler(definitions, settings.partitions,
                                     self.topics[Role.TIMERS], pure_python=settings.pure_python)
        if self.handler.native() is None:  # one line at start: the native record path is off
            log.warning("deciding every record with the Python rules: %s",
                        self.handler.python_because)
        self.applier = Applier(
            ctx, self.handler,
            self.sequencer, self.stores, self.committer, self.book, self.index,
            self.stream_clock)
        self.restorer = ChangelogReader(
            settings.confluent(**{"group.id": f"{app_id}-restore"}), self.changelog,
            self.stores, tuning, ctx.counters)
        # The rooms that hold per-partition state, in the order a partition taken over is
        # handed to them: intake, which starts reading its inputs, last.
        self.ownership = Ownership(
            ctx, self.stores, self.restorer, self.committer, self.applier, self.stream_clock,
            rooms=[self.book, self.sequencer, self.index, self.applier, self.intake])
        self.ready = self.ownership.ready  # set while every assigned partition decides

    @property
    def failure(self) -> BaseException | None:
        return self.ctx.failure.exc

    # -- the failure policy ----------------------------------------------------------
    async def fail(self, exc: BaseException, what: str) -> None:
        """Stop the worker: `what` could not be made durable, and nothing of it was stored."""
        if self.ctx.failure.exc is not None:
            return
        self.ctx.failure.exc = exc
        log.critical("stopping the worker: %s failed (%s: %s). Nothing of it was stored; "
                     "its input is read again from the stored positions when the worker "
                     "is started again.", what, type(exc).__name__, exc)
        self.counters["failures"] += 1
        loop = asyncio.get_running_loop()
        loop.call_later(self.ctx.tuning.fail_exit_after_s, os._exit, EXIT_COMMIT_FAILED)
        try:
            if self.app is not None:
                await self.app.stop()
        finally:
            os._exit(EXIT_COMMIT_FAILED)

    async def watch(self) -> None:
        """Stop a worker one step of whose commit hangs (`Tuning.commit_hang_s`: longer than
        any step may take) instead of idling for good, with every thread's stack in its log."""
        tuning = self.ctx.tuning
        while self.failure is None:
            await asyncio.sleep(tuning.watch_every_s)
            since = self.applier.committing_since
            if since is None:
                continue
            step = self.committer.steps.started
            moved = since if step is None else max(since, step)
            if time.monotonic() - moved > tuning.commit_hang_s:
                faulthandler.dump_traceback(all_threads=True)  # to stderr: the worker's log
                await self.fail(TimeoutError(f"a step of the commit in flight has not "
                                             f"returned in {tuning.commit_hang_s:.0f} s"),
                                "a commit")
                return

    # -- what the console reads (streams.console.host.ConsoleHost) --------------------
    @property
    def census(self) -> Census:
        return self.book.census

    def owned_partitions(self) -> set[int]:
        return set(self.ownership.active)

    def owners(self) -> dict[str, set[int]]:
        """Web URL of every worker of the group -> the partitions it owns (faust's assignor)."""
        if self.app is None:
            return {}
        meta: Mapping[str, Mapping[str, list[int]]] = \
            self.app.assignor.external_topics_metadata()
        return {str(url): set(tps.get(self.assignment, ())) for url, tps in meta.items()}

    def read_row(self, key: bytes, partition: int) -> bytes | None:
        """The stored row of a wait key in an owned partition."""
        if partition not in self.ownership.active:
            return None
        return self.stores.get(partition, key)

    def owned_rows(self) -> Iterator[tuple[int, bytes, bytes]]:
        """Every stored row of the owned partitions, partition by partition."""
        for p in sorted(self.ownership.active):
            if p not in self.stores:
                continue  # given up meanwhile
            for key, value in self.stores[p].rows():
                yield p, key, value

    def armed_timers(self) -> int:
        return self.book.armed(self.owned_partitions())

    def input_lag(self) -> dict[tuple[str, int], int]:
        return self.stream_clock.input_lag()

    def stats(self) -> dict[str, Any]:
        owned = self.owned_partitions()
        native = self.handler.native()
        waits: Counter[str] = Counter()
        for (state, _definition), n in self.census.totals(owned).items():
            waits[state] += n
        return {
            "counters": dict(self.counters),
            "ownedPartitions": sorted(owned),
            "ready": self.ready.is_set(),  # every assigned partition taken over
            "standbyPartitions": sorted(self.ownership.standbys),
            "restoring": sorted(self.ownership.assigned - self.ownership.active),
            "restores": {str(p): {"records": r.records, "seconds": round(r.seconds, 3)}
                         for p, r in sorted(self.ownership.restores.items())},
            "changelogOffsets": self.stores.changelog_offsets(),
            "armedTimers": self.armed_timers(),
            "timersInFlight": self.index.in_flight(),
            "waits": dict(waits),
            "guarantee": self.settings.guarantee.value,
            "streamTime": {str(p): t for p, t in sorted(self.sequencer.times().items())},
            # what a probe proves less than its send time (XWAIT_COMMIT_GRACE); null
            # until an automatic grace has seen the input topics
            "commitGraceMs": self.stream_clock.grace_ms,
            "held": self.sequencer.held(),
            "latencyMs": self.latency.summary(),
            "loopLagMs": self.loop_lag.summary(),
            "gcThreshold": list(gc.get_threshold()),
            "gcPasses": None if self.gc_watch is None else list(self.gc_watch.passes),
            "positions": {str(p): {r.value: o for r, o in pos.next_offset.items()}
                          for p, pos in sorted(self.book.decided.items())},
            # What is durable (the test kit's `advance` waits for these, streams.testing.kit):
            # the positions stored with the state, and the armed timers due by their
            # partition's stream time whose decision is not stored yet (up to 1000).
            "durablePositions": {str(p): {r.value: o for r, o in pos.next_offset.items()}
                                 for p, pos in sorted(self.book.durable.items())},
            "timersDue": sum(self.index.count_due(t, [p], cap=1000)
                             for p, t in self.sequencer.times().items() if p in owned),
            # Who decides records (docs/concepts/native.md): "native" or "python", and
            # the records the native path left to the Python one since start, by why.
            "recordPath": "python" if native is None else "native",
            "nativeDeclined": {} if native is None else dict(native.declines()),
        }


__all__ = ["EXIT_COMMIT_FAILED", "Worker"]
