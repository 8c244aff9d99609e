"""A batch of input records decided together: what it changes, before any of it is written.

The applier hands over the records the sequencer released since the last
batch (from any of the partitions it owns) and the timers due by their
partitions' stream time; `decide_batch` decides them one by one - per
partition in order of the broker's append time, each topic's own order kept -
against the stored rows plus what earlier records of the same batch changed,
and gathers everything the commit must write:

* per partition, the records to produce (actions, outcomes, rejections,
  forwards), the final value of every row the batch touched (a key
  written three times is written once) and the input positions after it;
* how each changed row's head moved (its timers and census), from which the
  stored timer index, the census and the partition's summary follow;
  counters; timer records found stale.

Nothing here touches Kafka, RocksDB or faust: `streams.processor.commit`
makes a batch durable, `streams.processor.applier` drives both.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from streams.core import TimerKind
from streams.core.frozen import fast_init
from streams.processor.model import Handled, InputRecord, OutRecord, Role, RowHead, RowWrite
from streams.processor.positions import Positions
from streams.processor.records import RecordHandler
from streams.timers.firing import FiredTimer
from streams.timers.stored import Summary, index_changes, index_key

RowSource = Callable[[int, bytes], bytes | None]
"""`load(partition, key)`: the row stored under `key` in the partition's table."""


@fast_init
@dataclass(frozen=True, slots=True)
class RowChange:
    """A wait's row went from one head (state, definition, timers) to another."""

    wait_key: str
    before: RowHead
    after: RowHead


@dataclass
class PartitionBatch:
    """What one partition's records change."""

    partition: int
    positions: Positions
    out: list[OutRecord] = field(default_factory=list)
    rows: dict[bytes, bytes | None] = field(default_factory=dict)  # None: delete
    changes: list[RowChange] = field(default_factory=list)  # in the order decided
    # The stored timer index after the batch, key by key (None: delete), in the
    # order decided: a wait parked and ended in one batch puts its timers and
    # deletes them again, and only the last word on a key may be written.
    index: dict[bytes, bytes | None] = field(default_factory=dict)
    armed: int = 0  # index entries the batch adds (negative: removes)
    # Timer records found stale whose index entry the row does not list:
    # (wait key, kind, due_at), the index entry deleted (see `Handled.unindexed`).
    unindexed: list[tuple[str, TimerKind, int]] = field(default_factory=list)
    summary: Summary | None = None  # filled by the worker from `changes`
    not_due: list[tuple[str, str, int, int]] = field(default_factory=list)


@dataclass
class Batch:
    parts: dict[int, PartitionBatch]
    counters: Counter[str] = field(default_factory=Counter)
    # What each decision was about (an input record or a fired timer), what it did,
    # and at which time: the observers' view once the batch is durable.
    decided: list[tuple[InputRecord | FiredTimer, Handled, int]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.decided)

    @property
    def out(self) -> list[OutRecord]:
        return [o for part in self.parts.values() for o in part.out]


def _in_append_order(records: list[InputRecord]) -> Iterator[InputRecord]:
    """One partition's records by append time, each topic's records in offset order.

    Two topics are read independently, so one may be fetched ahead of the
    other; within a batch the broker's clock puts them back in the order
    they happened.  A topic's own order is never changed (a merge, not a sort).
    """
    by_topic: dict[str, list[InputRecord]] = {}
    for rec in records:
        by_topic.setdefault(rec.topic, []).append(rec)
    if len(by_topic) == 1:
        return iter(records)
    return heapq.merge(*by_topic.values(),
                       key=lambda r: r.timestamp if r.timestamp is not None else 0)


def build_batch(handler: RecordHandler, records: Iterable[InputRecord], load: RowSource,
                positions: Mapping[int, Positions], stream_times: Mapping[int, int],
                wall_ms: int, fired: Iterable[FiredTimer] = ()) -> Batch:
    """`decide_batch` in one go."""
    steps = decide_batch(handler, records, load, positions, stream_times, wall_ms, fired)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            batch: Batch = done.value
            return batch


def decide_batch(handler: RecordHandler, records: Iterable[InputRecord], load: RowSource,
                 positions: Mapping[int, Positions], stream_times: Mapping[int, int],
                 wall_ms: int, fired: Iterable[FiredTimer] = ()) -> Generator[None, None, Batch]:
    """Decide `records` in order against the stored rows and each other's changes.

    A generator that pauses after each decision and returns the batch: the
    applier lets the event loop run between two decisions once it has held
    it long enough (`Tuning.yield_after_s`).  Nothing it reads may change
    between two steps but through the batch itself.

    `positions` and `stream_times` are those of the records' partitions
    before the batch; `wall_ms` is the time of the records whose topic is not
    stamped by the broker (see `InputRecord.event_time`).  `fired` are due
    timers of the worker's own index (`streams.timers.firing`), each decided
    after its partition's records: they are due by the stream time, so every
    record appended before them is released already, and a record of their
    wait appended after their due time fires them first (the core catches up).
    A fired timer fires every timer of its wait due by the stream time.
    """
    by_partition: dict[int, list[InputRecord]] = {}
    for rec in records:
        by_partition.setdefault(rec.partition, []).append(rec)
    timers: dict[int, list[FiredTimer]] = {}
    for timer in fired:
        timers.setdefault(timer.partition, []).append(timer)
        by_partition.setdefault(timer.partition, [])
    batch = Batch(parts={})
    counters: list[str] = []
    for partition, recs in by_partition.items():
        part = PartitionBatch(partition, positions.get(partition, Positions()))
        batch.parts[partition] = part
        rows = part.rows

        def load_row(wait_key: str, partition: int = partition,
                     rows: dict[bytes, bytes | None] = rows) -> bytes | None:
            key = wait_key.encode()
            return rows[key] if key in rows else load(partition, key)

        stream_time = stream_times.get(partition)
        next_offset = dict(part.positions.next_offset)
        for rec in _in_append_order(recs):
            now = rec.event_time(wall_ms)
            handled = handler.handle(rec, load_row, now, stream_time)
            _take(part, handled)
            if rec.offset >= next_offset.get(rec.role, 0):  # never back (a replay)
                next_offset[rec.role] = rec.offset + 1
            part.out.extend(handled.out)
            counters += handled.counters
            counters.append(_PROCESSED[rec.role])
            batch.decided.append((rec, handled, now))
            yield
        for timer in timers.get(partition, ()):
            handled = handler.fire(timer, load_row, wall_ms,
                                   stream_time if stream_time is not None else timer.due_at)
            _take(part, handled)
            part.out.extend(handled.out)
            counters += handled.counters
            counters.append("timers.fired")
            batch.decided.append((timer, handled, wall_ms))
            yield
        part.positions = Positions(next_offset, part.positions.stream_time)
    batch.counters.update(counters)  # one count of the whole batch: cheaper than per record
    return batch


_PROCESSED = {role: f"processed.{role.value}" for role in Role}


def _take(part: PartitionBatch, handled: Handled) -> None:
    """Gather one decision into its partition's part (once per decision: kept lean)."""
    if handled.not_due is not None:
        part.not_due.append(handled.not_due)
    wait_key = handled.wait_key
    if wait_key is None:
        return
    key = wait_key.encode()
    row = handled.row
    if row is RowWrite.DELETE:
        part.rows[key] = None
    elif type(row) is bytes:
        part.rows[key] = row
    before, after = handled.head_before, handled.head_after
    if before is not after and before != after:
        part.changes.append(RowChange(wait_key, before, after))
        if before.timers != after.timers:
            deletes, puts = index_changes(key, before.timers, after.timers)
            index = part.index
            for index_key_ in deletes:
                index[index_key_] = None
            index.update(puts)  # after the deletes: a new generation of the same timer
            part.armed += len(puts) - len(deletes)
    if handled.unindexed is not None:
        kind, due_at = handled.unindexed
        part.index[index_key(due_at, kind, wait_key)] = None
        part.unindexed.append((wait_key, kind, due_at))


__all__ = ["Batch", "PartitionBatch", "RowChange", "RowSource", "build_batch", "decide_batch"]
