"""Which timers are due: the stored index read up to each partition's stream time.

The applier takes what is due before each batch (`pop_due`), each a
`streams.timers.firing.FiredTimer`, and decides it in the batch (where a
timer fires, step by step: `streams.timers.firing`); a timer taken is
*emitted* (in flight) until the row its decision wrote is stored.

What is in memory is bounded by what is in flight, not by how many waits
are parked: per owned partition, the lowest due time that may still be
pending (`low`), where the next read starts (`start`: below it every entry
is emitted, so a read does not go again over the timers whose batch is
still being committed), and the earliest due time the last read saw beyond
what it read (`next`: a batch whose stream time has not reached it reads
nothing, so asking costs no RocksDB seek however large the table); and the
timers emitted whose decision is not stored yet (`emitted`), so that they
are not taken twice.  A timer is emitted once per arming; it is emitted
again only when its decision was not made (`requeue`: the registry was
away) or a timer record named it before it was due, or when its partition
moved (a new owner starts with nothing emitted).

A wait has at most one timer decided per batch.  Deciding it fires every
timer of its wait due by its due time, its own and the ones armed meanwhile
(a reminder arms the next), and may end the wait; so a timer of a wait with
one already taken *rides* on it: it is marked, not taken.  When that
decision is stored (`changed`), a rider it did not fire - due later, or the
decision found its timer stale - loses its mark and is read again.  (The
decision fires every timer of the wait due by the stream time,
`RecordHandler.fire`, so riders are seldom left.)
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol

from streams.core import ArmedTimer, TimerKind
from streams.timers.firing import FiredTimer
from streams.timers.stored import armed_in_order, due_entries

# `next` of a partition whose index holds nothing after what was read.
NOTHING_LATER = 2**63

# Iterating the enum class itself builds a generator of its members each time.
_KINDS = tuple(TimerKind)

# (wait key, kind) -> (due, generation, sent): sent, the timer itself is taken and
# its decision not stored yet; not sent, it rides on the timer of its wait taken.
Emitted = dict[tuple[str, TimerKind], tuple[int, int, bool]]


class Starting(Protocol):
    """A partition taken over: its index's lowest due time that may be pending."""

    @property
    def partition(self) -> int: ...

    @property
    def low(self) -> int: ...


class DueTimers:
    """The due timers of the owned partitions (see the module docstring)."""

    def __init__(self, db_for: Callable[[int], Any], *, scan_slack: int) -> None:
        """`scan_slack`: most entries a read looks at per partition beyond those it emits
        (`streams.processor.tuning.Tuning.timer_scan_slack` says why)."""
        self._db_for = db_for
        self._scan_slack = scan_slack
        self._low: dict[int, int] = {}
        # No index entry of the partition that is not in flight is due before
        # this, beyond what the last read covered: every entry put since was
        # announced by `changed` (the worker's own writes) or `requeue`.
        self._next: dict[int, int] = {}
        # Every index entry due before this is emitted, or was announced
        # (`changed`, `requeue`), which lowers it.
        self._start: dict[int, int] = {}
        self._emitted: dict[int, Emitted] = {}

    def take(self, starts: Iterable[Starting]) -> None:
        """Own these partitions, each from its `low` on (ownership's `Partitioned`)."""
        for start in starts:
            self.own(start.partition, start.low)

    def forget(self, partitions: Iterable[int]) -> None:
        """Give these partitions up (ownership's `Partitioned`)."""
        for p in partitions:
            self.drop(p)

    def own(self, partition: int, low: int) -> None:
        """Own a partition whose index starts at `low`; nothing of it is emitted yet."""
        self._low[partition] = low
        self._next[partition] = low  # not read yet
        self._start[partition] = low
        self._emitted[partition] = {}

    def drop(self, partition: int) -> None:
        self._low.pop(partition, None)
        self._next.pop(partition, None)
        self._start.pop(partition, None)
        self._emitted.pop(partition, None)

    def low(self, partition: int) -> int:
        return self._low.get(partition, 0)

    def in_flight(self) -> int:
        return sum(len(e) for e in self._emitted.values())

    def changed(self, partition: int, wait_key: str, before: Iterable[ArmedTimer],
                after: Iterable[ArmedTimer]) -> None:
        """A wait's timers changed (its row is stored): forget what was emitted of it.

        A mark goes with its timer; a timer still armed keeps its mark only
        while a timer of its wait is taken that fires it (its own, or a later
        timer that is still armed).  Otherwise - the timer it rode
        on went stale (a moved deadline) - it is emitted again.
        """
        self._uncover(partition, wait_key, after)
        if partition in self._low:
            for t in after:
                self._lower(partition, t.due_at)

    def _uncover(self, partition: int, wait_key: str,
                 after: Iterable[ArmedTimer] | None = None) -> None:
        """Drop the wait's marks whose timer is not armed (among `after`, the wait's
        timers now, when known), and those no timer taken fires (none, or one due
        before them): they are read again.  Most waits have no mark: nothing is
        built for them."""
        emitted = self._emitted.get(partition)
        if not emitted:
            return
        marks = _marks(emitted, wait_key)
        if not marks:
            return
        if after is not None:
            armed = {(t.kind, t.due_at, t.generation) for t in after}
            for kind, (due, generation, _) in list(marks.items()):
                if (kind, due, generation) not in armed:
                    del emitted[(wait_key, kind)]
                    del marks[kind]
        carried = max((due for due, _, sent in marks.values() if sent), default=None)
        for kind, (due, _, _) in marks.items():
            if carried is None or due > carried:
                del emitted[(wait_key, kind)]
                if partition in self._low:
                    self._lower(partition, due)

    def requeue(self, timer: FiredTimer) -> None:
        emitted = self._emitted.get(timer.partition)
        kind = timer.kind
        mark = emitted.get((timer.wait_key, kind)) if emitted is not None else None
        if emitted is not None and mark is not None and mark[:2] == (timer.due_at,
                                                                     timer.generation):
            del emitted[(timer.wait_key, kind)]
            self._uncover(timer.partition, timer.wait_key)  # what rode on it
        if timer.partition in self._low:
            self._lower(timer.partition, timer.due_at)

    def _lower(self, partition: int, due_at: int) -> None:
        """An entry due at `due_at` may be pending: read it next, keep the low mark below it."""
        if due_at < self._low[partition]:
            self._low[partition] = due_at
        if due_at < self._next[partition]:
            self._next[partition] = due_at
        if due_at < self._start[partition]:
            self._start[partition] = due_at

    def forget_entry(self, partition: int, wait_key: str, kind: TimerKind, due_at: int) -> None:
        """An index entry the row did not list was deleted: its emitted mark goes too."""
        emitted = self._emitted.get(partition)
        mark = emitted.get((wait_key, kind)) if emitted is not None else None
        if emitted is not None and mark is not None and mark[0] == due_at:
            del emitted[(wait_key, kind)]
            self._uncover(partition, wait_key)

    def may_be_due(self, due_by: Mapping[int, int]) -> bool:
        """Whether `pop_due` could find a timer: some partition's time reached the first
        index entry not read yet (a look at memory, asked before every batch)."""
        following = self._next
        return any(until >= following[p] for p, until in due_by.items() if p in following)

    def pop_due(self, due_by: Mapping[int, int], limit: int) -> list[FiredTimer]:
        """Timers due by their partition's time and not emitted yet, earliest first per partition.

        Each is marked emitted.  Reads the index from where the last read
        stopped (`start`), or from an entry announced below it since, only as
        far as it must.
        """
        out: list[FiredTimer] = []
        for p, until in due_by.items():
            if p not in self._low or len(out) >= limit or until < self._next[p]:
                continue
            emitted = self._emitted[p]
            first: int | None = None
            last = self._start[p]
            looked = 0
            beyond: list[int] = []
            whole = True
            # One timer per wait: the last of its due timers.  Deciding it fires
            # the earlier ones first, at their own due times (the core catches up),
            # so a wait with three timers due costs one decision, not three.
            latest: dict[str, FiredTimer] = {}
            for entry in due_entries(self._db_for(p), self._start[p], until, beyond):
                if first is None:
                    first = entry.due_at
                last = entry.due_at
                looked += 1
                held = emitted.get((entry.wait_key, entry.kind))
                if held is None or held[:2] != (entry.due_at, entry.generation):
                    rides = entry.wait_key not in latest and _record_in_flight(
                        emitted, entry.wait_key)
                    emitted[(entry.wait_key, entry.kind)] = (entry.due_at, entry.generation,
                                                             False)
                    if not rides:
                        latest.pop(entry.wait_key, None)
                        latest[entry.wait_key] = FiredTimer(p, entry.wait_key, entry.kind,
                                                            entry.due_at, entry.generation)
                        if len(out) + len(latest) >= limit:
                            whole = False
                            break
                if looked >= limit + self._scan_slack:
                    whole = False
                    break
            for t in latest.values():  # the others of its wait ride on it
                emitted[(t.wait_key, t.kind)] = (t.due_at, t.generation, True)
            out += sorted(latest.values(), key=lambda t: t.due_at)
            # Read to the end: everything due by `until` is emitted, and nothing
            # new is due until the first entry after it.  Stopped short: the rest
            # is read next time, from the instant it stopped in.
            self._start[p] = until + 1 if whole else last
            self._next[p] = (beyond[0] if beyond else NOTHING_LATER) if whole else last
            # Nothing is pending before what is still emitted and the first
            # entry read; if neither, before `until`.
            self._low[p] = min((due for due, _, _ in emitted.values()),
                               default=first if first is not None else until + 1)
            if first is not None and first < self._low[p]:
                self._low[p] = first
        return out

    def armed_in_order(self, partitions: Iterable[int], start: int = 0
                       ) -> Iterator[tuple[int, str, int]] | None:
        """(due time, wait key, partition) of the timers armed from `start` on in
        `partitions`, by due time then key: the console's list order.  None while
        one of them is not taken yet (a rebalance is under way)."""
        wanted = sorted(partitions)
        if any(p not in self._low for p in wanted):
            return None

        def of(p: int) -> Iterator[tuple[int, str, int]]:
            for due, key in armed_in_order(self._db_for(p), max(start, self._low[p])):
                yield due, key, p

        return heapq.merge(*(of(p) for p in wanted))

    def count_due(self, now_ms: int, partitions: Iterable[int], cap: int = 100_000) -> int:
        """Armed timers due by `now_ms` (emitted or not), counted up to `cap`."""
        n = 0
        for p in partitions:
            if p not in self._low:
                continue
            for _ in due_entries(self._db_for(p), self._low[p], now_ms):
                n += 1
                if n >= cap:
                    return n
        return n


def _marks(emitted: Emitted, wait_key: str) -> dict[TimerKind, tuple[int, int, bool]]:
    """The wait's marks by kind (a look-up per kind: a scan of every mark made a timer
    storm quadratic)."""
    return {kind: mark for kind in _KINDS if (mark := emitted.get((wait_key, kind))) is not None}


def _record_in_flight(emitted: Emitted, wait_key: str) -> bool:
    """Whether a timer of the wait is taken and its decision not stored yet."""
    return any(sent for _, _, sent in _marks(emitted, wait_key).values())


__all__ = ["DueTimers", "Starting"]
