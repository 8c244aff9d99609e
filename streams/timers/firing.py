"""Where a timer fires: a due timer taken from the index, and the event its decision decides.

A wait's timers (reminders, its deadline, an early reply's expiry, a send's
retry, its purge) are armed by the core's decisions and stored twice: in
the wait's row (its head lists them) and in the partition's timer index, a
RocksDB range ordered by due time (`streams.timers.stored`).  A timer fires
in five steps, all in the worker's own batches:

1. the partition's stream time passes its due time: records move it under
   load, the stream clock's probes on a quiet partition
   (`streams.processor.stream_clock`);
2. the applier takes what is due from the index before each batch,
   at most a batch's room (`streams.timers.due.DueTimers.pop_due`), each as
   a `FiredTimer`;
3. the batch decides each after its partition's records
   (`streams.processor.batch.decide_batch`): `event_to_fire` names the
   event - the latest timer of the wait due by the stream time, so one
   decision fires a reminder and the deadline behind it - or says the timer
   is stale (its arming is gone: a reply ended the wait meanwhile);
4. the core decides that event like any other (`streams.core.decide`), and
   the row, the index entries and the outputs are committed with the batch;
5. once stored, the index learns what the decision armed and disarmed
   (`DueTimers.changed`), and a timer taken but not decided is put back
   (`DueTimers.requeue`).

A fired timer is no input record: it is read from no topic, moves no input
position and is never a replay.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from streams.core import ArmedTimer, TimerKind
from streams.core.events import TimerFired


@dataclass(frozen=True)
class FiredTimer:
    """A due timer taken from a partition's index: which wait, and which arming of which
    timer (its kind, due time and generation)."""

    partition: int
    wait_key: str
    kind: TimerKind
    due_at: int
    generation: int

    def event(self) -> TimerFired:
        return TimerFired(self.wait_key, self.kind, self.due_at, self.generation)


def is_armed(armed: Iterable[ArmedTimer], event: TimerFired) -> bool:
    """Whether the wait still has the arming `event` names (kind, due time, generation)."""
    return any(t.kind is event.kind and t.generation == event.generation
               and t.due_at == event.due_at for t in armed)


def event_to_fire(timer: FiredTimer, armed: Iterable[ArmedTimer], until: int) -> TimerFired:
    """The event a taken timer's decision decides, given the wait's armed timers.

    Every timer of the wait due by `until` (its partition's stream time)
    fires in this one decision, each at its own due time: the event names
    the latest of them, and the core catches up to it.  The index is read in
    due-time order a batch's room at a time, so the timer taken is often a
    wait's first due one; firing only that decided a storm's waits three
    times each (two reminders, then the deadline).  A timer whose arming is
    gone is returned as it is: the caller finds it stale (`is_armed`).
    """
    event = timer.event()
    armed = tuple(armed)
    if not is_armed(armed, event):
        return event
    latest = max((t for t in armed if t.due_at <= until), key=lambda t: t.due_at, default=None)
    if latest is not None and latest.due_at > event.due_at:
        return TimerFired(timer.wait_key, latest.kind, latest.due_at, latest.generation)
    return event


__all__ = ["FiredTimer", "event_to_fire", "is_armed"]
