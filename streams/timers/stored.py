"""The timer index and the census, kept in each partition's RocksDB database beside the rows.

    b"\\x00t" due_at:u64 kind:u8 wait_key  -> generation:i64   every armed timer, by due time
    b"\\x00c"                             -> Summary (JSON)    waits by state and definition,
                                                              armed timers, where to scan from

Both are derived from the rows and written in the same RocksDB write batch
as the rows they derive from (`streams.processor.state`), so after a crash
they agree with the table without a rebuild: a restart on its own disk reads
nothing per row.  A partition restored from the changelog (an empty disk, a
standby) gets them from the same hook that applies the restored rows.  They
never travel in the changelog: they are local to each copy.

The applier reads only what is due, from the lowest due time that may
still be pending (`Summary.low`): rows deleted from the front of an ordered
RocksDB index leave tombstones that a scan from the start would walk again
and again (LittleHorse #1742, Zeebe #16691).  Anything armed earlier than
`low` lowers it.

Keys start with NUL, which no wait key contains (the processor refuses such
keys), and `PartitionState.rows` skips them.
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from streams.core import ArmedTimer, TimerKind

INDEX_PREFIX = b"\x00t"
SUMMARY_KEY = b"\x00c"
_KINDS = list(TimerKind)
_KIND_INDEX = {kind: i for i, kind in enumerate(_KINDS)}
_DUE = struct.Struct(">QB")
_GEN = struct.Struct(">q")
_SIGN = 1 << 63  # due times are stored with the sign bit flipped: negative ones sort first

CensusKey = tuple[str, str]  # (state, definition)


@dataclass(frozen=True)
class IndexEntry:
    due_at: int
    kind: TimerKind
    wait_key: str
    generation: int


def index_key(due_at: int, kind: TimerKind, wait_key: str) -> bytes:
    return _index_key(due_at, kind, wait_key.encode())


def _index_key(due_at: int, kind: TimerKind, key: bytes) -> bytes:
    """`index_key` of a wait key already encoded."""
    return INDEX_PREFIX + _DUE.pack(due_at + _SIGN, _KIND_INDEX[kind]) + key


def raw_index_entry(timer: bytes, wait_key: bytes) -> tuple[bytes, bytes]:
    """The index key and value of a timer as a row's head stores it (17 bytes: kind:u8
    due_at:i64 generation:i64, `envelope.raw_facts`), without unpacking it: flipping the
    sign bit of a big-endian two's-complement due time gives `due_at + _SIGN` unsigned,
    and the generation is stored as the head stores it."""
    return (INDEX_PREFIX + bytes((timer[1] ^ 0x80,)) + timer[2:9] + timer[0:1] + wait_key,
            timer[9:17])


def raw_due(timer: bytes) -> int:
    return int.from_bytes(timer[1:9], "big", signed=True)


def index_bound(due_at: int) -> bytes:
    """The first index key of timers due at `due_at` (a seek target or an upper bound)."""
    return INDEX_PREFIX + struct.pack(">Q", due_at + _SIGN)


def parse_index(key: bytes, value: bytes) -> IndexEntry:
    due, kind_i = _DUE.unpack_from(key, len(INDEX_PREFIX))
    wait_key = key[len(INDEX_PREFIX) + _DUE.size:].decode()
    return IndexEntry(due - _SIGN, _KINDS[kind_i], wait_key, _GEN.unpack(value)[0])


def index_changes(wait_key: str | bytes, before: Sequence[ArmedTimer],
                  after: Sequence[ArmedTimer]) -> tuple[list[bytes], list[tuple[bytes, bytes]]]:
    """The index keys to delete and the entries to put when a wait's timers change.

    A head holds a few timers, so membership in the other tuple is asked
    directly (identity first, then equality) instead of hashing both sides
    into sets: this runs once per decision (docs/speed.md, "Live traffic's
    CPU, 2026-12-07").
    """
    key = wait_key.encode() if isinstance(wait_key, str) else wait_key
    deletes = [_index_key(t.due_at, t.kind, key) for t in before if t not in after]
    puts = [(_index_key(t.due_at, t.kind, key), _GEN.pack(t.generation))
            for t in after if t not in before]
    return deletes, puts


@dataclass
class Summary:
    """What a partition holds, kept current with every write: no row is read to know it."""

    waits: Counter[CensusKey] = field(default_factory=Counter)
    armed: int = 0  # timers in the index
    low: int = 0  # no index entry is due before this

    def encode(self) -> bytes:
        return orjson.dumps({"w": [[s, d, n] for (s, d), n in sorted(self.waits.items()) if n],
                             "t": self.armed, "l": self.low})

    @classmethod
    def decode(cls, data: bytes) -> Summary:
        raw: Any = orjson.loads(data)
        return cls(Counter({(str(s), str(d)): int(n) for s, d, n in raw["w"]}),
                   int(raw["t"]), int(raw["l"]))

    def copy(self) -> Summary:
        return Summary(Counter(self.waits), self.armed, self.low)


def due_entries(db: Any, low: int, until: int, beyond: list[int] | None = None
                ) -> Iterator[IndexEntry]:
    """Index entries of `db` due from `low` up to `until`, earliest first (lazily).

    Read to the end, it appends to `beyond` the due time of the first entry
    after `until`, if there is one (the read has seen it anyway).
    """
    upper = index_bound(until + 1)
    for key, value in db.items(from_key=index_bound(low)):
        if not isinstance(key, bytes) or not key.startswith(INDEX_PREFIX):
            return
        if key >= upper:
            if beyond is not None:
                beyond.append(parse_index(key, value).due_at)
            return
        yield parse_index(key, value)


def armed_in_order(db: Any, start: int) -> Iterator[tuple[int, str]]:
    """(due time, wait key) of every timer of `db` armed from `start` on, by due time then key.

    The index orders the timers due at one instant by kind first; the console
    lists waits by key among equals, so each instant's entries are put in key
    order here (an instant holds few).
    """
    instant: int | None = None
    keys: list[str] = []
    for key, _ in db.items(from_key=index_bound(start)):
        if not isinstance(key, bytes) or not key.startswith(INDEX_PREFIX):
            break
        due = _DUE.unpack_from(key, len(INDEX_PREFIX))[0] - _SIGN
        if due != instant:
            yield from ((instant, k) for k in sorted(keys) if instant is not None)
            instant, keys = due, []
        keys.append(key[len(INDEX_PREFIX) + _DUE.size:].decode())
    if instant is not None:
        yield from ((instant, k) for k in sorted(keys))


__all__ = ["INDEX_PREFIX", "SUMMARY_KEY", "CensusKey", "IndexEntry", "Summary", "armed_in_order",
           "due_entries", "index_bound", "index_changes", "index_key", "parse_index",
           "raw_due", "raw_index_entry"]
