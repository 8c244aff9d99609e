"""A partition's database: the applier's atomic write, and restores from the changelog.

A restored database must be the one the worker would have written: the same
rows, and the timer index and census derived from them, however the
changelog was read (in one go, in chunks, resumed after a crash from the
last offset applied).
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core import ArmedTimer, TimerKind, WaitStatus
from streams.processor.envelope import VERSION_SEPARATOR, Row, encode_row, raw_facts, read_head
from streams.processor.model import RowHead
from streams.processor.positions import POSITIONS_KEY, Positions, encode_positions
from streams.processor.restore import _build_summary
from streams.processor.state import PartitionState, StateStores, WrittenKeys
from streams.processor.tuning import TUNING
from streams.timers.stored import (
    Summary,
    due_entries,
    index_changes,
    index_key,
    raw_due,
    raw_index_entry,
)


def _row(*timers: ArmedTimer, state: WaitStatus = WaitStatus.PARKED) -> bytes:
    head = RowHead(state, "d", None, tuple(sorted(timers, key=lambda t: t.due_at)))
    return encode_row(Row(b"{}", {}, (), head))


def _content(db: Any) -> tuple[dict[bytes, bytes], list[bytes]]:
    """The rows and the timer index of a database (positions and summary left out)."""
    rows, index = {}, []
    for key, value in db.items():
        if key.startswith(b"\x00t"):
            index.append(key)
        elif not key.startswith(b"\x00"):
            rows[key] = value
    return rows, index


def test_a_restored_partition_gets_the_index_and_summary_the_worker_writes(
    tmp_path: Path
) -> None:
    t1, t2, t3 = (ArmedTimer(TimerKind.DEADLINE, 9_000, 1),
                  ArmedTimer(TimerKind.REMINDER, 3_000, 2),
                  ArmedTimer(TimerKind.DEADLINE, 12_000, 5))
    changelog = [(0, b"k1", _row(t1, t2)), (1, b"k2", _row(t3)), (2, b"k1", _row(t1)),
                 (3, b"k2", None), (4, POSITIONS_KEY, encode_positions(Positions({}, 5)))]
    state = PartitionState(0, tmp_path / "p0")
    summary = Summary()
    assert state.apply_changelog(changelog, summary) == 5

    assert [(e.wait_key, e.due_at) for e in due_entries(state.db, 0, 10**6)] == [("k1", 9_000)]
    stored = state.summary()
    assert stored is not None
    assert (dict(stored.waits), stored.armed) == ({("parked", "d"): 1}, 1)
    assert state.changelog_offset() == 4
    assert state.positions() == Positions({}, 5)


def test_a_write_keeps_rows_index_summary_and_positions_together(tmp_path: Path) -> None:
    state = PartitionState(0, tmp_path / "p0")
    t = ArmedTimer(TimerKind.POLL, 100, 1)
    _, puts = index_changes("w", (), (t,))
    state.write({b"w": _row(t)}, Positions({}, 7), 41, dict(puts), Summary(armed=1))
    assert [e.wait_key for e in due_entries(state.db, 0, 200)] == ["w"]
    assert state.positions() == Positions({}, 7)
    assert state.changelog_offset() == 41
    stored = state.summary()
    assert stored is not None and stored.armed == 1


def test_a_database_survives_its_close_and_a_reset_empties_it(tmp_path: Path) -> None:
    stores = StateStores(tmp_path / "app")
    stores.open(3).write({b"w": _row()}, Positions({}, 1), 9)
    stores.close(3)
    assert 3 not in stores
    again = stores.open(3)
    assert again.get(b"w") is not None and again.changelog_offset() == 9
    fresh = stores.reset(3)
    assert fresh.is_empty() and fresh.changelog_offset() is None


_timer = st.builds(ArmedTimer, st.sampled_from(list(TimerKind)),
                   st.integers(0, 10_000), st.integers(1, 5))
_changelog = st.lists(
    st.tuples(st.sampled_from([b"a", b"b", b"c", b"d", b"e"]),
              # A wait has one timer of a kind at a time (the index key is due time,
              # kind, wait key); None: the row was deleted (a tombstone).
              st.one_of(st.none(),
                        st.tuples(st.sampled_from(list(WaitStatus)),
                                  st.lists(_timer, max_size=3, unique_by=lambda t: t.kind)))),
    min_size=1, max_size=25)


def _records(changelog: list[tuple[bytes, tuple[WaitStatus, list[ArmedTimer]] | None]]
             ) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(i, k, None if v is None else _row(*v[1], state=v[0]))
            for i, (k, v) in enumerate(changelog)]


@given(_changelog, st.lists(st.integers(1, 25), max_size=6), st.sampled_from([None, 8, 1024]))
@settings(max_examples=150, deadline=None)
def test_a_restore_read_in_any_chunks_gives_the_index_and_census_of_its_rows(
    tmp_path_factory: Any,
    changelog: list[tuple[bytes, tuple[WaitStatus, list[ArmedTimer]] | None]],
    cuts: list[int],
    filter_bits: int | None,
) -> None:
    """However the changelog is cut (fetches, a restore resumed after a crash from the
    last offset it applied), the database holds its last rows, and the index and census
    derived from those rows alone - as the worker's own writes keep them.  The same with
    the filter of written keys a restore into an empty database reads by (`WrittenKeys`;
    8 bits: nearly every key a false positive), which must never skip a row written."""
    records = _records(changelog)
    state = PartitionState(0, tmp_path_factory.mktemp("chunks") / "p0")
    written = None if filter_bits is None else WrittenKeys(0, min_bits=filter_bits)
    at = 0
    for cut in [*cuts, len(records)]:
        if at >= len(records):
            break
        resumed = state.changelog_offset()
        assert resumed == (at - 1 if at else None)
        summary = state.summary() or Summary()  # a resumed restore starts from what is stored
        state.apply_changelog(records[at:at + cut], summary, written)
        at += cut
    assert state.changelog_offset() == len(records) - 1

    rebuilt = PartitionState(0, tmp_path_factory.mktemp("rebuilt") / "p0")
    last = {k: v for _, k, v in records}
    for key, value in last.items():
        if value is not None and key is not None:
            rebuilt.db.put(key, value)
    expected = _build_summary(rebuilt)
    assert _content(state.db) == _content(rebuilt.db)
    restored = state.summary()
    assert restored is not None
    assert (+restored.waits, restored.armed) == (+expected.waits, expected.armed)
    assert restored.low <= min((t.due_at for _, t in _armed(last)), default=restored.low)


def _armed(rows: dict[bytes | None, bytes | None]) -> list[tuple[bytes, ArmedTimer]]:
    return [(k, t) for k, v in rows.items() if k is not None and v is not None
            for t in read_head(v).timers]


# A definition's name never holds VERSION_SEPARATOR (the loader refuses it): the head
# stores NAME + separator + VERSION in that field.  Nor a lone surrogate: names come from
# UTF-8 files, and the codec refuses a record holding one before any row is written
# (hypothesis drew '\ud800' in a clean-clone CI run).
_NAMES = st.text(alphabet=st.characters(blacklist_characters=VERSION_SEPARATOR,
                                        codec="utf-8"), max_size=12)


@given(st.sampled_from([None, *WaitStatus]), _NAMES,
       # A tenant is text the codec decoded, which refuses lone surrogates (jsonform).
       st.none() | st.text(alphabet=st.characters(codec="utf-8"), max_size=5),
       st.lists(st.builds(ArmedTimer, st.sampled_from(list(TimerKind)),
                          st.integers(-(2**62), 2**62), st.integers(-(2**62), 2**62)),
                max_size=4),
       st.binary(min_size=1, max_size=12).filter(lambda k: not k.startswith(b"\x00")))
@settings(max_examples=300, deadline=None)
def test_the_raw_facts_a_restore_reads_are_those_of_the_decoded_head(
    state: WaitStatus | None, definition: str, tenant: str | None,
    timers: list[ArmedTimer], key: bytes,
) -> None:
    """A restore reads heads as raw bytes; what it derives (index entries, census) must be
    exactly what the worker's own writes derive from the decoded head."""
    head = RowHead(state, definition if state is not None else None, tenant, tuple(timers), 5)
    value = encode_row(Row(b"{}", {}, (), head))
    state_i, definition_bytes, raw = raw_facts(value)
    decoded = read_head(value)
    assert (state_i == 0) == (decoded.state is None)
    assert definition_bytes.decode() == (decoded.definition or "")
    wait_key = key.decode(errors="replace")
    expected = {index_key(t.due_at, t.kind, wait_key): struct.pack(">q", t.generation)
                for t in decoded.timers}
    if wait_key.encode() == key:
        assert dict(raw_index_entry(t, key) for t in raw) == expected
    assert [raw_due(t) for t in raw] == [t.due_at for t in decoded.timers]


def test_a_bulk_restore_skips_the_wal_until_a_small_batch_flushes_it_first(
    tmp_path: Path
) -> None:
    """Thousands of records at a time go without the WAL (a crash loses a suffix: read
    again); a standby keeping up writes a few at a time with it, and flushes the bulk
    first, so what survives a crash is always a prefix, and a takeover need not flush."""
    state = PartitionState(0, tmp_path / "p0")
    summary = Summary()
    bulk = [(i, f"k{i}".encode(), _row()) for i in range(TUNING.bulk_records)]
    state.apply_changelog(bulk, summary)
    assert state.unflushed
    state.apply_changelog([(TUNING.bulk_records, b"late", _row())], summary)
    assert not state.unflushed and state.changelog_offset() == TUNING.bulk_records
    state.close()
    reopened = PartitionState(0, tmp_path / "p0")
    assert reopened.get(b"k0") is not None and reopened.get(b"late") is not None


@given(st.lists(st.binary(max_size=40), max_size=200), st.sampled_from([8, 64, 1 << 16]))
def test_the_filter_of_written_keys_knows_every_key_written(keys: list[bytes],
                                                           bits: int) -> None:
    written = WrittenKeys(0, min_bits=bits)
    for key in keys:
        written.add(key)
    assert all(written.add(key) for key in keys), "a key written was taken for a new one"


def test_the_filter_of_written_keys_spares_nearly_every_read_of_a_new_key() -> None:
    """Sized for the records a restore will read, few new keys pass for written ones."""
    written = WrittenKeys(20_000)
    for i in range(20_000):
        written.add(b"k-%032x" % i)
    new = sum(written.add(b"n-%032x" % i) for i in range(20_000))
    assert new < 20_000 * 0.06
