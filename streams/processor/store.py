"""The waits table's RocksDB databases, read and written directly, a batch at a time.

    waits (one RocksDB database per partition, opened by faust):
        wait key (utf-8)                -> envelope.Row (slot, seen offsets, head)
        positions.POSITIONS_KEY         -> positions.Positions
        b"\\x00t" due kind key            -> the timer index (streams.timers.stored)
        b"\\x00c"                         -> the partition's Summary (census, armed timers)
        RESTORED_FROM_KEY               -> first changelog offset a restore into an
                                           empty database applied (until checked)
        faust's b"__faust\\0offset__"    -> last changelog offset this database holds

faust writes a table key by key: each `table[key] = value` sends a changelog
record and writes RocksDB at once, before the record's outputs exist.  The
worker instead writes a whole batch at the end of the commit protocol, as one
atomic RocksDB write batch holding the rows, the timer index and summary
derived from them, the input positions and faust's persisted changelog
offset, so that the database on disk is always a consistent prefix of the
changelog, with its index (`streams.processor.commit`).  faust still owns the
databases' life: it opens them on assignment, restores them from the
changelog (reading from the persisted offset on), and keeps standby copies;
the restore goes through `apply_changelog_batch`, which this module replaces
so that a restored partition gets its index and summary too.

That reaches into faust-streaming 0.15's RocksDB store (`_db_for_partition`,
`offset_key`, `apply_changelog_batch`); `check` fails at start-up, with a
clear message, should a faust upgrade change them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import rocksdict

from streams.errors import ConfigError
from streams.processor.census import census_key
from streams.processor.envelope import RowDecodeError, read_head
from streams.processor.model import NO_WAIT, RowHead
from streams.processor.positions import (
    POSITIONS_KEY,
    Positions,
    PositionsDecodeError,
    decode_positions,
    encode_positions,
)
from streams.timers.stored import SUMMARY_KEY, Summary, index_changes

log = logging.getLogger(__name__)

# Keys of the worker's own records start with NUL; no wait key does.
OWN_PREFIX = b"\x00"
# Where a restore into an empty database began (see `TableStore.restored_from`),
# and, until that is checked, the keys the restore deleted.
RESTORED_FROM_KEY = b"\x00xwait.restored_from"
GONE_PREFIX = b"\x00xwait.gone."


def head_or_none(value: bytes | None) -> RowHead:
    """The head of a stored row; no wait for none, or for one this version cannot read."""
    if value is None:
        return NO_WAIT
    try:
        return read_head(value)
    except RowDecodeError:
        return NO_WAIT


def summary_move(summary: Summary, wait_key: str, before: RowHead, after: RowHead,
                 deletes: list[bytes], puts: list[tuple[bytes, bytes]]) -> None:
    """Account one row's change from `before` to `after` in the partition's summary."""
    old, new = census_key(before), census_key(after)
    if old != new:
        if old is not None:
            summary.waits[old] -= 1
            if summary.waits[old] <= 0:
                del summary.waits[old]
        if new is not None:
            summary.waits[new] += 1
    summary.armed += len(puts) - len(deletes)
    for t in after.timers:
        summary.low = min(summary.low, t.due_at)


class TableStore:
    """Per-partition access to a faust RocksDB table, raw bytes in and out."""

    def __init__(self, table: Any) -> None:
        self.table = table

    @property
    def _store(self) -> Any:
        return self.table.data

    def check(self) -> None:
        """Fail loudly if faust's RocksDB store is not the one this module knows."""
        store = self._store
        missing = [name for name in ("_db_for_partition", "_dbs", "offset_key",
                                     "apply_changelog_batch", "set_persisted_offset")
                   if not hasattr(store, name)]
        if missing or not getattr(store, "use_rocksdict", False):
            raise ConfigError(
                "Expected faust-streaming's rocksdict store (faust-streaming 0.15.x with "
                f"rocksdict), but the waits table's store {type(store).__name__} lacks "
                f"{missing or ['use_rocksdict']}: pin faust-streaming to 0.15.x")

    def db(self, partition: int) -> Any:
        return self._store._db_for_partition(partition)  # noqa: SLF001 - see docstring

    def get(self, partition: int, key: bytes) -> bytes | None:
        value = self.db(partition).get(key)
        return value if isinstance(value, bytes) else None

    def positions(self, partition: int) -> Positions | None:
        """The stored input positions of a partition; None before its first batch."""
        raw = self.get(partition, POSITIONS_KEY)
        if raw is None:
            return None
        try:
            return decode_positions(raw)
        except PositionsDecodeError:
            log.error("unreadable input positions partition=%d: reading from the group's "
                      "committed offsets instead", partition)
            return None

    def summary(self, partition: int) -> Summary | None:
        """The stored summary of a partition; None if its index was never built here."""
        raw = self.get(partition, SUMMARY_KEY)
        if raw is None:
            return None
        try:
            return Summary.decode(raw)
        except (ValueError, KeyError, TypeError):
            log.error("unreadable timer index summary partition=%d: rebuilding it", partition)
            return None

    def has_rows(self, partition: int) -> bool:
        """Whether the partition holds any wait row (keys not starting with NUL)."""
        for key in self.db(partition).keys(from_key=b"\x01"):
            if key != self._store.offset_key:
                return True
        return False

    def write(self, partition: int, rows: Mapping[bytes, bytes | None], positions: Positions,
              changelog_offset: int | None, index: Mapping[bytes, bytes | None] | None = None,
              summary: Summary | None = None) -> None:
        """One atomic write: rows, timer index and summary, positions, faust's changelog offset.

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
            wb.put(self._store.offset_key, str(changelog_offset).encode())
        self.db(partition).write(wb)

    def write_index(self, partition: int, index_puts: Iterable[tuple[bytes, bytes]],
                    summary: Summary) -> None:
        """The index and summary of a partition built from its rows (a database of an
        earlier version, which had none)."""
        wb = rocksdict.WriteBatch(raw_mode=True)
        for key, value in index_puts:
            wb.put(key, value)
        wb.put(SUMMARY_KEY, summary.encode())
        self.db(partition).write(wb)

    # -- restores -----------------------------------------------------------------
    def maintain_index_on_restore(self) -> None:
        """Replace faust's `apply_changelog_batch` with one that keeps index and summary.

        faust applies restored changelog records (an empty disk, a standby, a
        restart that finds the changelog ahead of the disk) in batches of a
        thousand: each row's old and new head give the index entries to
        delete and to put and the census move, all written in the same write
        batch as the rows and faust's persisted offset.  A partition whose
        database holds rows but no summary (an earlier version's) is left to
        the full rebuild at take-over.
        """
        store = self._store
        owner = self

        def apply_changelog_batch(batch: Iterable[Any], to_key: Any, to_value: Any) -> None:
            owner.apply_restored(batch)

        store.apply_changelog_batch = apply_changelog_batch

    def apply_restored(self, batch: Iterable[Any]) -> None:
        self.apply_changelog((event.message.partition, event.message.offset, event.message.key,
                              event.message.value) for event in batch)

    def apply_changelog(self, records: Iterable[tuple[int, int, Any, bytes | None]]) -> None:
        """Apply changelog records (partition, offset, key, value) in order, as a restore does:
        rows, index and census, and faust's persisted offset, one write batch a partition."""
        batches: dict[int, Any] = {}
        summaries: dict[int, Summary | None] = {}
        overlay: dict[int, dict[bytes, bytes | None]] = {}
        offsets: dict[int, int] = {}
        marked: dict[int, bool] = {}
        for p, offset, key, value in records:
            offsets[p] = max(offset, offsets.get(p, -1))
            if p not in batches:
                batches[p] = rocksdict.WriteBatch(raw_mode=True)
                overlay[p] = {}
                stored = self.summary(p)
                marked[p] = self.get(p, RESTORED_FROM_KEY) is not None
                if stored is None and not self.has_rows(p):
                    stored = Summary()  # an empty database: its first restored record
                    batches[p].put(RESTORED_FROM_KEY, str(offset).encode())
                    marked[p] = True
                summaries[p] = stored
            if isinstance(key, bytes):
                self._apply(p, batches[p], overlay[p], summaries[p], key, value)
                if value is None and marked[p]:
                    batches[p].put(GONE_PREFIX + key, b"")
        for p, wb in batches.items():
            wb.put(self._store.offset_key, str(offsets[p]).encode())
            summary = summaries[p]
            if summary is not None:
                wb.put(SUMMARY_KEY, summary.encode())
            self.db(p).write(wb)

    def changelog_offset(self, partition: int) -> int | None:
        """The offset of the last changelog record this database holds (faust's persisted
        offset: written by restores and with every batch); None if it holds none."""
        raw = self.get(partition, self._store.offset_key)
        try:
            return None if raw is None else int(raw)
        except ValueError:
            return None

    def _apply(self, p: int, wb: Any, overlay: dict[bytes, bytes | None],
               summary: Summary | None, key: bytes, value: bytes | None) -> None:
        """One changelog record into a write batch, with its index and census changes."""
        if summary is not None and not key.startswith(OWN_PREFIX):
            old = overlay[key] if key in overlay else self.get(p, key)
            before, after = head_or_none(old), head_or_none(value)
            wait_key = key.decode(errors="replace")
            deletes, puts = index_changes(wait_key, before.timers, after.timers)
            for k in deletes:
                wb.delete(k)
            for k, v in puts:
                wb.put(k, v)
            summary_move(summary, wait_key, before, after, deletes, puts)
        overlay[key] = value
        if value is None:
            wb.delete(key)
        else:
            wb.put(key, value)

    def restored_from(self, partition: int) -> int | None:
        """The changelog offset a restore into this empty database began at, until checked.

        faust 0.15 dropped the first records a standby fetched of its changelog
        partitions (a fetch drained them for an emptied "active" set while
        aiokafka's position moved past them: issue 8's first cause, here on a
        changelog) and then restored from the next ones as if the changelog
        began there.  `faust_glue.deliver_what_was_fetched` stops that drop;
        this stays as the check of it: the worker takes over such a partition
        only after `fill_below` has read what lies below.
        """
        raw = self.get(partition, RESTORED_FROM_KEY)
        try:
            return None if raw is None else int(raw)
        except ValueError:
            return 0

    def fill_below(self, partition: int, records: Iterable[tuple[bytes | None, bytes | None]]
                   ) -> int:
        """Apply changelog records older than everything restored: a key the database
        already holds keeps its (newer) value; the others take the latest of these.

        Clears the `restored_from` mark; returns how many keys were filled.
        """
        wb = rocksdict.WriteBatch(raw_mode=True)
        summary = self.summary(partition) or Summary()
        overlay: dict[bytes, bytes | None] = {}
        held: set[bytes] = set()  # written or deleted by the restore: newer than these
        for key, value in records:
            if not isinstance(key, bytes):
                continue
            if key not in overlay and (self.get(partition, key) is not None
                                       or self.get(partition, GONE_PREFIX + key) is not None):
                held.add(key)
            if key in held:
                continue
            self._apply(partition, wb, overlay, summary, key, value)
        wb.put(SUMMARY_KEY, summary.encode())
        wb.delete(RESTORED_FROM_KEY)
        for key in self.db(partition).keys(from_key=GONE_PREFIX):
            if not (isinstance(key, bytes) and key.startswith(GONE_PREFIX)):
                break
            wb.delete(key)
        self.db(partition).write(wb)
        return sum(1 for v in overlay.values() if v is not None)


__all__ = ["OWN_PREFIX", "RESTORED_FROM_KEY", "TableStore", "head_or_none", "summary_move"]
