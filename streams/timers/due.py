"""Which timers to emit: the stored index read up to each partition's stream time.

What is in memory is bounded by what is in flight, not by how many waits
are parked: per owned partition, the lowest due time that may still be
pending (`low`), where the next read starts (`start`: below it every entry
is emitted or left for stored input, so a tick does not read again the
timers emitted whose records are still on their way - hundreds a tick and
5-20 ms of it at 500 waits/s), and the earliest due time the last read saw
beyond what it read (`next`: a tick whose time has not reached it reads
nothing, so an idle tick costs no RocksDB seek however large the table); and
the timers emitted whose record has not been processed yet (`emitted`), so
that a tick does not emit them again.  A timer is emitted once per arming;
it is emitted again only when its record was not delivered or was found not
yet due (`requeue`), or when its partition moved (a new owner starts with
nothing emitted).

A wait has at most one timer record in flight.  Deciding a timer record
fires every timer of its wait due by the record's due time, its own and the
ones armed meanwhile (a reminder arms the next), and may end the wait; a
second record sent for the same wait before the first came back was often
stale by then: in a timer storm 4,974 of 29,960 timer records (the first
reminder's record still in flight when the deadline fell due; deciding it
armed the second reminder, whose record came after the deadline's had fired
it).  So a timer of a wait whose record is on its way *rides* on that record:
it is marked, not sent.  When the record has been decided (`changed`), a
rider it did not fire - due later, or the record went stale - loses its mark
and is read again.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from streams.core import ArmedTimer, TimerKind
from streams.timers.stored import armed_in_order, due_entries

# Most index entries one tick looks at per partition beyond those it emits:
# entries emitted and still in flight are skipped, and must not make a tick
# walk the whole backlog of a lagging partition.
SCAN_SLACK = 10_000
# `next` of a partition whose index holds nothing after what was read.
NOTHING_LATER = 2**63

# Iterating the enum class itself builds a generator of its members each time.
_KINDS = tuple(TimerKind)

# (wait key, kind) -> (due, generation, sent): sent, the timer's own record is in
# flight; not sent, it rides on the record of its wait in flight.
Emitted = dict[tuple[str, TimerKind], tuple[int, int, bool]]


@dataclass(frozen=True)
class InFlight:
    """A partition's waits with input taken but not stored yet, and the stream time stored.

    The stored index knows a wait's timers as of its stored row.  A timer of
    one of these waits due after `stored_time` may already be gone (a reply
    appended before it is being decided): it waits until their batch is
    stored.  The partition's other timers are due by its stream time.
    """

    stored_time: int
    wait_keys: Container[str]


@dataclass(frozen=True, order=True)
class DueTimer:
    """A timer to emit: where, for which wait, and which arming of it."""

    partition: int
    wait_key: str
    kind: str
    due_at: int
    generation: int


class DueTimers:
    def __init__(self, db_for: Callable[[int], Any]) -> None:
        self._db_for = db_for
        self._low: dict[int, int] = {}
        # No index entry of the partition that is not in flight is due before
        # this, beyond what the last read covered: every entry put since was
        # announced by `changed` (the worker's own writes) or `requeue`.
        self._next: dict[int, int] = {}
        # Every index entry due before this is emitted, or left for stored input
        # (`_deferred`), or was announced (`changed`, `requeue`), which lowers it.
        self._start: dict[int, int] = {}
        self._emitted: dict[int, Emitted] = {}
        # The earliest timer left for later because its wait had input in flight
        # (`InFlight`): read again once that input is stored (`stored`).
        self._deferred: dict[int, int] = {}

    def take(self, partition: int, low: int) -> None:
        """Own a partition whose index starts at `low`; nothing of it is emitted yet."""
        self._low[partition] = low
        self._next[partition] = low  # not read yet
        self._start[partition] = low
        self._emitted[partition] = {}
        self._deferred.pop(partition, None)

    def drop(self, partition: int) -> None:
        self._low.pop(partition, None)
        self._next.pop(partition, None)
        self._start.pop(partition, None)
        self._emitted.pop(partition, None)
        self._deferred.pop(partition, None)

    def stored(self, partition: int) -> None:
        """Input of the partition was stored: timers left for it may be emitted now."""
        deferred = self._deferred.pop(partition, None)
        if deferred is not None and partition in self._low:
            self._lower(partition, deferred)

    def low(self, partition: int) -> int:
        return self._low.get(partition, 0)

    def in_flight(self) -> int:
        return sum(len(e) for e in self._emitted.values())

    def changed(self, partition: int, wait_key: str, before: Iterable[ArmedTimer],
                after: Iterable[ArmedTimer]) -> None:
        """A wait's timers changed (its row is stored): forget what was emitted of it.

        A mark goes with its timer; a timer still armed keeps its mark only
        while a record of its wait is in flight that fires it (its own, or a
        later timer's that is still armed).  Otherwise - the record it rode
        on went stale (a moved deadline) - it is emitted again.
        """
        now_armed = {(t.kind, t.due_at, t.generation) for t in after}
        self._uncover(partition, wait_key, now_armed)
        if partition in self._low:
            for t in after:
                self._lower(partition, t.due_at)

    def _uncover(self, partition: int, wait_key: str,
                 armed: set[tuple[TimerKind, int, int]] | None = None) -> None:
        """Drop the wait's marks whose timer is not armed (`armed`, when known), and
        those no record in flight fires (none, or one due before them): they are
        read again."""
        emitted = self._emitted.get(partition)
        if not emitted:
            return
        marks = _marks(emitted, wait_key)
        if not marks:
            return
        if armed is not None:
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

    def requeue(self, timer: DueTimer) -> None:
        emitted = self._emitted.get(timer.partition)
        kind = TimerKind(timer.kind)
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

    def forget(self, partition: int, wait_key: str, kind: TimerKind, due_at: int) -> None:
        """An index entry the row did not list was deleted: its emitted mark goes too."""
        emitted = self._emitted.get(partition)
        mark = emitted.get((wait_key, kind)) if emitted is not None else None
        if emitted is not None and mark is not None and mark[0] == due_at:
            del emitted[(wait_key, kind)]
            self._uncover(partition, wait_key)

    def pop_due(self, due_by: Mapping[int, int], limit: int,
                in_flight: Mapping[int, InFlight] | None = None) -> list[DueTimer]:
        """Timers due by their partition's time and not emitted yet, earliest first per partition.

        Each is marked emitted.  Reads the index from where the last read
        stopped (`start`), or from an entry announced below it since, only as
        far as it must.  A timer of a wait `in_flight` due after the
        partition's stored time is left for a later call.
        """
        out: list[DueTimer] = []
        for p, until in due_by.items():
            if p not in self._low or len(out) >= limit or until < self._next[p]:
                continue
            emitted = self._emitted[p]
            waiting = None if in_flight is None else in_flight.get(p)
            first: int | None = None
            last = self._start[p]
            looked = 0
            beyond: list[int] = []
            whole = True
            deferred: int | None = None
            # One record per wait: the last of its due timers.  Deciding it fires
            # the earlier ones first, at their own due times (the core catches up),
            # so a wait with three timers due costs one record, not three.
            latest: dict[str, DueTimer] = {}
            for entry in due_entries(self._db_for(p), self._start[p], until, beyond):
                if first is None:
                    first = entry.due_at
                last = entry.due_at
                looked += 1
                if (waiting is not None and entry.due_at > waiting.stored_time
                        and entry.wait_key in waiting.wait_keys):
                    if deferred is None:
                        deferred = entry.due_at
                    continue
                held = emitted.get((entry.wait_key, entry.kind))
                if held is None or held[:2] != (entry.due_at, entry.generation):
                    rides = entry.wait_key not in latest and _record_in_flight(
                        emitted, entry.wait_key)
                    emitted[(entry.wait_key, entry.kind)] = (entry.due_at, entry.generation,
                                                             False)
                    if not rides:
                        latest.pop(entry.wait_key, None)
                        latest[entry.wait_key] = DueTimer(p, entry.wait_key, entry.kind.value,
                                                          entry.due_at, entry.generation)
                        if len(out) + len(latest) >= limit:
                            whole = False
                            break
                if looked >= limit + SCAN_SLACK:
                    whole = False
                    break
            for t in latest.values():  # the others of its wait ride on it
                emitted[(t.wait_key, TimerKind(t.kind))] = (t.due_at, t.generation, True)
            out += sorted(latest.values(), key=lambda t: t.due_at)
            if deferred is not None:
                self._deferred[p] = min(deferred, self._deferred.get(p, deferred))
            # Read to the end: everything due by `until` is emitted or deferred,
            # and nothing new is due until the first entry after it.  Stopped
            # short: the rest is read next tick, from the instant it stopped in.
            self._start[p] = until + 1 if whole else last
            self._next[p] = (beyond[0] if beyond else NOTHING_LATER) if whole else last
            # Nothing is pending before what is still emitted, what was deferred,
            # and the first entry read; if none of these, before `until`.
            self._low[p] = min((due for due, _, _ in emitted.values()),
                               default=first if first is not None else until + 1)
            if first is not None and first < self._low[p]:
                self._low[p] = first
            if p in self._deferred and self._deferred[p] < self._low[p]:
                self._low[p] = self._deferred[p]
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
    """Whether a timer record of the wait is on its way (sent, not processed yet)."""
    return any(sent for _, _, sent in _marks(emitted, wait_key).values())


__all__ = ["SCAN_SLACK", "DueTimer", "DueTimers", "InFlight"]
