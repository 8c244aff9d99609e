"""Stream time: how far, by the broker's clock, a partition's inputs have been applied.

A timer of a partition may fire only when every record appended to that
partition's inputs before the timer's due time has been applied: then a
reply that reached Kafka before its deadline is decided before it, however
far behind the worker is (DESIGN rule 2; the core decides the rest by event
time, `streams.core.decide`).  Stream time is the latest time T such that
this holds for every T' <= T.

For one input topic-partition (requests, replies, commands; the timers topic
carries our own output and is left out) a lower bound is known two ways:

* the append time of the last record applied: the input topics use
  LogAppendTime, so every later record was appended at that time or after;
* a probe: at wall time S the worker asks the broker for the partition's end
  offset E (the request leaves after S, so every record appended before S is
  below E).  Once everything below E is applied, S is a bound.

The partition's stream time is the least of its topics' bounds, and never
goes back.  A worker that is caught up thus follows the wall clock, one probe
interval behind; one that lags follows the append times of what it applies.

The clocks of the broker and the workers are assumed to agree (NTP); a skew
moves the boundary between "in time" and "late" by the skew.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from streams.processor.model import Role

CLOCKED_ROLES = (Role.REQUESTS, Role.REPLIES, Role.COMMANDS)


@dataclass
class _Topic:
    next_offset: int = 0
    last_append: int | None = None  # append time of the last record applied
    probe_at: int | None = None  # wall time of the latest probe ...
    probe_end: int = 0  # ... and the end offset it saw

    def bound(self) -> int | None:
        if self.probe_at is not None and self.next_offset >= self.probe_end:
            return self.probe_at if self.last_append is None else max(self.probe_at,
                                                                        self.last_append)
        return self.last_append


@dataclass
class _Partition:
    time: int
    topics: dict[Role, _Topic] = field(default_factory=dict)


class StreamClock:
    """Stream time per owned partition (see the module docstring)."""

    def __init__(self) -> None:
        self._parts: dict[int, _Partition] = {}

    def assign(self, partition: int, next_offsets: Mapping[Role, int], stored_time: int) -> None:
        """Take a partition at the positions it restored, from the stream time stored with them."""
        self._parts[partition] = _Partition(stored_time, {
            role: _Topic(next_offset=next_offsets.get(role, 0)) for role in CLOCKED_ROLES})

    def drop(self, partition: int) -> None:
        self._parts.pop(partition, None)

    def partitions(self) -> set[int]:
        return set(self._parts)

    def applied(self, partition: int, role: Role, offset: int, append_time: int | None) -> None:
        """The record at `offset` of `role` is applied (durably)."""
        part = self._parts.get(partition)
        if part is None or role not in part.topics:
            return
        t = part.topics[role]
        t.next_offset = max(t.next_offset, offset + 1)
        if append_time is not None:
            t.last_append = append_time if t.last_append is None else max(t.last_append,
                                                                           append_time)
        self._advance(part)

    def probed(self, at: int, ends: Iterable[tuple[Role, int, int]]) -> None:
        """End offsets (role, partition, end) seen by a request sent at wall time `at`."""
        touched: set[int] = set()
        for role, partition, end in ends:
            part = self._parts.get(partition)
            if part is None or role not in part.topics:
                continue
            t = part.topics[role]
            if t.probe_at is None or at >= t.probe_at:
                t.probe_at, t.probe_end = at, end
            touched.add(partition)
        for p in touched:
            self._advance(self._parts[p])

    def time(self, partition: int) -> int | None:
        part = self._parts.get(partition)
        return None if part is None else part.time

    def times(self) -> dict[int, int]:
        return {p: part.time for p, part in self._parts.items()}

    @staticmethod
    def _advance(part: _Partition) -> None:
        bounds = [t.bound() for t in part.topics.values()]
        if bounds and all(b is not None for b in bounds):
            part.time = max(part.time, min(b for b in bounds if b is not None))


__all__ = ["CLOCKED_ROLES", "StreamClock"]
