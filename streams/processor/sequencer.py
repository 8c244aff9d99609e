"""One partition's inputs in the order the broker's clock gives them, and its stream time.

A wait's request, replies and commands travel on three topics, read
independently: after a restart the worker may hold a command appended at
10:00:18 before a reply appended at 10:00:02, because the replies topic had
the longer backlog.  Deciding the command first would move the wait's clock
to 10:00:18 - firing its 10:00:06 deadline - before the reply that came in
time.  So the worker holds what it has taken until it may apply it:

* a record may be released when no other input topic of its partition can
  still deliver a record appended before it: every other topic either holds
  a later record, or is known to have nothing older left.  Released records
  come out merged by append time, each topic's own order kept;
* a topic with nothing held has nothing older left once everything below
  its end offset has been taken, the end offset read by a probe sent at
  wall time S: every record appended before S is below that offset
  (`probed`).  Otherwise its bound is the append time of its last record
  (its later records were appended after it);
* the partition's stream time is the least of its topics' bounds: every
  record appended before it has been released.  A timer may fire only once
  stream time has passed its due time (the applier fires it then, and the
  handler ignores a timer record, an older worker's or forged, that comes
  earlier).

The timers topic is no longer written by workers (they fire due timers from
their own index); what it still carries, an older worker's records or
forged ones, is released at once, in order (whether each is due is the
handler's check).  Records of a
topic stamped by producers (CreateTime) are ordered by the wall time they
were taken: a producer's clock must not be able to hold a partition back.

The clocks of the broker and the workers are assumed to agree (NTP); a skew
shifts the boundary between "in time" and "late" by the skew.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from streams.processor.context import PartitionStart
from streams.processor.model import InputRecord, Role

CLOCKED_ROLES = (Role.REQUESTS, Role.REPLIES, Role.COMMANDS)


@dataclass
class _Topic:
    taken_next: int  # the next offset to be taken (everything below it is held or released)
    last_ts: int | None = None  # order time of the last record taken
    queue: deque[tuple[int, InputRecord]] = field(default_factory=deque)
    probe_at: int | None = None  # wall time of the latest probe ...
    probe_end: int = 0  # ... and the end offset it saw

    def behind(self) -> bool:
        """Records below the end offset of the latest probe are not taken yet."""
        return self.probe_at is not None and self.taken_next < self.probe_end

    def bound(self) -> int | None:
        """Every record of this topic not yet released was appended at or after this time."""
        if self.queue:
            return self.queue[0][0]
        if self.probe_at is not None and self.taken_next >= self.probe_end:
            return self.probe_at if self.last_ts is None else max(self.probe_at, self.last_ts)
        return self.last_ts


@dataclass
class _Partition:
    time: int  # stream time
    topics: dict[Role, _Topic]
    timers: deque[InputRecord] = field(default_factory=deque)
    # The topics the last release stopped at that were caught up as of an older
    # probe: a fresh probe of these would release more.
    probe_for: tuple[Role, ...] = ()


class Sequencer:
    """Holds the records taken from each owned partition until they may be applied."""

    def __init__(self) -> None:
        self._parts: dict[int, _Partition] = {}
        self._turn = 0  # where the next release starts among the partitions
        # Records taken so far, in all: a probe sent when this read N proves a quiet
        # topic caught up past every record taken before it (`StreamClock.covered`).
        self.taken = 0

    # -- ownership ---------------------------------------------------------------
    def assign(self, partition: int, next_offsets: Mapping[Role, int], stream_time: int) -> None:
        """Own `partition` from these offsets on, at the stream time stored with them."""
        self._parts[partition] = _Partition(stream_time, {
            role: _Topic(taken_next=next_offsets.get(role, 0)) for role in CLOCKED_ROLES})

    def drop(self, partition: int) -> None:
        self._parts.pop(partition, None)

    def take(self, starts: Sequence[PartitionStart]) -> None:
        """Partitions taken over (ownership's `Partitioned`)."""
        for start in starts:
            self.assign(start.partition, start.next_offset, start.stream_time)

    def forget(self, partitions: set[int]) -> None:
        """Partitions given up (ownership's `Partitioned`): what they held goes."""
        for p in partitions:
            self.drop(p)

    def partitions(self) -> set[int]:
        return set(self._parts)

    # -- input ---------------------------------------------------------------------
    def add(self, rec: InputRecord, wall_ms: int) -> None:
        """A record taken in offset order (`streams.processor.inputs`)."""
        # Alike in shape with unrelease's loop (duplicates lists the pair), deliberately: this
        # appends a record taken, that one puts a record released back in front.
        part = self._parts.get(rec.partition)
        if part is None:
            return
        self.taken += 1
        if rec.role not in part.topics:
            part.timers.append(rec)
            return
        t = part.topics[rec.role]
        order = rec.timestamp if rec.log_append_time and rec.timestamp is not None else wall_ms
        if t.last_ts is not None and order < t.last_ts:
            order = t.last_ts  # a clock step back on the broker must not reorder a topic
        t.queue.append((order, rec))
        t.last_ts = order
        t.taken_next = max(t.taken_next, rec.offset + 1)

    def skipped(self, role: Role, partition: int, next_offset: int) -> None:
        """Offsets below `next_offset` hold no records to take (markers, aborts, retention)."""
        part = self._parts.get(partition)
        if part is not None and role in part.topics:
            t = part.topics[role]
            t.taken_next = max(t.taken_next, next_offset)
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

    # -- output --------------------------------------------------------------------
    def release(self, limit: int) -> list[InputRecord]:
        """Records that may be applied now, at most about `limit`, shared among the partitions.

        When more is releasable than `limit` (a slow commit, a backlog), each
        partition gets an equal share, and a partition's unused share goes to
        the others; the first partition visited changes from one call to the
        next.  Taken partition by partition in a fixed order, the first ones
        had the whole limit while the last waited: after a broker restart,
        with commits five times slower for a few seconds, the stream time of
        partitions 6 and 7 fell 4 s behind that of 0-3, and their replies
        were decided seconds late.
        """
        out: list[InputRecord] = []
        parts = list(self._parts.values())
        if not parts or limit <= 0:
            return out
        self._turn = (self._turn + 1) % len(parts)
        active = parts[self._turn:] + parts[:self._turn]
        while active and len(out) < limit:
            share = -(-(limit - len(out)) // len(active))  # ceiling: every one gets some
            more: list[_Partition] = []
            for part in active:
                if len(out) >= limit:
                    break  # the rest are not visited: each keeps the probes it wants
                if self._release_from(part, min(share, limit - len(out)), out):
                    more.append(part)
            active = more
        return out

    def _release_from(self, part: _Partition, room: int, out: list[InputRecord]) -> bool:
        """Up to `room` of `part`'s records onto `out`; whether it may have more."""
        taken = 0
        part.probe_for = ()
        while part.timers and taken < room:
            out.append(part.timers.popleft())
            taken += 1
        while taken < room:
            oldest = _oldest(part)
            if oldest is None:
                break
            first, role = oldest
            blockers = tuple(_holding_back(part, first, role))
            if blockers:
                # Caught up, but as of an older probe: a fresh one may release it.
                part.probe_for = tuple(
                    b for b in blockers if part.topics[b].probe_at is not None
                    and part.topics[b].taken_next >= part.topics[b].probe_end)
                break
            out.append(part.topics[role].queue.popleft()[1])
            taken += 1
        self._advance(part)
        return taken >= room

    def unrelease(self, records: list[InputRecord]) -> None:
        """Put released records back in front, in their order: they were not applied.

        The stream time goes back to before them: a timer record processed
        meanwhile is then found not yet due, and its timer fired later.
        """
        for rec in reversed(records):
            part = self._parts.get(rec.partition)
            if part is None:
                continue
            if rec.role not in part.topics:
                part.timers.appendleft(rec)
                continue
            t = part.topics[rec.role]
            order = rec.timestamp if rec.log_append_time and rec.timestamp is not None else (
                t.queue[0][0] if t.queue else (t.last_ts or 0))
            t.queue.appendleft((order, rec))
            part.time = min(part.time, order - 1)

    def time(self, partition: int) -> int | None:
        part = self._parts.get(partition)
        return None if part is None else part.time

    def times(self) -> dict[int, int]:
        return {p: part.time for p, part in self._parts.items()}

    def wants_probe(self) -> bool:
        return any(part.probe_for for part in self._parts.values())

    def probe_targets(self) -> list[tuple[Role, int]]:
        """The (topic, partition)s whose fresh end offset would release held records.

        Probing only these, not every input of every partition, keeps the
        applier's own probes small: under a steady load a record usually waits
        for one quiet topic of its partition (commands), not for all of them.
        """
        return [(role, p) for p, part in self._parts.items() for role in part.probe_for]

    def behind(self) -> list[tuple[Role, int, int, int]]:
        """(role, partition, next offset to take, probed end) of topics not taken to their end.

        Records below the end are on their way - or the offsets hold none
        (transaction markers, aborted records), or the fetch skipped them,
        which only a direct read can tell.  Until they are taken the topic
        holds its partition's stream time, and later records of the other
        topics, back.
        """
        return [(role, p, t.taken_next, t.probe_end)
                for p, part in self._parts.items() for role, t in part.topics.items()
                if t.behind()]

    def waiting_for(self, partition: int) -> Role | None:
        """The topic whose fetch the partition waits for, if any.

        It holds nothing, may still deliver a record older than everything
        held, and has records below its probed end offset that were not
        taken yet: until they come, nothing of the partition is released,
        whatever the other topics hold.  (A topic caught up as of an older
        probe waits for a probe instead, not for the fetch.)
        """
        part = self._parts.get(partition)
        oldest = None if part is None else _oldest(part)
        if part is None or oldest is None:
            return None
        return next((other for other in _holding_back(part, *oldest)
                     if part.topics[other].behind()), None)

    def held(self, partition: int | None = None, role: Role | None = None) -> int:
        parts = self._parts.values() if partition is None else [
            self._parts[partition]] if partition in self._parts else []
        total = 0
        for part in parts:
            for r, t in part.topics.items():
                if role is None or r is role:
                    total += len(t.queue)
            if role is None or role is Role.TIMERS:
                total += len(part.timers)
        return total

    @staticmethod
    def _advance(part: _Partition) -> None:
        bounds = [t.bound() for t in part.topics.values()]
        if all(b is not None for b in bounds):
            part.time = max(part.time, min(b for b in bounds if b is not None))


def _oldest(part: _Partition) -> tuple[int, Role] | None:
    """The order time and topic of the partition's oldest held record, if any."""
    heads = [(t.queue[0][0], role) for role, t in part.topics.items() if t.queue]
    return min(heads) if heads else None


def _holding_back(part: _Partition, first: int, role: Role) -> Iterator[Role]:
    """The other topics that may still deliver a record older than `role`'s at `first`."""
    return (other for other, t in part.topics.items()
            if other is not role and _below(t.bound(), first))


def _below(bound: int | None, ts: int) -> bool:
    return bound is None or bound < ts


__all__ = ["CLOCKED_ROLES", "Sequencer"]
