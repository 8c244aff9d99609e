"""xwait's wire formats: Avro single-object encoding (or Confluent's) out; Avro or JSON in.

The module-level functions use one process-wide :class:`Codec` over the
packaged schemas (loaded on first use): single-object encoding, until
:func:`configure` is called once at start-up with settings that name a
Schema Registry (``XWAIT_SCHEMA_REGISTRY_URL``); from then on they write the
Confluent wire format and read it by id. The processor, the SDK and the CLI
therefore share one switch and one call. Build a :class:`Codec` yourself
with ``Codec.load(path)`` to use another folder.

    >>> from streams.codec import RecordType, encode, decode
    >>> data = encode(RecordType.REPLY, {"correlationKey": "k", "channel": "email",
    ...                                  "responseData": "{}"})
    >>> decode(RecordType.REPLY, data)["sentAt"] is None
    True

This package imports fastavro and never faust or a Kafka client, so the CLI
and the SDK can use it without the stream processor.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from streams.codec.codec import Codec, Record, default_codec
from streams.codec.errors import (
    CodecError,
    InvalidSchema,
    RegistryUnavailable,
    SchemaNotFound,
    UndecodableReason,
    UndecodableRecord,
    UnencodableRecord,
)
from streams.codec.registry import (
    ConfluentSchemaRegistry,
    SchemaLookup,
    SchemaRegistry,
    subject_for,
)
from streams.codec.schemas import JSON_INPUT_TYPES, LoadedSchema, RecordType, SchemaSet

if TYPE_CHECKING:
    from streams.config import Settings

__all__ = [
    "JSON_INPUT_TYPES",
    "Codec",
    "CodecError",
    "ConfluentSchemaRegistry",
    "InvalidSchema",
    "LoadedSchema",
    "Record",
    "RecordType",
    "RegistryUnavailable",
    "SchemaLookup",
    "SchemaNotFound",
    "SchemaRegistry",
    "SchemaSet",
    "UndecodableReason",
    "UndecodableRecord",
    "UnencodableRecord",
    "active_codec",
    "configure",
    "decode",
    "default_codec",
    "encode",
    "for_settings",
    "from_json",
    "subject_for",
    "to_json",
]

_configured: Codec | None = None
_by_registry: dict[tuple[str, str], Codec] = {}
_lock = threading.Lock()


def for_settings(settings: Settings) -> Codec:
    """The codec ``settings`` ask for: the default one, or one per (registry URL, prefix).

    The registry-aware codec registers our schemas on first use (one request
    per record type) and is then shared by every caller in the process.
    Raises :class:`RegistryUnavailable` when the registry cannot be reached.
    """
    url = settings.schema_registry_url
    if url is None:
        return default_codec()
    key = (url, settings.topic_prefix)
    with _lock:
        found = _by_registry.get(key)
        if found is None:
            found = Codec.with_registry(default_codec().schemas, ConfluentSchemaRegistry(url),
                                        settings.topic_prefix)
            _by_registry[key] = found
    return found


def configure(settings: Settings) -> Codec:
    """Make the module-level functions use the codec ``settings`` ask for; call once at start-up.

    Without ``schema_registry_url`` this changes nothing (single-object
    encoding); with it, :func:`encode` writes the Confluent wire format.
    """
    global _configured
    _configured = for_settings(settings)
    return _configured


def active_codec() -> Codec:
    """What :func:`encode` and :func:`decode` use: the configured codec, else the default."""
    return _configured if _configured is not None else default_codec()


def encode(record_type: RecordType | str, record: Mapping[str, Any]) -> bytes:
    """Avro of ``record`` (single-object, or Confluent once configured); see Codec.encode."""
    return active_codec().encode(record_type, record)


def decode(record_type: RecordType | str, data: bytes | None) -> Record:
    """Avro (single-object) or, for inputs, JSON bytes to a record; see :meth:`Codec.decode`."""
    return active_codec().decode(record_type, data)


def to_json(
    record_type: RecordType | str, record: Mapping[str, Any], *, indent: int | None = None
) -> str:
    """JSON of a record for the CLI, bytes as base64; see :meth:`Codec.to_json`."""
    return active_codec().to_json(record_type, record, indent=indent)


def from_json(record_type: RecordType | str, text: str | bytes) -> Record:
    """Checked JSON text to a record, any record type; see :meth:`Codec.from_json`."""
    return active_codec().from_json(record_type, text)
