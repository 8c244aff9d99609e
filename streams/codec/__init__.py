"""xwait's wire formats: Avro single-object encoding out; Avro or JSON in.

The module-level functions use one process-wide :class:`Codec` over the
repository's ``schemas/`` folder (loaded on first use); build a
:class:`Codec` yourself with ``Codec.load(path)`` to use another folder or to
plug in a Schema Registry.

    >>> from streams.codec import RecordType, encode, decode
    >>> data = encode(RecordType.REPLY, {"correlationKey": "k", "channel": "email",
    ...                                  "responseData": "{}"})
    >>> decode(RecordType.REPLY, data)["sentAt"] is None
    True

This package imports fastavro and never faust or a Kafka client, so the CLI
and the SDK can use it without the stream processor.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streams.codec.codec import Codec, Record, default_codec
from streams.codec.errors import (
    CodecError,
    InvalidSchema,
    SchemaNotFound,
    UndecodableReason,
    UndecodableRecord,
    UnencodableRecord,
)
from streams.codec.registry import SchemaRegistry
from streams.codec.schemas import JSON_INPUT_TYPES, LoadedSchema, RecordType, SchemaSet

__all__ = [
    "JSON_INPUT_TYPES",
    "Codec",
    "CodecError",
    "InvalidSchema",
    "LoadedSchema",
    "Record",
    "RecordType",
    "SchemaNotFound",
    "SchemaRegistry",
    "SchemaSet",
    "UndecodableReason",
    "UndecodableRecord",
    "UnencodableRecord",
    "decode",
    "default_codec",
    "encode",
    "from_json",
    "to_json",
]


def encode(record_type: RecordType | str, record: Mapping[str, Any]) -> bytes:
    """Single-object Avro of ``record``; see :meth:`Codec.encode`."""
    return default_codec().encode(record_type, record)


def decode(record_type: RecordType | str, data: bytes | None) -> Record:
    """Avro (single-object) or, for inputs, JSON bytes to a record; see :meth:`Codec.decode`."""
    return default_codec().decode(record_type, data)


def to_json(
    record_type: RecordType | str, record: Mapping[str, Any], *, indent: int | None = None
) -> str:
    """JSON of a record for the CLI, bytes as base64; see :meth:`Codec.to_json`."""
    return default_codec().to_json(record_type, record, indent=indent)


def from_json(record_type: RecordType | str, text: str | bytes) -> Record:
    """Checked JSON text to a record, any record type; see :meth:`Codec.from_json`."""
    return default_codec().from_json(record_type, text)
