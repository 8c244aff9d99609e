"""What a partition's database (and its changelog) stores per wait key: the slot,
plus what makes replays safe.

    wait key (utf-8) -> Row = head | slot bytes | seen offsets | outbox

A worker that dies reads its inputs again from the positions stored with its
state (`streams.processor.positions`); a record the stored row already
reflects must not be decided again (re-deciding on the changed state would
answer "late" or "duplicate").  So a row remembers, per input topic, the
offset of the last input that changed it (`seen`): an input at or below it is
a replay, and is not decided again.  Its outputs are durable already: the
commit protocol (`streams.processor.commit`) writes a row only after every
record its batch produced was acknowledged.

The `outbox` kept the records each input produced until its offset was
committed, for the faust-table design of 0.1.0, whose commit could lose them;
this release writes it empty and still sends again what a 0.1.0 row holds.
Reading it, like reading version 1 rows, is to be removed in 0.4.0
(CHANGELOG.md).

A row starts with a head (`RowHead`: the wait's state, definition, tenant
and armed timers) that is read without decoding the slot.  A restore builds
the partition's timer index and wait census from every row it reads
(`raw_facts`), and the console lists waits by their heads; decoding each
slot costs about 40 us, 40 s at a million waits, while the head takes about
4 us.

Binary layout (all integers big-endian):
    b"XR" version:u8 (2; version 1 rows have no head and are still read)
    head: state:u8 (0 = no wait, else 1 + WaitStatus index) timers:u8 parked_at:i64
          definition:str32 tenant:str32
          (definition: the name, or NAME US VERSION - US the unit separator 0x1F, which
          no name holds - for a wait that records its definition's version, rule 13;
          older rows hold the name alone and read as version None)
          timers x (kind:u8 due_at:i64 generation:i64)
    slot_len:u32 slot
    seen: 4 x i64 (requests, replies, commands, timers; -1 = none)
    entries:u16, each: role:u8 partition:u16 offset:i64 records:u16,
        each record: role:u8 partition:i16 (-1 = partitioner) key_len:u32 key
                     value_len:u32 value
    str32: len:u32 (0xFFFFFFFF = none) utf-8 bytes
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from streams.core import ArmedTimer, TimerKind, WaitStatus, decode_slot
from streams.processor.model import INPUT_ROLES, NO_WAIT, OutRecord, Role, RowHead, head_of

MAGIC = b"XR\x02"
MAGIC_V1 = b"XR\x01"
_ROLES = list(Role)
_INDEX = {role: i for i, role in enumerate(_ROLES)}
_STATES = list(WaitStatus)
_STATE_INDEX = {state: i + 1 for i, state in enumerate(_STATES)}
_KINDS = list(TimerKind)
_KIND_INDEX = {kind: i for i, kind in enumerate(_KINDS)}
_SEEN = struct.Struct(">4q")
_ENTRY = struct.Struct(">BHqH")
_RECORD_HEAD = struct.Struct(">Bh")
_U32 = struct.Struct(">I")
_HEAD = struct.Struct(">BBq")
_TIMER = struct.Struct(">Bqq")
_NONE32 = 0xFFFFFFFF


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
    head: RowHead = NO_WAIT

    def is_replay(self, role: Role, offset: int) -> bool:
        return offset <= self.seen.get(role, -1)

    def replayed(self, role: Role, offset: int) -> tuple[OutRecord, ...]:
        for entry in self.outbox:
            if entry.role is role and entry.offset == offset:
                return entry.records
        return ()


def _str32(text: str | None) -> list[bytes]:
    if text is None:
        return [_U32.pack(_NONE32)]
    data = text.encode()
    return [_U32.pack(len(data)), data]


def _read_str32(data: bytes, pos: int) -> tuple[str | None, int]:
    (n,) = _U32.unpack_from(data, pos)
    if n == _NONE32:
        return None, pos + 4
    if pos + 4 + n > len(data):
        raise RowDecodeError(f"Expected {n} bytes of text at byte {pos + 4}, but the row ends")
    return data[pos + 4:pos + 4 + n].decode(), pos + 4 + n


VERSION_SEPARATOR = "\x1f"


def _encode_head(head: RowHead) -> list[bytes]:
    definition = head.definition if head.version is None or head.definition is None else (
        f"{head.definition}{VERSION_SEPARATOR}{head.version}")
    parts = [_HEAD.pack(0 if head.state is None else _STATE_INDEX[head.state],
                        len(head.timers), head.parked_at),
             *_str32(definition), *_str32(head.tenant)]
    parts += [_TIMER.pack(_KIND_INDEX[t.kind], t.due_at, t.generation) for t in head.timers]
    return parts


def _decode_head(data: bytes, pos: int) -> tuple[RowHead, int]:
    state_i, count, parked_at = _HEAD.unpack_from(data, pos)
    definition, pos = _read_str32(data, pos + _HEAD.size)
    tenant, pos = _read_str32(data, pos)
    timers = []
    for _ in range(count):
        kind_i, due_at, generation = _TIMER.unpack_from(data, pos)
        pos += _TIMER.size
        timers.append(ArmedTimer(_KINDS[kind_i], due_at, generation))
    state = None if state_i == 0 else _STATES[state_i - 1]
    version = None
    if definition is not None and VERSION_SEPARATOR in definition:
        definition, _, version = definition.partition(VERSION_SEPARATOR)
    return RowHead(state, definition, tenant, tuple(timers), parked_at, version), pos


def read_head(data: bytes) -> RowHead:
    """The head of a stored row, without decoding its slot (a version 1 row: from its slot)."""
    if data.startswith(MAGIC):
        try:
            return _decode_head(data, len(MAGIC))[0]
        except (struct.error, IndexError, UnicodeDecodeError) as exc:
            raise RowDecodeError(f"Expected a complete row head, but it is cut ({exc})") from exc
    return decode_row(data).head


RawFacts = tuple[int, bytes, tuple[bytes, ...]]
NO_FACTS: RawFacts = (0, b"", ())


def raw_facts(data: bytes | None) -> RawFacts:
    """What a restore needs of a row, read without building objects: its state (0: no
    wait, else 1 + WaitStatus index), its definition's utf-8 bytes, and its timers as the
    17-byte records of the head (kind:u8 due_at:i64 generation:i64), which give the timer
    index's keys and values directly (`streams.timers.stored.raw_index_entry`).

    A restore reads every changelog record this way (about twice as fast as `read_head`);
    a row of version 1, or one it cannot read, goes through `read_head` (no wait).
    """
    if data is None:
        return NO_FACTS
    if data.startswith(MAGIC):
        try:
            state_i, count = data[3], data[4]
            (n,) = _U32.unpack_from(data, 13)
            pos = 17
            definition = b""
            if n != _NONE32:
                definition = data[17:17 + n]
                pos += n
            (n,) = _U32.unpack_from(data, pos)
            pos += 4 if n == _NONE32 else 4 + n
            end = pos + count * _TIMER.size
            if end <= len(data):
                size = _TIMER.size
                return state_i, definition, tuple(data[at:at + size]
                                                  for at in range(pos, end, size))
        except (struct.error, IndexError):
            pass
    try:
        head = read_head(data)
    except RowDecodeError:
        return NO_FACTS
    return (0 if head.state is None else _STATE_INDEX[head.state],
            (head.definition or "").encode(),
            tuple(_TIMER.pack(_KIND_INDEX[t.kind], t.due_at, t.generation)
                  for t in head.timers))


def encode_row(row: Row) -> bytes:
    slot = row.slot or b""
    parts = [MAGIC, *_encode_head(row.head), _U32.pack(len(slot)), slot,
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
    head: RowHead | None = None
    try:
        if data.startswith(MAGIC):
            head, pos = _decode_head(data, len(MAGIC))
        elif data.startswith(MAGIC_V1):
            pos = len(MAGIC_V1)
        else:
            raise RowDecodeError("Expected a waits-table row starting with b'XR\\x02' (or "
                                 f"b'XR\\x01'), but it starts with {data[:3]!r}")
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
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise RowDecodeError(f"Expected a complete waits-table row, but it is cut ({exc})"
                             ) from exc
    if pos != len(data):
        raise RowDecodeError(f"Expected the row to end at byte {pos}, but it has {len(data)}")
    if head is None:  # a version 1 row: derive the head from the slot
        try:
            head = head_of(decode_slot(slot) if slot is not None else None)
        except ValueError as exc:
            raise RowDecodeError(f"Expected a readable slot in a version 1 row ({exc})") from exc
    return Row(slot, seen, tuple(outbox), head)
