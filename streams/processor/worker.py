"""The worker: the composition root of the rooms that process records.

One input record's path, and where each guarantee is kept:

    reader (librdkafka, thread)  fetches the active partitions' inputs   reader.py
      -> intake                   takes each offset once, reads gaps      intake.py, inputs.py
      -> sequencer                releases in the broker's time order     sequencer.py
      -> applier                  decides a batch (core.decide)           applier.py, batch.py
      -> committer                outputs, then a txn per partition       commit.py
      -> state                    one RocksDB write per partition         state.py
    punctuator (punctuator.py)    probes end offsets: stream time for quiet partitions;
    applier again                 decides the timers due by stream time   applier.py, timers/due.py
    ownership (takeover.py): fence -> restore (restore.py) -> seek, per partition;
    faust (streams/frame/app.py): group membership, the tasks, the web server.

The worker holds what the rooms share (counters, latencies, the ownership
lock, the wake-up event) and the failure policy: a batch that cannot be made
durable stops the process (exit 70) before any position moves, to be
restarted by its supervisor and read its inputs again.
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
from streams.processor import collector
from streams.processor.applier import Applier, Observer
from streams.processor.census import Census
from streams.processor.commit import FLUSH_TIMEOUT_S, AtLeastOnce, Committer, ExactlyOnce
from streams.processor.gaps import EndOffsets, GapReader
from streams.processor.inputs import InputGate
from streams.processor.intake import Intake
from streams.processor.latency import Latencies
from streams.processor.looplag import LoopLag
from streams.processor.model import INPUT_ROLES, Role
from streams.processor.partitions import PartitionBook
from streams.processor.punctuator import Punctuator
from streams.processor.reader import InputReader
from streams.processor.records import RecordHandler
from streams.processor.restore import ChangelogReader
from streams.processor.sequencer import Sequencer
from streams.processor.state import StateStores
from streams.processor.takeover import Ownership
from streams.timers.due import DueTimers

log = logging.getLogger(__name__)

# Exit code of a worker stopped because a batch could not be made durable.
EXIT_COMMIT_FAILED = 70
# How long faust's own shutdown may take after a failure before the process exits
# regardless (it can hang on a broker that is gone).
FAIL_EXIT_AFTER_S = 10.0
# A commit still not returned after this long hangs in the Kafka client: every step of
# it is bounded well below (commit.FLUSH_TIMEOUT_S, commit.TRANSACTION_TIMEOUT_S), so
# the worker stops, with every thread's stack in its log, to be started again.
COMMIT_HANG_S = FLUSH_TIMEOUT_S + 60
WATCH_EVERY_S = 10.0


def changelog_topic(settings: Settings) -> str:
    return f"{settings.app_id}-waits-changelog"


def assignment_topic(settings: Settings) -> str:
    """The topic whose partitions stand for the waits' partitions in faust's group."""
    return f"{settings.app_id}-assignment"


class Worker:
    """Builds the rooms, holds what they share, and answers the console (`ConsoleHost`)."""

    def __init__(self, settings: Settings, definitions: Mapping[str, WaitDefinition]) -> None:
        self.settings = settings
        self.definitions = definitions
        self.counters: Counter[str] = Counter()
        self.latency = Latencies()
        self.loop_lag = LoopLag()
        self.observers: list[Observer] = []  # called after each record is durable
        self.ready = asyncio.Event()  # set while every assigned partition decides
        self.failure: BaseException | None = None
        self.gc_watch: collector.GcWatch | None = None  # set by `run` (a whole process)
        self.app: Any = None  # the faust app (`streams.frame.app.build`)
        self.topics = {role: settings.topic(role.value) for role in Role}
        self.changelog = changelog_topic(settings)
        self.assignment = assignment_topic(settings)
        lock, wake = asyncio.Lock(), asyncio.Event()

        self.stores = StateStores(settings.data_dir / settings.app_id)
        self.sequencer = Sequencer()
        self.gate = InputGate()
        self.book = PartitionBook()
        self.index = DueTimers(self.stores.db)
        conf = settings.confluent(**{"partitioner": "murmur2_random", "linger.ms": 5})
        self.committer: Committer = (
            ExactlyOnce(conf, self.topics, self.changelog, settings.app_id, settings.partitions,
                        counters=self.counters)
            if settings.guarantee is Guarantee.EXACTLY_ONCE
            else AtLeastOnce(conf, self.topics, self.changelog, settings.app_id,
                             settings.partitions, counters=self.counters))
        self.reader = InputReader(settings.confluent(**{"group.id": f"{settings.app_id}-inputs"}),
                                  {self.topics[r]: r for r in INPUT_ROLES},
                                  linger=settings.batch_linger)
        self.intake = Intake(
            self.reader, GapReader(settings.confluent(**{"group.id": f"{settings.app_id}-gaps"})),
            self.gate, self.sequencer, self.topics, self.counters, self.latency, wake,
            self.fail)
        self.punctuator = Punctuator(
            settings=settings, sequencer=self.sequencer, book=self.book, reader=self.reader,
            end_offsets=EndOffsets(settings.confluent()), topics=self.topics,
            counters=self.counters, latency=self.latency, wake=wake, fail=self.fail,
            active=self.owned_partitions)
        self.applier = Applier(
            handler=RecordHandler(definitions, settings.partitions), sequencer=self.sequencer,
            stores=self.stores, committer=self.committer, book=self.book, index=self.index,
            intake=self.intake, counters=self.counters, latency=self.latency,
            observers=self.observers, lock=lock, wake=wake, fail=self.fail,
            probe_soon=self.punctuator.probe_soon, timers_topic=self.topics[Role.TIMERS],
            linger=settings.batch_linger,
            on_fenced=lambda partitions: self.ownership.lost(partitions))
        self.restorer = ChangelogReader(
            settings.confluent(**{"group.id": f"{settings.app_id}-restore"}), self.changelog,
            self.stores)
        self.ownership = Ownership(
            stores=self.stores, restorer=self.restorer, committer=self.committer,
            intake=self.intake, applier=self.applier, sequencer=self.sequencer, book=self.book,
            index=self.index, punctuator=self.punctuator, topics=self.topics,
            changelog=self.changelog, counters=self.counters, lock=lock, wake=wake,
            ready=self.ready, fail=self.fail, retake_after=settings.session_timeout)

    # -- the failure policy ----------------------------------------------------------
    async def fail(self, exc: BaseException, what: str) -> None:
        """Stop the worker: `what` could not be made durable, and nothing of it was stored."""
        if self.failure is not None:
            return
        self.failure = self.applier.failure = self.intake.failure = exc
        self.punctuator.failure = exc
        log.critical("stopping the worker: %s failed (%s: %s). Nothing of it was stored; "
                     "its input is read again from the stored positions when the worker "
                     "is started again.", what, type(exc).__name__, exc)
        self.counters["failures"] += 1
        loop = asyncio.get_running_loop()
        loop.call_later(FAIL_EXIT_AFTER_S, os._exit, EXIT_COMMIT_FAILED)
        try:
            if self.app is not None:
                await self.app.stop()
        finally:
            os._exit(EXIT_COMMIT_FAILED)

    async def watch(self) -> None:
        """Stop a worker whose commit hangs (see COMMIT_HANG_S) instead of idling for good."""
        while self.failure is None:
            await asyncio.sleep(WATCH_EVERY_S)
            since = self.applier.committing_since
            if since is not None and time.monotonic() - since > COMMIT_HANG_S:
                faulthandler.dump_traceback(all_threads=True)  # to stderr: the worker's log
                await self.fail(TimeoutError(f"the commit in flight has not returned in "
                                             f"{COMMIT_HANG_S:.0f} s"), "a commit")
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
        return self.punctuator.input_lag()

    def stats(self) -> dict[str, Any]:
        owned = self.owned_partitions()
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
            "commitGraceMs": self.punctuator.grace_ms,
            "held": self.sequencer.held(),
            "latencyMs": self.latency.summary(),
            "loopLagMs": self.loop_lag.summary(),
            "gcThreshold": list(gc.get_threshold()),
            "gcPasses": None if self.gc_watch is None else list(self.gc_watch.passes),
            "positions": {str(p): {r.value: o for r, o in pos.next_offset.items()}
                          for p, pos in sorted(self.book.decided.items())},
        }


__all__ = ["EXIT_COMMIT_FAILED", "Worker", "assignment_topic", "changelog_topic"]
