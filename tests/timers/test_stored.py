"""The timer index and summary stored beside the rows: what is due, read from RocksDB."""

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
from streams.timers.stored import (
    index_changes,
    index_key,
    parse_index,
)


def _due(db: Any) -> DueTimers:
    return DueTimers(lambda p: db, scan_slack=TUNING.timer_scan_slack)


def rdict(tmp_path: Path, name: str = "db") -> Any:
    return rocksdict.Rdict(str(tmp_path / name), options=rocksdict.Options(raw_mode=True))


def arm(db: Any, key: str, *timers: ArmedTimer) -> None:
    _, puts = index_changes(key, (), timers)
    for k, v in puts:
        db.put(k, v)


@given(st.lists(st.tuples(st.integers(-(2**62), 2**62), st.sampled_from(list(TimerKind)),
                          st.text(min_size=1, max_size=8).filter(lambda k: "\x00" not in k)),
                min_size=1, max_size=30))
@settings(max_examples=200)
def test_index_keys_sort_by_due_time_and_read_back_whole(
    entries: list[tuple[int, TimerKind, str]]
) -> None:
    keys = sorted(index_key(due, kind, key) for due, kind, key in entries)
    assert [parse_index(k, b"\0" * 8).due_at for k in keys] == sorted(d for d, _, _ in entries)
    for due, kind, key in entries:
        entry = parse_index(index_key(due, kind, key), (7).to_bytes(8, "big"))
        assert (entry.due_at, entry.kind, entry.wait_key, entry.generation) == (due, kind, key, 7)


def test_a_tick_emits_what_is_due_once_and_again_only_when_handed_back(tmp_path: Path) -> None:
    db = rdict(tmp_path)
    arm(db, "a", ArmedTimer(TimerKind.DEADLINE, 1_000, 1))
    arm(db, "b", ArmedTimer(TimerKind.REMINDER, 2_000, 2))
    due = _due(db)
    due.own(0, low=0)
    assert due.pop_due({0: 1_500}, limit=10) == [FiredTimer(0, "a", TimerKind.DEADLINE, 1_000, 1)]
    assert due.pop_due({0: 1_500}, limit=10) == [], "emitted once, however long it takes"
    due.requeue(FiredTimer(0, "a", TimerKind.DEADLINE, 1_000, 1))
    assert [t.wait_key for t in due.pop_due({0: 2_000}, limit=10)] == ["a", "b"]
    assert due.low(0) == 1_000, "the low mark never passes a timer still pending"


def test_a_timer_armed_before_the_low_mark_lowers_it(tmp_path: Path) -> None:
    db = rdict(tmp_path)
    due = _due(db)
    due.own(0, low=0)
    assert due.pop_due({0: 5_000}, limit=10) == []
    assert due.low(0) == 5_001
    early = ArmedTimer(TimerKind.DEADLINE, 4_000, 3)  # resumed with time overdue
    arm(db, "c", early)
    due.changed(0, "c", (), (early,))
    assert due.pop_due({0: 5_000}, limit=10) == [FiredTimer(0, "c", TimerKind.DEADLINE, 4_000, 3)]


def test_a_wait_with_several_timers_due_gets_one_record_for_the_last(tmp_path: Path) -> None:
    db = rdict(tmp_path)
    timers = (ArmedTimer(TimerKind.REMINDER, 1_000, 1), ArmedTimer(TimerKind.POLL, 2_000, 2),
              ArmedTimer(TimerKind.DEADLINE, 3_000, 3))
    arm(db, "w", *timers)
    arm(db, "x", ArmedTimer(TimerKind.DEADLINE, 1_500, 1))
    due = _due(db)
    due.own(0, low=0)
    assert due.pop_due({0: 5_000}, limit=10) == [FiredTimer(0, "x", TimerKind.DEADLINE, 1_500, 1),
                                                FiredTimer(0, "w", TimerKind.DEADLINE, 3_000, 3)]
    assert due.pop_due({0: 5_000}, limit=10) == []


def test_when_the_timer_emitted_for_a_wait_goes_its_others_are_emitted_again(
    tmp_path: Path
) -> None:
    db = rdict(tmp_path)
    reminder = ArmedTimer(TimerKind.REMINDER, 1_000, 1)
    deadline = ArmedTimer(TimerKind.DEADLINE, 3_000, 2)
    arm(db, "w", reminder, deadline)
    due = _due(db)
    due.own(0, low=0)
    assert [t.kind for t in due.pop_due({0: 5_000}, limit=10)] == ["deadline"]
    # An operator moved the deadline: the record emitted for it is stale now.
    moved = ArmedTimer(TimerKind.DEADLINE, 9_000, 3)
    deletes, puts = index_changes("w", (deadline,), (moved,))
    for k in deletes:
        db.delete(k)
    for k, v in puts:
        db.put(k, v)
    due.changed(0, "w", (reminder, deadline), (reminder, moved))
    assert due.pop_due({0: 5_000}, limit=10) == [FiredTimer(0, "w", TimerKind.REMINDER, 1_000, 1)]


class _CountingDb:
    """A RocksDB handle that counts the reads a tick makes."""

    def __init__(self, db: Any) -> None:
        self.db = db
        self.reads = 0

    def items(self, from_key: bytes) -> Any:
        self.reads += 1
        return self.db.items(from_key=from_key)


def test_an_idle_tick_reads_nothing_until_the_next_timer_is_due(tmp_path: Path) -> None:
    db = _CountingDb(rdict(tmp_path))
    arm(db.db, "a", ArmedTimer(TimerKind.DEADLINE, 1_000, 1))
    arm(db.db, "b", ArmedTimer(TimerKind.DEADLINE, 9_000, 1))
    due = _due(db)
    due.own(0, low=0)
    assert [t.wait_key for t in due.pop_due({0: 2_000}, limit=10)] == ["a"]
    reads = db.reads
    for until in range(2_100, 9_000, 500):  # ticks while nothing falls due
        assert due.pop_due({0: until}, limit=10) == []
    assert db.reads == reads, "the read before saw that nothing is due before 9,000"
    early = ArmedTimer(TimerKind.REMINDER, 5_000, 2)  # armed meanwhile, before 9,000
    arm(db.db, "c", early)
    due.changed(0, "c", (), (early,))
    assert [t.wait_key for t in due.pop_due({0: 9_000}, limit=10)] == ["c", "b"]


class _EntryCountingDb:
    """A RocksDB handle that counts the index entries a tick reads."""

    def __init__(self, db: Any) -> None:
        self.db = db
        self.entries = 0

    def items(self, from_key: bytes) -> Any:
        for item in self.db.items(from_key=from_key):
            self.entries += 1
            yield item


def test_a_tick_does_not_read_again_the_timers_emitted_and_still_on_their_way(
    tmp_path: Path
) -> None:
    db = _EntryCountingDb(rdict(tmp_path))
    for i in range(100):
        arm(db.db, f"w{i:03}", ArmedTimer(TimerKind.DEADLINE, 1_000 + i, 1))
    due = _due(db)
    due.own(0, low=0)
    assert len(due.pop_due({0: 1_049}, limit=1_000)) == 50
    db.entries = 0
    assert [t.wait_key for t in due.pop_due({0: 1_059}, limit=1_000)] == [
        f"w{i:03}" for i in range(50, 60)]
    assert db.entries == 11, "the ten due since and the first one after: not the 50 before"
    assert due.low(0) == 1_000, "the 60 emitted are still pending: a restart must see them"
    late = ArmedTimer(TimerKind.REMINDER, 1_010, 2)  # armed meanwhile, among the emitted
    arm(db.db, "late", late)
    due.changed(0, "late", (), (late,))
    assert due.pop_due({0: 1_059}, limit=1_000) == [
        FiredTimer(0, "late", TimerKind.REMINDER, 1_010, 2)]
    for i in range(60):  # their records are processed: the waits ended
        gone = ArmedTimer(TimerKind.DEADLINE, 1_000 + i, 1)
        db.db.delete(index_key(gone.due_at, gone.kind, f"w{i:03}"))
        due.changed(0, f"w{i:03}", (gone,), ())
    assert [t.wait_key for t in due.pop_due({0: 1_069}, limit=1_000)] == [
        f"w{i:03}" for i in range(60, 70)]
    assert due.low(0) == 1_010, "the low mark moves up to what is still on its way"


def test_a_tick_stopped_by_its_limit_goes_on_next_tick_where_it_stopped(tmp_path: Path) -> None:
    db = rdict(tmp_path)
    for key in ("a", "b", "c", "d", "e"):
        arm(db, key, ArmedTimer(TimerKind.DEADLINE, 1_000, 1))  # one instant
    arm(db, "f", ArmedTimer(TimerKind.DEADLINE, 1_500, 1))
    due = _due(db)
    due.own(0, low=0)
    assert [t.wait_key for t in due.pop_due({0: 2_000}, limit=2)] == ["a", "b"]
    assert [t.wait_key for t in due.pop_due({0: 2_000}, limit=2)] == ["c", "d"]
    assert [t.wait_key for t in due.pop_due({0: 2_000}, limit=2)] == ["e", "f"]
    assert due.pop_due({0: 2_000}, limit=2) == []


# Alike in shape with test_riding.py's operations (duplicates lists the pair),
# deliberately: two property tests, each its own operations of its own index.
_KEYS = st.sampled_from(["a", "b", "c", "d"])
_OPS = st.lists(st.one_of(
    st.tuples(st.just("arm"), _KEYS, st.sampled_from(list(TimerKind)), st.integers(0, 60)),
    st.tuples(st.just("disarm"), _KEYS, st.sampled_from(list(TimerKind)), st.just(0)),
    st.tuples(st.just("requeue"), st.just(""), st.just(TimerKind.DEADLINE), st.integers(0, 9)),
    st.tuples(st.just("tick"), st.just(""), st.just(TimerKind.DEADLINE), st.integers(0, 12)),
), max_size=40)


@given(_OPS, st.integers(1, 4))
@settings(max_examples=150, deadline=None)
def test_skipping_idle_and_emitted_reads_emits_exactly_what_reading_all_every_tick_emits(
    tmp_path_factory: Any, ops: list[tuple[str, str, TimerKind, int]], limit: int
) -> None:
    db = rdict(tmp_path_factory.mktemp("skip"))
    fast, every = _due(db), _due(db)
    fast.own(0, low=0)
    every.own(0, low=0)
    armed: dict[str, dict[TimerKind, ArmedTimer]] = {}
    popped: list[FiredTimer] = []
    until, generation = 0, 0

    def tick(at: int) -> list[FiredTimer]:
        # The reference reads at every tick, the whole index from its start.
        every._next[0] = every._start[0] = -(2**63)
        asked = fast.may_be_due({0: at})
        got = fast.pop_due({0: at}, limit)
        assert got == every.pop_due({0: at}, limit)
        assert asked or not got, "the applier asks may_be_due before each batch"
        armed_dues = [t.due_at for timers in armed.values() for t in timers.values()]
        assert fast.low(0) <= min(armed_dues, default=fast.low(0)), (
            "a restart reads the index from the low mark: it never passes an armed timer")
        return got

    for op, key, kind, n in ops:
        if op in ("arm", "disarm"):
            before = tuple(armed.get(key, {}).values())
            timers = dict(armed.get(key, {}))
            if op == "arm":
                generation += 1
                timers[kind] = ArmedTimer(kind, until + n * 10, generation)
            else:
                timers.pop(kind, None)
            armed[key] = timers
            deletes, puts = index_changes(key, before, tuple(timers.values()))
            for k in deletes:
                db.delete(k)
            for k, v in puts:
                db.put(k, v)
            for due in (fast, every):
                due.changed(0, key, before, tuple(timers.values()))
        elif op == "requeue" and popped:
            timer = popped[n % len(popped)]
            fast.requeue(timer)
            every.requeue(timer)
        elif op == "tick":
            until += n * 10
            popped += tick(until)
    # Then time runs past everything armed: the rest comes out the same, tick by tick.
    for _ in range(6):
        tick(until + 1_000)


def test_an_index_entry_deleted_as_unlisted_leaves_no_mark_in_flight(tmp_path: Path) -> None:
    db = rdict(tmp_path)
    arm(db, "a", ArmedTimer(TimerKind.DEADLINE, 1_000, 1))
    due = _due(db)
    due.own(0, low=0)
    assert due.pop_due({0: 1_500}, limit=10) == [FiredTimer(0, "a", TimerKind.DEADLINE, 1_000, 1)]
    due.forget_entry(0, "a", TimerKind.REMINDER, 1_000)  # another kind: not this mark
    due.forget_entry(0, "a", TimerKind.DEADLINE, 999)  # another due time: not this mark
    assert due.in_flight() == 1
    due.forget_entry(0, "a", TimerKind.DEADLINE, 1_000)
    assert due.in_flight() == 0
