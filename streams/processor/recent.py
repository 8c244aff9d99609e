"""The rows a worker stored last, kept in memory so that the next decision of a wait reads no disk.

Under live traffic a wait is decided a few times within seconds: parked,
reminded, answered, escalated.  Each decision read its row from RocksDB,
and a RocksDB read of a row written moments ago is a seek in the memtable's
skip list: 8-9 % of the event loop's time at 1,000 waits/s (docs/speed.md,
"Where live traffic's CPU goes").  A partition's last `per_partition` rows
written are kept here as the bytes stored (a bytes object is not tracked by
the garbage collector, so keeping them costs the collector nothing; a cache
of *decoded* rows lost to it, "Where a decision's CPU goes").

What is kept is exactly what RocksDB holds for those keys, because only the
applier writes an owned partition's database and it puts here only what a
committed batch wrote, after the write (`remember`, step 6 of
`streams.processor.commit`), a deletion as None.  A partition's rows are
forgotten when it is given up or taken (its database may have been written
by a restore meanwhile), so a key is never answered from another life of
the partition.  A batch fenced or failed is never remembered.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import islice

_NONE: Mapping[bytes, bytes | None] = {}


class RecentRows:
    """Per owned partition, the last `per_partition` rows the applier stored (see the module)."""

    def __init__(self, per_partition: int) -> None:
        self.per_partition = per_partition
        self._rows: dict[int, dict[bytes, bytes | None]] = {}

    def of(self, partition: int) -> Mapping[bytes, bytes | None]:
        """The partition's rows kept, by key (None: deleted)."""
        return self._rows.get(partition, _NONE)

    def remember(self, partition: int, written: Mapping[bytes, bytes | None]) -> None:
        """`written` is in the partition's database now: keep it, the oldest out first."""
        if self.per_partition <= 0:
            return
        rows = self._rows.setdefault(partition, {})
        for key, value in written.items():
            if key in rows:
                del rows[key]  # written again: the newest now
            rows[key] = value
        excess = len(rows) - self.per_partition
        if excess > 0:
            for key in list(islice(rows, excess)):
                del rows[key]

    def forget(self, partitions: Iterable[int]) -> None:
        for p in partitions:
            self._rows.pop(p, None)

    def __len__(self) -> int:
        return sum(len(rows) for rows in self._rows.values())


__all__ = ["RecentRows"]
