"""The ordered timer index a worker keeps for the partitions it owns.

The waits table is the truth; this index is a derived, in-memory view of the
timers armed in it, ordered by due time, so that a punctuator tick finds what
is due without walking every wait.

Layout, per partition:
    heap:    (due_at_ms, seq, wait_key, kind, generation)   min-heap of timers not yet emitted
    current: (wait_key, kind) -> (due_at_ms, generation, emitted)   the armed set

A heap entry is live only while `current` still holds its (due, generation)
unemitted; disarming a timer just forgets it in `current`, and the stale heap
entry is dropped when it surfaces (lazy deletion).  This is the answer to the
tombstone problem of ordered RocksDB indexes (LittleHorse #1742, Zeebe
#16691): the heap's head is always the lowest pending time, so a tick never
re-walks deleted entries, and the heap is rebuilt when stale entries
outnumber live ones, which bounds its memory.

A timer is emitted once per arming.  It is emitted again only when its
record was not delivered (`requeue`), when the processor ignored its record
because the partition's stream time had not reached it yet (`requeue` too),
or when its partition moved (the new owner rebuilds the index from the
table, every timer unemitted) - never because its record was not consumed
yet: a lagging worker must not multiply its own input.

The index is rebuilt from the table after every rebalance (see
`streams.processor`), so a worker that dies loses nothing: its successor
reads the same armed timers from the restored table.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, order=True)
class DueTimer:
    """A timer to emit: where, for which wait, and which arming of it."""

    partition: int
    wait_key: str
    kind: str
    due_at: int
    generation: int


_Entry = tuple[int, int, str, str, int]  # (due_at, seq, wait_key, kind, generation)


@dataclass
class _PartitionIndex:
    heap: list[_Entry] = field(default_factory=list)
    current: dict[tuple[str, str], tuple[int, int, bool]] = field(default_factory=dict)

    def live(self, e: _Entry) -> bool:
        return self.current.get((e[2], e[3])) == (e[0], e[4], False)

    def compact_if_mostly_stale(self) -> None:
        if len(self.heap) > 64 and len(self.heap) > 2 * len(self.current):
            self.heap = [e for e in self.heap if self.live(e)]
            heapq.heapify(self.heap)

    def drop_stale_head(self) -> None:
        heap = self.heap
        while heap and not self.live(heap[0]):
            heapq.heappop(heap)


class TimerIndex:
    def __init__(self) -> None:
        self._parts: dict[int, _PartitionIndex] = {}
        self._seq = itertools.count()

    def __len__(self) -> int:
        return sum(len(p.current) for p in self._parts.values())

    def partitions(self) -> set[int]:
        return set(self._parts)

    def armed(self, partition: int, wait_key: str) -> dict[str, tuple[int, int]]:
        """The timers armed for one wait: kind -> (due_at, generation)."""
        part = self._parts.get(partition)
        if part is None:
            return {}
        return {kind: (v[0], v[1]) for (key, kind), v in part.current.items() if key == wait_key}

    def arm(self, partition: int, wait_key: str, kind: str, due_at: int, generation: int) -> None:
        part = self._parts.setdefault(partition, _PartitionIndex())
        held = part.current.get((wait_key, kind))
        if held is not None and held[:2] == (due_at, generation):
            return
        part.current[(wait_key, kind)] = (due_at, generation, False)
        heapq.heappush(part.heap, (due_at, next(self._seq), wait_key, kind, generation))
        part.compact_if_mostly_stale()

    def disarm(self, partition: int, wait_key: str, kind: str) -> None:
        part = self._parts.get(partition)
        if part is not None:
            part.current.pop((wait_key, kind), None)

    def requeue(self, timer: DueTimer) -> None:
        """Emit `timer` again when due: its record was lost, or ignored as not yet due."""
        part = self._parts.get(timer.partition)
        if part is None:
            return
        key = (timer.wait_key, timer.kind)
        if part.current.get(key) == (timer.due_at, timer.generation, True):
            part.current[key] = (timer.due_at, timer.generation, False)
            heapq.heappush(part.heap, (timer.due_at, next(self._seq), timer.wait_key,
                                       timer.kind, timer.generation))

    def replace_partition(self, partition: int, timers: Iterable[DueTimer]) -> None:
        """Forget what the partition had and index `timers` (a rebuild), none emitted."""
        part = _PartitionIndex()
        for t in timers:
            part.current[(t.wait_key, t.kind)] = (t.due_at, t.generation, False)
            part.heap.append((t.due_at, next(self._seq), t.wait_key, t.kind, t.generation))
        heapq.heapify(part.heap)
        self._parts[partition] = part

    def drop_partition(self, partition: int) -> None:
        self._parts.pop(partition, None)

    def count_due(self, now_ms: int, partitions: Iterable[int]) -> int:
        """Armed timers due by `now_ms` (emitted or not): a walk of the armed set."""
        return sum(1 for p in partitions if p in self._parts
                   for due_at, _, _ in self._parts[p].current.values() if due_at <= now_ms)

    def next_due(self, partition: int) -> int | None:
        """When the partition's earliest timer not yet emitted is due."""
        part = self._parts.get(partition)
        if part is None:
            return None
        part.drop_stale_head()
        return part.heap[0][0] if part.heap else None

    def pop_due(self, due_by: Mapping[int, int], limit: int) -> list[DueTimer]:
        """Timers not yet emitted and due by their partition's time, earliest first.

        `due_by` maps each partition to emit for to the time its timers are
        due by (its stream time).  At most `limit` are returned; each is
        marked emitted and stays armed until the processor disarms it.
        """
        candidates: list[tuple[int, int, int]] = []  # (due_at, seq, partition)
        for p, until in due_by.items():
            part = self._parts.get(p)
            if part is None:
                continue
            part.drop_stale_head()
            if part.heap and part.heap[0][0] <= until:
                candidates.append((part.heap[0][0], part.heap[0][1], p))
        heapq.heapify(candidates)
        out: list[DueTimer] = []
        while candidates and len(out) < limit:
            _, _, p = heapq.heappop(candidates)
            part = self._parts[p]
            due_at, _, key, kind, gen = heapq.heappop(part.heap)
            part.current[(key, kind)] = (due_at, gen, True)
            out.append(DueTimer(p, key, kind, due_at, gen))
            part.drop_stale_head()
            if part.heap and part.heap[0][0] <= due_by[p]:
                heapq.heappush(candidates, (part.heap[0][0], part.heap[0][1], p))
        return out
