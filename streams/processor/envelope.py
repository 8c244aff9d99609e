"""What the waits table stores per key: the slot, plus what makes replays safe.

    waits: wait key (utf-8) -> Row = slot bytes | seen offsets | outbox

A worker that dies re-reads every input after its last committed offset.
The state those inputs changed may already be stored (RocksDB is written at
once and its changelog record may have reached Kafka) while the records they
produced were lost with the producer's buffer - re-deciding on the changed
state would then answer "late" or "duplicate" and the outcome would never be
sent.  So a row remembers, per input topic, the offset of the last input that
changed it (`seen`), and keeps the records each uncommitted input produced
(`outbox`).  An input at or below `seen` is a replay: its outbox entry is
sent again instead of deciding again.  Entries of inputs whose offsets are
committed are dropped at the next write of the row (faust flushes the
producer before it commits, so they were delivered).

Binary layout (all integers big-endian):
    b"XR" version:u8
    slot_len:u32 slot
    seen: 4 x i64 (requests, replies, commands, timers; -1 = none)
    entries:u16, each: role:u8 partition:u16 offset:i64 records:u16,
        each record: role:u8 partition:i16 (-1 = partitioner) key_len:u32 key
                     value_len:u32 value
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from streams.processor.model import INPUT_ROLES, OutRecord, Role

MAGIC = b"XR\x01"
_ROLES = list(Role)
_INDEX = {role: i for i, role in enumerate(_ROLES)}
_SEEN = struct.Struct(">4q")
_ENTRY = struct.Struct(">BHqH")
_RECORD_HEAD = struct.Struct(">Bh")
_U32 = struct.Struct(">I")


class RowDecodeError(ValueError):
    """Bytes in the waits table that are not a row of this format."""


@dataclass(frozen=True)
class OutboxEntry:
    role: Role  # input topic of the record that produced `records`
    partition: int
    offset: int
    records: tuple[OutRecord, ...]


@dataclass(frozen=True)
class Row:
    slot: bytes | None
    seen: dict[Role, int] = field(default_factory=dict)
    outbox: tuple[OutboxEntry, ...] = ()

    def is_replay(self, role: Role, offset: int) -> bool:
        return offset <= self.seen.get(role, -1)

    def replayed(self, role: Role, offset: int) -> tuple[OutRecord, ...]:
        for entry in self.outbox:
            if entry.role is role and entry.offset == offset:
                return entry.records
        return ()


def encode_row(row: Row) -> bytes:
    slot = row.slot or b""
    parts = [MAGIC, _U32.pack(len(slot)), slot,
             _SEEN.pack(*(row.seen.get(r, -1) for r in INPUT_ROLES)),
             struct.pack(">H", len(row.outbox))]
    for entry in row.outbox:
        parts.append(_ENTRY.pack(_INDEX[entry.role], entry.partition, entry.offset,
                                 len(entry.records)))
        for rec in entry.records:
            parts.append(_RECORD_HEAD.pack(_INDEX[rec.role],
                                           -1 if rec.partition is None else rec.partition))
            parts += [_U32.pack(len(rec.key)), rec.key, _U32.pack(len(rec.value)), rec.value]
    return b"".join(parts)


def decode_row(data: bytes) -> Row:
    if not data.startswith(MAGIC):
        raise RowDecodeError("Expected a waits-table row starting with b'XR\\x01', but it "
                             f"starts with {data[:3]!r}")
    try:
        pos = len(MAGIC)
        (slot_len,) = _U32.unpack_from(data, pos)
        pos += 4
        slot = data[pos:pos + slot_len] or None
        pos += slot_len
        seen_values = _SEEN.unpack_from(data, pos)
        pos += _SEEN.size
        seen = {role: v for role, v in zip(INPUT_ROLES, seen_values, strict=True) if v >= 0}
        (entries,) = struct.unpack_from(">H", data, pos)
        pos += 2
        outbox = []
        for _ in range(entries):
            role_i, partition, offset, count = _ENTRY.unpack_from(data, pos)
            pos += _ENTRY.size
            records = []
            for _ in range(count):
                out_role_i, out_partition = _RECORD_HEAD.unpack_from(data, pos)
                pos += _RECORD_HEAD.size
                (key_len,) = _U32.unpack_from(data, pos)
                key = data[pos + 4:pos + 4 + key_len]
                pos += 4 + key_len
                (value_len,) = _U32.unpack_from(data, pos)
                value = data[pos + 4:pos + 4 + value_len]
                pos += 4 + value_len
                records.append(OutRecord(_ROLES[out_role_i], key, value,
                                         None if out_partition < 0 else out_partition))
            outbox.append(OutboxEntry(_ROLES[role_i], partition, offset, tuple(records)))
    except (struct.error, IndexError) as exc:
        raise RowDecodeError(f"Expected a complete waits-table row, but it is cut ({exc})"
                             ) from exc
    if pos != len(data):
        raise RowDecodeError(f"Expected the row to end at byte {pos}, but it has {len(data)}")
    return Row(slot, seen, tuple(outbox))
