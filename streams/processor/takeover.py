"""Ownership: where a worker takes partitions over, gives them up, and keeps standbys warm.

faust's group membership says which partitions this worker owns (actives)
and which it keeps a copy of for another worker (standbys); this room does
the rest, per partition, in the order Kafka Streams uses:

1. **fence** the previous owner: the partition's transactional producer is
   initialised (`commit` F1, under both guarantees), which aborts whatever
   transaction the old owner left open and makes any later produce or commit
   of its fail;
2. **restore** the partition's database from its changelog up to the last
   stable offset read after the fence (`restore.ChangelogReader`): from the
   offset after the last record the database holds, so a restart on its own
   disk or a warm standby reads only the last few records;
3. **seek** the partition's inputs to the positions stored with its state
   (`positions`), clamped to the earliest records retention kept, and take
   its timer index and census from its summary; the partition decides from
   then on, whatever the others are still doing.

A revocation (faust's rebalances revoke everything, then assign) waits for
the batch in flight (`Applier.drain`), then forgets the partitions
everywhere; their databases stay open, since the next assignment usually
gives them back.  Databases of partitions neither owned nor kept as standbys
are closed (their files stay for the next time).

A partition can also be **lost** without faust saying so first: this worker
was frozen past its session timeout, the group gave the partition to
another worker, and the commit that followed the thaw came back fenced
(`commit` F5).  The partition is then given up here at once (`lost`), and
the group's next assignment, which the worker's next heartbeat brings,
decides whether it comes back.  If no rebalance comes within the session
timeout (the fence came from a takeover cut short, not from a new owner),
the worker takes it over again itself.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence

from streams.processor.applier import Applier
from streams.processor.commit import Committer
from streams.processor.context import Partitioned, PartitionStart, Room, WorkerContext
from streams.processor.model import INPUT_ROLES, Role
from streams.processor.positions import Positions
from streams.processor.restore import ChangelogReader, Restored, RestoreFailed
from streams.processor.state import StateStores
from streams.processor.stream_clock import StreamClock
from streams.timers.stored import Summary

log = logging.getLogger(__name__)


class _Laps:
    """Seconds spent in each step of a takeover, for its log line: a slow one says which."""

    def __init__(self) -> None:
        self._start = self._mark = time.monotonic()
        self.seconds: dict[str, float] = {}

    def total(self) -> float:
        return time.monotonic() - self._start

    def lap(self, step: str) -> None:
        now = time.monotonic()
        self.seconds[step] = round(now - self._mark, 2)
        self._mark = now

    def __str__(self) -> str:
        return " ".join(f"{step}:{secs:.2f}" for step, secs in self.seconds.items())


class Ownership(Room):
    """Takes assigned partitions over (fence, restore, seek) and gives them up."""

    def __init__(self, ctx: WorkerContext, stores: StateStores, restorer: ChangelogReader,
                 committer: Committer, applier: Applier, clock: StreamClock,
                 rooms: Sequence[Partitioned]) -> None:
        """`rooms`: every room holding per-partition state, in the order a partition taken
        over is handed to them (the one that starts reading last); `clock` answers the end
        and earliest offsets a takeover asks."""
        super().__init__(ctx)
        self.stores = stores
        self.restorer = restorer
        self.committer = committer
        self.applier = applier
        self.clock = clock
        self.rooms = list(rooms)
        self.changelog = ctx.changelog
        self.ready = asyncio.Event()  # set while every assigned partition decides
        self.active: set[int] = set()  # deciding
        self.assigned: set[int] = set()  # to decide: active, or being taken over
        self.standbys: set[int] = set()
        self.restores: dict[int, Restored] = {}  # the last restore of each partition
        # How long a partition lost (`lost`) waits for a rebalance before this worker
        # takes it over again: the session timeout, in which the group hears of any
        # change of members.
        self.retake_after = ctx.settings.session_timeout
        self._takeover: asyncio.Task[None] | None = None
        self._stopping = False
        self._generation = 0  # one more at every assignment and revocation faust makes

    # -- faust's assignment ------------------------------------------------------------
    def assign(self, actives: set[int], standbys: set[int]) -> None:
        """The group's new assignment: take the new actives over, follow the standbys.

        Returns at once: the takeover runs in the background, partition by
        partition, so that faust's rebalance is not held up by restores.
        """
        if self._stopping:
            return
        self._generation += 1
        standbys = standbys - actives
        for p in sorted(standbys - self.standbys - self.active):
            self.restorer.follow(p)
        self.standbys = standbys
        self.assigned = set(actives)
        unused = self.stores.partitions() - actives - standbys
        if unused:
            asyncio.ensure_future(self._close(unused))
        new = actives - self.active
        if not new:
            self.ready.set()
            return
        self.ready.clear()
        self.counters["takeovers"] += 1
        self._takeover = asyncio.ensure_future(self._take_over(new))

    async def _close(self, partitions: set[int]) -> None:
        """Close databases of partitions this worker neither owns nor keeps warm."""
        for p in sorted(partitions):
            await self.restorer.release(p)
            if p not in self.assigned and p not in self.standbys and p not in self.active:
                self.stores.close(p)

    async def _take_over(self, new: set[int]) -> None:
        steps = _Laps()
        try:
            await self.committer.assign(new)  # 1. fence the previous owners
            steps.lap("fence")
            ends = await self.clock.ask([(self.changelog, p) for p in sorted(new)])
            earliest = await self.clock.ask(
                [(self.topics[r], p) for p in sorted(new) for r in INPUT_ROLES], earliest=True)
            steps.lap("offsets")
            pending = {self.restorer.restore(p, ends[(self.changelog, p)]): p
                       for p in sorted(new)}
            while pending:  # 2. restore; 3. seek, partition by partition as each is done
                done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                restored = []
                for future in done:
                    p = pending.pop(future)
                    try:
                        restored.append(future.result())
                    except RestoreFailed:
                        if p not in self.assigned:
                            continue  # revoked meanwhile: cut short on purpose
                        raise
                await self._activate(restored, earliest)
            steps.lap("restore")
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - e.g. the broker is gone: stop, be restarted
            await self.ctx.fail(exc, f"taking over partitions {sorted(new)}")
            return
        if self.assigned <= self.active:
            self.ready.set()
        records = sum(self.restores[p].records for p in new if p in self.restores)
        log.info("partitions taken over partitions=%s restored_records=%d seconds=%.2f "
                 "steps=%s", sorted(new), records, steps.total(), steps)

    async def _activate(self, restored: list[Restored],
                        earliest: Mapping[tuple[str, int], int]) -> None:
        """Step 3 for restored partitions: seek their inputs and let them decide."""
        async with self.ctx.lock:
            starts: list[PartitionStart] = []
            for r in restored:
                p = r.partition
                if p not in self.assigned or p in self.active:
                    continue
                self.restores[p] = r
                self.counters["restore.records"] += r.records
                state = self.stores[p]
                stored = state.positions()
                start = PartitionStart(p, self._starts(p, stored, earliest),
                                       stored.stream_time if stored is not None else 0,
                                       state.summary() or Summary())
                starts.append(start)
                self.active.add(p)
                log.info("partition taken over partition=%d restored_records=%d "
                         "restore_seconds=%.2f positions=%s", p, r.records, r.seconds,
                         {role.value: o for role, o in start.next_offset.items()})
            if starts:
                for room in self.rooms:
                    room.take(starts)
                self.ctx.wake.set()

    def _starts(self, p: int, stored: Positions | None,
                earliest: Mapping[tuple[str, int], int]) -> dict[Role, int]:
        """Where each input of `p` is read from: its stored position; without one (a
        partition never decided), or one below what retention kept, the earliest record."""
        starts: dict[Role, int] = {}
        for role in INPUT_ROLES:
            topic = self.topics[role]
            first = earliest[(topic, p)]
            start = stored.get(role) if stored is not None else None
            if start is not None and start < first:
                log.warning("input position below the earliest record kept: records were "
                            "deleted by retention before they were applied topic=%s "
                            "partition=%d position=%d earliest=%d", topic, p, start, first)
            starts[role] = first if start is None or start < first else start
        return starts

    # -- giving partitions up ------------------------------------------------------------
    async def revoke(self, partitions: set[int]) -> None:
        """faust revokes partitions: wait for the batch in flight, then let them go."""
        self._generation += 1
        await self._give_up(partitions)

    def lost(self, partitions: frozenset[int]) -> None:
        """A commit of these partitions was fenced: another worker owns them now (commit F5).

        Given up here under the lock, unless faust moved the group meanwhile
        (its revocation gave them up already, and its assignment may have given
        them back).  Called by the applier, which decides nothing more of them.
        """
        asyncio.ensure_future(self._lose(partitions, self._generation))

    async def _lose(self, partitions: frozenset[int], generation: int) -> None:
        async with self.ctx.lock:
            if generation != self._generation or self._stopping:
                return
            gone = set(partitions) & self.active
            self.forget(set(partitions))
            await self.committer.revoke(partitions)
            if self.assigned - self.active:
                self.ready.clear()
            self.counters["partitions.lost"] += len(gone)
        log.warning("partitions lost to another worker partitions=%s: given up without "
                    "storing their last batch; the group's next assignment decides whether "
                    "they come back (taken over again in %.0f s if none comes)",
                    sorted(partitions), self.retake_after)
        asyncio.get_running_loop().call_later(self.retake_after, self._retake, generation,
                                              partitions)

    def _retake(self, generation: int, partitions: frozenset[int]) -> None:
        """No rebalance came since partitions were lost: faust still says this worker owns
        them, so it takes them over again (which fences whoever fenced it)."""
        if generation != self._generation or self._stopping:
            return
        missing = (set(partitions) & self.assigned) - self.active
        if not missing or (self._takeover is not None and not self._takeover.done()):
            return
        log.warning("no rebalance within %.0f s of losing partitions %s, which the group "
                    "still gives this worker: taking them over again", self.retake_after,
                    sorted(missing))
        self.assign(set(self.assigned), set(self.standbys))

    async def _give_up(self, partitions: set[int]) -> None:
        takeover, self._takeover = self._takeover, None
        if takeover is not None and not takeover.done():
            takeover.cancel()
        for p in sorted(self.assigned - self.active):
            asyncio.ensure_future(self.restorer.release(p))  # its restore stops
        self.assigned -= partitions
        async with self.ctx.lock:
            await self.applier.drain()
            self.ready.clear()
            gone = partitions & self.active
            if gone:
                self.forget(gone)
            # Every partition given up, not only those taken over: the takeover's first
            # step made its transactional producer, and whoever owns the partition next
            # fences that producer.  Kept, it was used again when the partition came back
            # (a rebalance during a restore, another worker between): its first commit
            # failed _FENCED and the worker stopped.
            await self.committer.revoke(partitions)

    def forget(self, partitions: set[int]) -> None:
        """Everything the worker knows of these partitions, but their databases."""
        self.active -= partitions
        for room in self.rooms:
            room.forget(partitions)

    async def stop(self, failed: bool) -> None:
        """The worker stops: give every partition up before faust leaves the group.

        Otherwise the applier went on deciding what it held and committing it
        after faust had left the group, while the next owner restored the
        changelog without those commits and decided the same inputs again:
        2,809 duplicate outcomes under exactly_once in one long crash run, all
        from a second worker stopped with SIGTERM.  A worker that fails gives
        nothing up here: it commits nothing more anyway, and the failing commit
        may be the one this would wait for.
        """
        if failed:
            return
        self._stopping = True
        giving_up = asyncio.ensure_future(self._give_up(set(self.active) | self.assigned))
        wait_s = self.ctx.tuning.stop_commit_wait_s
        done, _ = await asyncio.wait({giving_up}, timeout=wait_s)
        if not done:
            # A commit hanging on an unreachable broker: stop regardless, as a crash
            # would. Nothing of the batch is stored here; the next owner fences this
            # worker's transactions and reads whatever of it the changelog holds.
            log.warning("stopping with a batch still committing after %.0f s: the next "
                        "owner of its partitions decides it again", wait_s)
            return
        self.restorer.stop()
        self.stores.close_all()
        log.info("stopping: the batch in flight is committed, every partition given up")


__all__ = ["Ownership"]
