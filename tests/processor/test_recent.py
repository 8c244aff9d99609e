"""The rows the applier stored last: what it keeps, for how long, and when it forgets them."""

from __future__ import annotations

from streams.processor.recent import RecentRows


def test_a_stored_row_and_a_deletion_are_answered_and_other_keys_are_not() -> None:
    recent = RecentRows(per_partition=4)
    recent.remember(0, {b"a": b"row a", b"b": None})
    assert recent.of(0)[b"a"] == b"row a"
    assert recent.of(0)[b"b"] is None  # deleted: no RocksDB read either
    assert b"c" not in recent.of(0)
    assert b"a" not in recent.of(1)  # another partition's database


def test_the_oldest_rows_go_first_and_a_row_written_again_is_the_newest() -> None:
    recent = RecentRows(per_partition=3)
    recent.remember(0, {b"a": b"1", b"b": b"1", b"c": b"1"})
    recent.remember(0, {b"a": b"2"})  # written again: b is the oldest now
    recent.remember(0, {b"d": b"1"})
    assert b"b" not in recent.of(0)
    assert [recent.of(0)[k] for k in (b"a", b"c", b"d")] == [b"2", b"1", b"1"]
    assert len(recent) == 3


def test_a_batch_larger_than_the_bound_keeps_its_last_rows() -> None:
    recent = RecentRows(per_partition=2)
    recent.remember(5, {bytes([k]): b"x" for k in range(10)})
    assert len(recent) == 2
    assert recent.of(5)[bytes([9])] == b"x"
    assert bytes([7]) not in recent.of(5)


def test_forgotten_partitions_and_a_bound_of_zero_keep_nothing() -> None:
    recent = RecentRows(per_partition=8)
    recent.remember(0, {b"a": b"1"})
    recent.remember(1, {b"a": b"1"})
    recent.forget([0])
    assert b"a" not in recent.of(0)
    assert recent.of(1)[b"a"] == b"1"
    none = RecentRows(per_partition=0)
    none.remember(0, {b"a": b"1"})
    assert b"a" not in none.of(0) and len(none) == 0
