"""Timer records in flight: one per wait at a time, so a record is stale only when its wait was
changed by something else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import rocksdict
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core import ArmedTimer, TimerKind
from streams.processor.tuning import TUNING
from streams.timers.due import DueTimers
from streams.timers.firing import FiredTimer
from streams.timers.stored import index_changes


class _Waits:
    """Armed timers of waits, their index in RocksDB, and the punctuator's marks, kept in step."""

    def __init__(self, db: Any) -> None:
        self.db = db
        self.armed: dict[str, dict[TimerKind, ArmedTimer]] = {}
        self.due = DueTimers(lambda p: db, scan_slack=TUNING.timer_scan_slack)
        self.due.own(0, low=0)
        self.generation = 0

    def timer(self, kind: TimerKind, due_at: int) -> ArmedTimer:
        self.generation += 1
        return ArmedTimer(kind, due_at, self.generation)

    def set(self, key: str, timers: dict[TimerKind, ArmedTimer]) -> None:
        """The wait's row is stored with these timers: index and marks follow."""
        before = tuple(self.armed.get(key, {}).values())
        self.armed[key] = dict(timers)
        deletes, puts = index_changes(key, before, tuple(timers.values()))
        for k in deletes:
            self.db.delete(k)
        for k, v in puts:
            self.db.put(k, v)
        self.due.changed(0, key, before, tuple(timers.values()))

    def decide(self, record: FiredTimer, follow_up: int | None) -> bool:
        """Decide a timer record as the core does; False when it is stale.

        Every timer of its wait due by the record's due time fires, in order,
        including the ones a fire arms: a reminder arms the next one `follow_up`
        later; a deadline ends the wait.
        """
        timers = dict(self.armed.get(record.wait_key, {}))
        kind = TimerKind(record.kind)
        mine = timers.get(kind)
        if mine is None or (mine.due_at, mine.generation) != (record.due_at, record.generation):
            return False
        while timers:
            first = min(timers.values(), key=lambda t: (t.due_at, t.kind))
            if first.due_at > record.due_at:
                break
            del timers[first.kind]
            if first.kind is TimerKind.DEADLINE:
                timers = {}
            elif first.kind is TimerKind.REMINDER and follow_up is not None:
                timers[TimerKind.REMINDER] = self.timer(TimerKind.REMINDER,
                                                        first.due_at + follow_up)
        self.set(record.wait_key, timers)
        return True


def rdict(tmp_path: Path) -> Any:
    return rocksdict.Rdict(str(tmp_path / "db"), options=rocksdict.Options(raw_mode=True))


def test_a_wait_has_one_timer_record_in_flight_and_the_next_covers_what_fell_due(
    tmp_path: Path
) -> None:
    waits = _Waits(rdict(tmp_path))
    waits.set("w", {TimerKind.REMINDER: waits.timer(TimerKind.REMINDER, 1_000),
                    TimerKind.DEADLINE: waits.timer(TimerKind.DEADLINE, 3_000)})
    first = waits.due.pop_due({0: 1_500}, limit=10)
    assert [t.kind for t in first] == ["reminder"]
    # The worker is behind: the stream time passes the deadline before the
    # reminder's record comes back.  Sent now, the deadline's record would
    # come back after one for the next reminder, which it fires: stale.
    assert waits.due.pop_due({0: 3_500}, limit=10) == []
    assert waits.decide(first[0], follow_up=1_000)  # arms the next reminder, due 2,000
    second = waits.due.pop_due({0: 3_500}, limit=10)
    assert [(t.kind, t.due_at) for t in second] == [("deadline", 3_000)], (
        "one record for the deadline, which fires the next reminder first")
    assert waits.decide(second[0], follow_up=1_000)
    assert waits.armed["w"] == {}
    assert waits.due.pop_due({0: 9_000}, limit=10) == []


def test_a_timer_riding_on_a_record_that_went_stale_is_emitted_again(tmp_path: Path) -> None:
    waits = _Waits(rdict(tmp_path))
    reminder = waits.timer(TimerKind.REMINDER, 1_000)
    deadline = waits.timer(TimerKind.DEADLINE, 3_000)
    waits.set("w", {TimerKind.REMINDER: reminder})
    lost = waits.due.pop_due({0: 1_500}, limit=10)
    assert [t.kind for t in lost] == ["reminder"]
    waits.set("w", {TimerKind.REMINDER: reminder, TimerKind.DEADLINE: deadline})
    assert waits.due.pop_due({0: 3_500}, limit=10) == []  # behind the reminder's record
    # The reminder's record was not delivered: one record now, for both.
    waits.due.requeue(lost[0])
    sent = waits.due.pop_due({0: 3_500}, limit=10)
    assert sent == [FiredTimer(0, "w", TimerKind.DEADLINE, 3_000, deadline.generation)]
    # An operator moves the deadline: its record is stale, the reminder is due alone.
    waits.set("w", {TimerKind.REMINDER: reminder,
                    TimerKind.DEADLINE: waits.timer(TimerKind.DEADLINE, 9_000)})
    assert waits.due.pop_due({0: 3_500}, limit=10) == [
        FiredTimer(0, "w", TimerKind.REMINDER, 1_000, reminder.generation)]
    assert not waits.decide(sent[0], follow_up=None)


_KEYS = st.sampled_from(["a", "b", "c"])
_OPS = st.lists(st.one_of(
    st.tuples(st.just("park"), _KEYS, st.integers(0, 40), st.integers(0, 40)),
    st.tuples(st.just("tick"), st.just(""), st.integers(0, 12), st.just(0)),
    st.tuples(st.just("decide"), st.just(""), st.integers(0, 9), st.integers(0, 3)),
    st.tuples(st.just("lose"), st.just(""), st.integers(0, 9), st.just(0)),
    st.tuples(st.just("reply"), _KEYS, st.just(0), st.just(0)),
    st.tuples(st.just("move"), _KEYS, st.integers(0, 40), st.just(0)),
), max_size=50)


@given(_OPS, st.integers(1, 3))
@settings(max_examples=200, deadline=None)
def test_every_due_timer_fires_and_records_go_stale_only_when_a_wait_was_changed(
    tmp_path_factory: Any, ops: list[tuple[str, str, int, int]], limit: int
) -> None:
    waits = _Waits(rdict(tmp_path_factory.mktemp("ride")))
    flight: list[FiredTimer] = []
    until = stale = 0
    changed_outside = False  # a reply, a moved deadline, a record lost

    def follow_up(n: int) -> int | None:
        return None if n == 0 else n * 10

    for op, key, a, b in ops:
        if op == "park" and not waits.armed.get(key):
            waits.set(key, {TimerKind.REMINDER: waits.timer(TimerKind.REMINDER, until + a),
                            TimerKind.POLL: waits.timer(TimerKind.POLL, until + b),
                            TimerKind.DEADLINE: waits.timer(TimerKind.DEADLINE,
                                                            until + a + b + 5)})
        elif op == "tick":
            until += a * 10
            flight += waits.due.pop_due({0: until}, limit)
        elif op == "decide" and flight:
            stale += not waits.decide(flight.pop(a % len(flight)), follow_up(b))
        elif op == "lose" and flight:
            waits.due.requeue(flight.pop(a % len(flight)))
            changed_outside = True
        elif op == "reply" and waits.armed.get(key):
            waits.set(key, {})
            changed_outside = True
        elif op == "move" and TimerKind.DEADLINE in waits.armed.get(key, {}):
            waits.set(key, {**waits.armed[key], TimerKind.DEADLINE: waits.timer(
                TimerKind.DEADLINE, until + a)})
            changed_outside = True
    # Time runs on; every record comes back.
    end = until + 10_000
    for _ in range(200):
        flight += waits.due.pop_due({0: end}, limit)
        if not flight:
            break
        stale += not waits.decide(flight.pop(0), follow_up(1))
    left = [t for timers in waits.armed.values() for t in timers.values() if t.due_at <= end]
    assert left == [], "a due timer that no record fires would never fire"
    if not changed_outside:
        assert stale == 0, "a record was sent for a timer another record in flight fired"
