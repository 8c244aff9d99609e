"""The worker's state: one RocksDB database per partition, written a batch at a time.

    <data dir>/<app id>/waits-<p>/    one rocksdict database per partition p:
        wait key (utf-8)          -> envelope.Row (slot, seen offsets, head)
        positions.POSITIONS_KEY   -> positions.Positions (input offsets, stream time)
        b"\\x00t" due kind key      -> the timer index (streams.timers.stored)
        b"\\x00c"                   -> the partition's Summary (census, armed timers, low)
        CHANGELOG_OFFSET_KEY      -> offset of the last changelog record this database holds
        CHANGELOG_ID_KEY          -> the changelog topic's id (another id: another life)

The database of a partition is a copy of a prefix of its changelog
partition (`<app id>-waits-changelog`), plus what derives from it (index and
summary, never in the changelog).  Two writers fill it, never at once: the
applier, one atomic write batch per committed batch (`write`, step 5 of
`streams.processor.commit`), and the changelog reader while the partition
is restored or kept warm as a standby (`apply_changelog`).  Each write
carries the offset of the last changelog record it reflects, so a database
on disk is always a consistent prefix: a worker restarted on its own disk
reads the changelog only from there on.

A database is opened when the worker first needs the partition (owned or
standby) and kept open while it is either; it stays on disk when the
partition goes, so a partition that comes back restores only what was
written since.  A database of another changelog topic (another topic id: the
topics were deleted and made again), or ahead of its changelog, is from
another life of the topics: `reset` deletes it and the restore starts from
the changelog's first record.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import rocksdict

from streams.core import WaitStatus
from streams.processor.census import CensusKey, census_key, recount
from streams.processor.envelope import NO_FACTS, RawFacts, RowDecodeError, raw_facts, read_head
from streams.processor.model import NO_WAIT, RowHead
from streams.processor.positions import (
    POSITIONS_KEY,
    Positions,
    PositionsDecodeError,
    decode_positions,
    encode_positions,
)
from streams.processor.tuning import TUNING, Tuning
from streams.timers.stored import SUMMARY_KEY, Summary, raw_due, raw_index_entry

log = logging.getLogger(__name__)

# Keys of the worker's own records start with NUL; no wait key does (the
# processor refuses keys with NUL: ProcessorReject.INVALID_KEY).
OWN_PREFIX = b"\x00"
CHANGELOG_OFFSET_KEY = b"\x00xwait.changelog_offset"
CHANGELOG_ID_KEY = b"\x00xwait.changelog_id"


def _options(tuning: Tuning) -> rocksdict.Options:
    """RocksDB's options per partition (`Tuning.write_buffer_bytes` and the rest say why)."""
    options = rocksdict.Options(raw_mode=True)
    options.create_if_missing(True)
    options.set_max_open_files(tuning.max_open_files)
    options.set_write_buffer_size(tuning.write_buffer_bytes)
    options.set_max_write_buffer_number(tuning.write_buffers)
    options.set_target_file_size_base(tuning.target_file_bytes)
    table = rocksdict.BlockBasedOptions()
    table.set_bloom_filter(tuning.bloom_bits, True)
    table.set_block_cache(rocksdict.Cache(tuning.block_cache_bytes))
    options.set_block_based_table_factory(table)
    return options


def _restore_write_options() -> rocksdict.WriteOptions:
    """Bulk restores write without the WAL: a crash loses whole memtables, newest first,
    so what survives is still a prefix of the changelog with the offset it reflects, and
    the next start reads again from there.  Before anything is written with the WAL on
    top, the memtables must be flushed (`PartitionState.flush`): a WAL replayed over a
    lost memtable would not be a prefix."""
    options = rocksdict.WriteOptions()
    setattr(options, "disable_wal", True)  # noqa: B010 - a property the stubs call a method
    return options


_STATES = list(WaitStatus)
_CENSUS: dict[tuple[int, bytes], CensusKey] = {}


def _census(facts: RawFacts) -> CensusKey | None:
    """The census key of a row's raw facts (the same as `census.census_key` of its head)."""
    state_i, definition = facts[0], facts[1]
    if state_i == 0:
        return None
    key = _CENSUS.get((state_i, definition))
    if key is None:
        key = _CENSUS[(state_i, definition)] = (_STATES[state_i - 1].value,
                                                definition.decode(errors="replace"))
    return key


def head_or_none(value: bytes | None) -> RowHead:
    """The head of a stored row; no wait for none, or for one this version cannot read."""
    if value is None:
        return NO_WAIT
    try:
        return read_head(value)
    except RowDecodeError:
        return NO_WAIT


def summary_move(summary: Summary, before: RowHead, after: RowHead, deletes: int,
                 puts: int) -> None:
    """Account one row's change from `before` to `after` in the partition's summary."""
    old, new = census_key(before), census_key(after)
    if old != new:
        recount(summary.waits, old, new)
    summary.armed += puts - deletes
    for t in after.timers:
        if t.due_at < summary.low:
            summary.low = t.due_at


class PartitionState:
    """One partition's database: reads, the applier's atomic write, restored records."""

    def __init__(self, partition: int, path: Path, tuning: Tuning = TUNING) -> None:
        self.partition = partition
        self.path = path
        self.bulk_records = tuning.bulk_records  # from here on a write goes without the WAL
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db: Any = rocksdict.Rdict(str(path), options=_options(tuning))
        self.unflushed = False  # written without the WAL since the last flush

    def get(self, key: bytes) -> bytes | None:
        value = self.db.get(key)
        return value if isinstance(value, bytes) else None

    def positions(self) -> Positions | None:
        """The stored input positions; None before the partition's first batch."""
        raw = self.get(POSITIONS_KEY)
        if raw is None:
            return None
        try:
            return decode_positions(raw)
        except PositionsDecodeError:
            log.error("unreadable input positions partition=%d: reading the inputs from "
                      "their earliest records", self.partition)
            return None

    def summary(self) -> Summary | None:
        """The stored summary; None if the index was never built here."""
        raw = self.get(SUMMARY_KEY)
        if raw is None:
            return None
        try:
            return Summary.decode(raw)
        except (ValueError, KeyError, TypeError):
            log.error("unreadable timer index summary partition=%d: rebuilding it",
                      self.partition)
            return None

    def changelog_offset(self) -> int | None:
        """The offset of the last changelog record this database holds; None if none."""
        raw = self.get(CHANGELOG_OFFSET_KEY)
        try:
            return None if raw is None else int(raw)
        except ValueError:
            return None

    def is_empty(self) -> bool:
        return next(iter(self.db.keys()), None) is None

    def rows(self) -> Iterator[tuple[bytes, bytes]]:
        """Every wait row (keys not starting with NUL), in key order."""
        for key, value in self.db.items(from_key=b"\x01"):
            if isinstance(key, bytes) and isinstance(value, bytes):
                yield key, value

    def write(self, rows: Mapping[bytes, bytes | None], positions: Positions,
              changelog_offset: int | None, index: Mapping[bytes, bytes | None] | None = None,
              summary: Summary | None = None) -> None:
        """One atomic write: rows, timer index and summary, positions, changelog offset.

        `rows` and `index` hold each key's last value (None: delete).
        """
        wb = rocksdict.WriteBatch(raw_mode=True)
        for key, value in (*rows.items(), *(index or {}).items()):
            if value is None:
                wb.delete(key)
            else:
                wb.put(key, value)
        if summary is not None:
            wb.put(SUMMARY_KEY, summary.encode())
        wb.put(POSITIONS_KEY, encode_positions(positions))
        if changelog_offset is not None:
            wb.put(CHANGELOG_OFFSET_KEY, str(changelog_offset).encode())
        self.db.write(wb)

    def write_index(self, index_puts: Iterable[tuple[bytes, bytes]], summary: Summary) -> None:
        """The index and summary built from the rows (a database whose summary was lost)."""
        wb = rocksdict.WriteBatch(raw_mode=True)
        for key, value in index_puts:
            wb.put(key, value)
        wb.put(SUMMARY_KEY, summary.encode())
        self.db.write(wb)

    def apply_changelog(self, records: Iterable[tuple[int, bytes | None, bytes | None]],
                        summary: Summary, written: WrittenKeys | None = None) -> int:
        """Apply changelog records (offset, key, value) in order, in one write batch without
        the WAL: rows, their index entries and census move (into `summary`, which the
        caller keeps between calls), and the offset of the last record.  Returns how many
        records were applied.

        Every restored record goes through here: the rows' heads are read as raw bytes
        (`envelope.raw_facts`), and index keys are cut from them (`raw_index_entry`).
        `written`: a restore into a database that held no rows when it began, with
        every key written since; a key it has not written has no row to read.
        """
        db = self.db
        wb = rocksdict.WriteBatch(raw_mode=True)
        overlay: dict[bytes, RawFacts] = {}
        waits = summary.waits
        low = summary.low
        last = -1
        n = 0
        for offset, key, value in records:
            last = offset
            n += 1
            if not isinstance(key, bytes):
                continue
            if not key.startswith(OWN_PREFIX):
                if key in overlay:
                    before = overlay[key]
                elif written is not None and not written.add(key):
                    before = NO_FACTS
                else:
                    old = db.get(key)
                    before = raw_facts(old) if isinstance(old, bytes) else NO_FACTS
                after = raw_facts(value)
                overlay[key] = after
                old_timers, new_timers = before[2], after[2]
                if old_timers != new_timers:
                    gone = set(old_timers).difference(new_timers)
                    for timer in gone:
                        wb.delete(raw_index_entry(timer, key)[0])
                    for timer in new_timers:
                        if timer not in old_timers:
                            index_key, generation = raw_index_entry(timer, key)
                            wb.put(index_key, generation)
                            summary.armed += 1
                            due = raw_due(timer)
                            if due < low:
                                low = due
                    summary.armed -= len(gone)
                if before[:2] != after[:2]:
                    recount(waits, _census(before), _census(after))
            if value is None:
                wb.delete(key)
            else:
                wb.put(key, value)
        if n:
            summary.low = low
            wb.put(SUMMARY_KEY, summary.encode())
            wb.put(CHANGELOG_OFFSET_KEY, str(last).encode())
            if n >= self.bulk_records:
                db.write(wb, write_opt=_restore_write_options())
                self.unflushed = True
            else:
                if self.unflushed:
                    self.flush()  # what went without the WAL first, then this with it
                db.write(wb)
        return n

    def flush(self) -> None:
        """Make what restores wrote without the WAL durable (before anything is written with
        the WAL on top of it: a restore is complete, a standby caught up)."""
        if self.unflushed:
            self.db.flush()
            self.unflushed = False

    def close(self) -> None:
        self.flush()
        self.db.close()


class WrittenKeys:
    """The keys a restore into an empty database has written, as a Bloom filter.

    Each changelog record replaces a row whose head the restore must know
    (its timers leave the index, its census count moves), and reading it
    from RocksDB was a fifth of a restore's time in the worker (1-2 us a
    key).  Into an empty database most keys come for the first time: a key
    the filter has not seen has no row, and is not read.  A Bloom filter
    has no false negatives, so a key written before is always read; a false
    positive (about 3% at 10 bits a key) only costs that read.
    """

    BITS_PER_KEY = 10
    MAX_BITS = 1 << 28  # 32 MiB: beyond it the filter fills up (more reads, nothing wrong)

    def __init__(self, keys: int, *, min_bits: int = 1 << 16) -> None:
        """A filter for about `keys` keys (`min_bits`, a power of two, at least)."""
        bits = min(max(min_bits, 1 << (keys * self.BITS_PER_KEY).bit_length()), self.MAX_BITS)
        self._mask = bits - 1
        self._bits = bytearray(bits >> 3)

    def add(self, key: bytes) -> bool:
        """Remember `key` as written; whether it may have been written before."""
        h = hash(key)
        a, b = h & self._mask, (h >> 32) & self._mask
        bits = self._bits
        seen = (bits[a >> 3] >> (a & 7)) & (bits[b >> 3] >> (b & 7)) & 1
        bits[a >> 3] |= 1 << (a & 7)
        bits[b >> 3] |= 1 << (b & 7)
        return bool(seen)


class StateStores:
    """The open databases of the partitions a worker owns or keeps warm."""

    def __init__(self, folder: Path, name: str = "waits", tuning: Tuning = TUNING) -> None:
        self.folder = folder
        self.name = name
        self.tuning = tuning
        self._open: dict[int, PartitionState] = {}
        # The loop and the changelog reader's thread both open and close databases.
        self._lock = threading.Lock()

    def path(self, partition: int) -> Path:
        return self.folder / f"{self.name}-{partition}"

    def open(self, partition: int) -> PartitionState:
        """The partition's database, opened (made, if new) on first use."""
        with self._lock:
            state = self._open.get(partition)
            if state is None:
                state = self._open[partition] = PartitionState(partition, self.path(partition),
                                                               self.tuning)
            return state

    def __getitem__(self, partition: int) -> PartitionState:
        return self._open[partition]

    def __contains__(self, partition: object) -> bool:
        return partition in self._open

    def partitions(self) -> set[int]:
        with self._lock:
            return set(self._open)

    def close(self, partition: int) -> None:
        """Close the partition's database; its files stay for the next time."""
        with self._lock:
            state = self._open.pop(partition, None)
        if state is not None:
            state.close()

    def reset(self, partition: int) -> PartitionState:
        """Delete the partition's database (from another life of the changelog) and
        open an empty one.

        The folder is moved aside before it is deleted, so that nothing of it can
        reappear under the partition's path (RocksDB's destroy leaves files when a
        handle lingers: an old row came back in one test run of fifty).
        """
        self.close(partition)
        path = self.path(partition)
        if path.exists():
            trash = path.with_name(f"{path.name}.deleted-{time.time_ns()}")
            path.rename(trash)
            shutil.rmtree(trash, ignore_errors=True)
        return self.open(partition)

    def changelog_offsets(self) -> dict[str, int | None]:
        """Partition -> the offset of the last changelog record its open database holds
        (actives and standbys alike; for /xwait/stats)."""
        out: dict[str, int | None] = {}
        for p in sorted(self.partitions()):
            state = self._open.get(p)
            if state is not None:
                try:
                    out[str(p)] = state.changelog_offset()
                except rocksdict.DbClosedError:  # closed meanwhile by the restorer's thread
                    continue
        return out

    def close_all(self) -> None:
        for partition in list(self._open):
            self.close(partition)

    # -- what the applier and the console use, by partition -------------------------
    def db(self, partition: int) -> Any:
        return self._open[partition].db

    def get(self, partition: int, key: bytes) -> bytes | None:
        return self._open[partition].get(key)


__all__ = ["CHANGELOG_ID_KEY", "CHANGELOG_OFFSET_KEY", "OWN_PREFIX", "PartitionState",
           "StateStores", "WrittenKeys", "head_or_none", "summary_move"]
