"""Reading every row of the waits table that a worker owns, fast.

A rebuild after a rebalance and a console list read every row of the owned
partitions.  Through faust's `Table.items()` a row costs about 20 us: faust
decodes each key and value through its serializer registry (raw bytes here,
so for nothing), and the partition must then be found by hashing the key
(murmur2 in Python, about 4 us).  faust's RocksDB store keeps one database
per partition, so reading each owned partition's database directly gives the
partition for free and the bytes as stored.  That reaches into the store's
`_dbs` and `_visible_items` (faust-streaming 0.15); should a later faust
change them, the public, slower path is taken instead.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import Any

from streams.partitioning import partition_for

log = logging.getLogger(__name__)

Row = tuple[int, bytes, bytes]  # (partition, key, stored value)
# Keys starting with NUL are the worker's own (the input positions,
# streams.processor.positions), not waits; faust's offset key is skipped by faust.


def owned_rows(table: Any, owned: Iterable[int], partitions: int) -> Iterator[Row]:
    """Every (partition, key, value) stored in the owned partitions, partition by partition."""
    mine = set(owned)
    store = getattr(table, "data", None)
    dbs = getattr(store, "_dbs", None)
    visible = getattr(store, "_visible_items", None)
    if isinstance(dbs, dict) and callable(visible):
        for partition in sorted(p for p in dbs if p in mine):
            db = dbs.get(partition)  # gone if the partition was revoked meanwhile
            if db is None:
                continue
            for key, value in visible(db):
                if isinstance(key, bytes) and isinstance(value, bytes) and key[:1] != b"\x00":
                    yield partition, key, value
        return
    log.debug("waits table: no per-partition databases; reading through Table.items()")
    for key, value in table.items():
        if not isinstance(key, bytes) or not isinstance(value, bytes) or key[:1] == b"\x00":
            continue
        partition = partition_for(key, partitions)
        if partition in mine:
            yield partition, key, value
