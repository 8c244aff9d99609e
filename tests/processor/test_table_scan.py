"""Reading the owned rows: per-partition databases when faust's store has them, else items()."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from streams.partitioning import partition_for
from streams.processor.table_scan import owned_rows

KEYS = [f"wait-{i}".encode() for i in range(40)]
PARTITIONS = 4


class _Store:
    """The shape of faust's RocksDB store: one database per partition."""

    offset_key = b"__faust\x00offset__"

    def __init__(self) -> None:
        self._dbs: dict[int, dict[bytes, bytes]] = {}
        for k in KEYS:
            db = self._dbs.setdefault(partition_for(k, PARTITIONS), {self.offset_key: b"7"})
            db[k] = b"row:" + k

    def _visible_items(self, db: dict[bytes, bytes]) -> Iterator[tuple[bytes, bytes]]:
        return ((k, v) for k, v in db.items() if k != self.offset_key)


class _Table:
    def __init__(self, store: Any) -> None:
        self.data = store

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        for db in self.data._dbs.values():
            yield from self.data._visible_items(db)


class _PlainTable:
    """A table whose store has no per-partition databases (another faust, another store)."""

    def __init__(self) -> None:
        self.rows = {k: b"row:" + k for k in KEYS}

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        return iter(self.rows.items())


def test_both_paths_give_the_owned_rows_with_their_partitions() -> None:
    owned = {1, 3}
    expected = {(partition_for(k, PARTITIONS), k, b"row:" + k) for k in KEYS
                if partition_for(k, PARTITIONS) in owned}
    assert expected, "some keys hash to the owned partitions"
    fast = list(owned_rows(_Table(_Store()), owned, PARTITIONS))
    slow = list(owned_rows(_PlainTable(), owned, PARTITIONS))
    assert set(fast) == expected and len(fast) == len(expected)
    assert set(slow) == expected and len(slow) == len(expected)
    assert [p for p, _, _ in fast] == sorted(p for p, _, _ in fast), "partition by partition"


def test_nothing_owned_reads_nothing() -> None:
    assert list(owned_rows(_Table(_Store()), set(), PARTITIONS)) == []
