"""The ordered timer index a worker keeps for the partitions it owns.

The waits table is the truth; this index is a derived, in-memory view of the
timers armed in it, ordered by the time they are next to be emitted, so that
a punctuator tick finds what is due without walking every wait.

Layout, per partition:
    heap:    (fire_at_ms, seq, wait_key, kind, due_at_ms, generation)  min-heap
    current: (wait_key, kind) -> (due_at_ms, generation)                the armed set

A heap entry is live only while `current` still holds its (due, generation);
disarming a timer just forgets it in `current`, and the stale heap entry is
dropped when it surfaces (lazy deletion).  This is the answer to the
tombstone problem of ordered RocksDB indexes (LittleHorse #1742, Zeebe
#16691): the heap's head is always the lowest pending time, so a tick never
re-walks deleted entries, and the heap is rebuilt when stale entries
outnumber live ones, which bounds its memory.

An emitted timer stays armed until the processor consumes its record and
disarms it.  Until then it is re-queued `redeliver_ms` later, so a timer
record lost on the way (a producer error, a crash between send and flush) is
sent again; a duplicate is harmless because the processor discards timer
records whose generation is no longer armed.

The index is rebuilt from the table after every rebalance (see
`streams.processor`), so a worker that dies loses nothing: its successor
reads the same armed timers from the restored table.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field

# How long an emitted timer waits for its record to come back before it is
# emitted again.  Shorter re-sends more duplicates under load (harmless but
# wasteful); longer delays the recovery of a lost record by that much.
DEFAULT_REDELIVER_MS = 30_000


@dataclass(frozen=True, order=True)
class DueTimer:
    """A timer to emit: where, for which wait, and which arming of it."""

    partition: int
    wait_key: str
    kind: str
    due_at: int
    generation: int


@dataclass
class _PartitionIndex:
    heap: list[tuple[int, int, str, str, int, int]] = field(default_factory=list)
    current: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)

    def compact_if_mostly_stale(self) -> None:
        if len(self.heap) > 64 and len(self.heap) > 2 * len(self.current):
            live = [e for e in self.heap if self.current.get((e[2], e[3])) == (e[4], e[5])]
            heapq.heapify(live)
            self.heap = live


class TimerIndex:
    def __init__(self, redeliver_ms: int = DEFAULT_REDELIVER_MS) -> None:
        self.redeliver_ms = redeliver_ms
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
        return {kind: v for (key, kind), v in part.current.items() if key == wait_key}

    def arm(self, partition: int, wait_key: str, kind: str, due_at: int, generation: int) -> None:
        part = self._parts.setdefault(partition, _PartitionIndex())
        if part.current.get((wait_key, kind)) == (due_at, generation):
            return
        part.current[(wait_key, kind)] = (due_at, generation)
        heapq.heappush(part.heap, (due_at, next(self._seq), wait_key, kind, due_at, generation))
        part.compact_if_mostly_stale()

    def disarm(self, partition: int, wait_key: str, kind: str) -> None:
        part = self._parts.get(partition)
        if part is not None:
            part.current.pop((wait_key, kind), None)

    def replace_partition(self, partition: int, timers: Iterable[DueTimer]) -> None:
        """Forget what the partition had and index `timers` (a rebuild)."""
        part = _PartitionIndex()
        for t in timers:
            part.current[(t.wait_key, t.kind)] = (t.due_at, t.generation)
            part.heap.append((t.due_at, next(self._seq), t.wait_key, t.kind, t.due_at,
                              t.generation))
        heapq.heapify(part.heap)
        self._parts[partition] = part

    def drop_partition(self, partition: int) -> None:
        self._parts.pop(partition, None)

    def count_due(self, now_ms: int, partitions: Iterable[int]) -> int:
        """Armed timers due by `now_ms` (emitted or not): a walk of the armed set."""
        return sum(1 for p in partitions if p in self._parts
                   for due_at, _ in self._parts[p].current.values() if due_at <= now_ms)

    def next_due(self, partition: int) -> int | None:
        """When the partition's earliest live timer should be emitted."""
        part = self._parts.get(partition)
        if part is None:
            return None
        self._drop_stale_head(part)
        return part.heap[0][0] if part.heap else None

    def pop_due(self, now_ms: int, limit: int, partitions: Iterable[int]) -> list[DueTimer]:
        """Timers due by `now_ms`, earliest first, at most `limit` of them.

        Each returned timer is re-queued for `redeliver_ms` later; it leaves
        the index only when the processor disarms it.
        """
        candidates: list[tuple[int, int, int]] = []  # (fire_at, seq, partition)
        for p in partitions:
            part = self._parts.get(p)
            if part is None:
                continue
            self._drop_stale_head(part)
            if part.heap and part.heap[0][0] <= now_ms:
                candidates.append((part.heap[0][0], part.heap[0][1], p))
        heapq.heapify(candidates)
        out: list[DueTimer] = []
        while candidates and len(out) < limit:
            _, _, p = heapq.heappop(candidates)
            part = self._parts[p]
            _, _, key, kind, due_at, gen = heapq.heappop(part.heap)
            out.append(DueTimer(p, key, kind, due_at, gen))
            heapq.heappush(part.heap,
                           (now_ms + self.redeliver_ms, next(self._seq), key, kind, due_at, gen))
            self._drop_stale_head(part)
            if part.heap and part.heap[0][0] <= now_ms:
                heapq.heappush(candidates, (part.heap[0][0], part.heap[0][1], p))
        return out

    @staticmethod
    def _drop_stale_head(part: _PartitionIndex) -> None:
        heap = part.heap
        while heap and part.current.get((heap[0][2], heap[0][3])) != (heap[0][4], heap[0][5]):
            heapq.heappop(heap)
