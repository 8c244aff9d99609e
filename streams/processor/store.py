"""The waits table's RocksDB databases, read and written directly, a batch at a time.

    waits (one RocksDB database per partition, opened by faust):
        wait key (utf-8)                -> envelope.Row (slot, seen offsets, head)
        positions.POSITIONS_KEY         -> positions.Positions
        faust's b"__faust\\0offset__"    -> last changelog offset this database holds

faust writes a table key by key: each `table[key] = value` sends a changelog
record and writes RocksDB at once, before the record's outputs exist.  The
worker instead writes a whole batch at the end of the commit protocol, as one
atomic RocksDB write batch holding the rows, the input positions and faust's
persisted changelog offset, so that the database on disk is always a
consistent prefix of the changelog (`streams.processor.commit`).  faust still
owns the databases' life: it opens them on assignment, restores them from the
changelog (reading from the persisted offset on), and keeps standby copies.

That reaches into faust-streaming 0.15's RocksDB store (`_db_for_partition`,
`offset_key`); `check` fails at start-up, with a clear message, should a
faust upgrade change them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import rocksdict

from streams.errors import ConfigError
from streams.processor.positions import (
    POSITIONS_KEY,
    Positions,
    PositionsDecodeError,
    decode_positions,
    encode_positions,
)

log = logging.getLogger(__name__)


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
        missing = [name for name in ("_db_for_partition", "_dbs", "offset_key")
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

    def write(self, partition: int, rows: Mapping[bytes, bytes | None], positions: Positions,
              changelog_offset: int | None) -> None:
        """One atomic write: the rows, the positions, and faust's persisted changelog offset."""
        wb = rocksdict.WriteBatch(raw_mode=True)
        for key, value in rows.items():
            if value is None:
                wb.delete(key)
            else:
                wb.put(key, value)
        wb.put(POSITIONS_KEY, encode_positions(positions))
        if changelog_offset is not None:
            wb.put(self._store.offset_key, str(changelog_offset).encode())
        self.db(partition).write(wb)

    def changelog_topic(self) -> str:
        name: str = self.table.changelog_topic.get_topic_name()
        return name


__all__ = ["TableStore"]
