"""How far a partition's inputs have been applied, stored with the state they produced.

    partition p's database: POSITIONS_KEY -> Positions (next offset per input topic,
                                              stream time)

The record lives in its partition's database (`streams.processor.state`),
next to the rows, so it is written in the same RocksDB write batch as the
rows of the records it covers and travels in the same changelog partition
after them (the producer keeps a partition's order).  Whoever restores the partition - the same
worker after a crash, another worker after a failover, a standby taking over
- gets rows and positions that agree, and starts each input partition
exactly where the state it restored leaves off, whatever offsets the
consumer group has committed.

The key starts with a NUL byte: no wait key does (the processor refuses keys
with NUL, `ProcessorReject.INVALID_KEY`), so it can never collide with one.

Binary layout (big-endian): b"XP" version:u8 (1) next_offset x 4:i64 (requests,
replies, commands, timers; -1 = nothing applied yet) stream_time:i64
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from streams.processor.model import INPUT_ROLES, Role

POSITIONS_KEY = b"\x00xwait.positions"
_MAGIC = b"XP\x01"
_BODY = struct.Struct(">4qq")


class PositionsDecodeError(ValueError):
    """Bytes under POSITIONS_KEY that are not a positions record of this format."""


@dataclass(frozen=True)
class Positions:
    """The next offset to apply per input topic of one partition, and its stream time.

    `stream_time` is the partition's stream time when these positions were
    stored (see `streams.processor.sequencer`): timers due by then may fire
    at once after a restart, before the worker has caught up again.
    """

    next_offset: dict[Role, int] = field(default_factory=dict)
    stream_time: int = 0

    def get(self, role: Role) -> int | None:
        return self.next_offset.get(role)


def encode_positions(p: Positions) -> bytes:
    return _MAGIC + _BODY.pack(*(p.next_offset.get(r, -1) for r in INPUT_ROLES), p.stream_time)


def decode_positions(data: bytes) -> Positions:
    if not data.startswith(_MAGIC) or len(data) != len(_MAGIC) + _BODY.size:
        raise PositionsDecodeError(
            f"Expected a positions record of {len(_MAGIC) + _BODY.size} bytes starting with "
            f"{_MAGIC!r}, but got {len(data)} bytes starting with {data[:3]!r}")
    *offsets, stream_time = _BODY.unpack_from(data, len(_MAGIC))
    return Positions({r: o for r, o in zip(INPUT_ROLES, offsets, strict=True) if o >= 0},
                     stream_time)


__all__ = ["POSITIONS_KEY", "Positions", "PositionsDecodeError", "decode_positions",
           "encode_positions"]
