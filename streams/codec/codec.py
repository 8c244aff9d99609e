"""Records to bytes and back: Avro single-object encoding out, Avro or JSON in.

Wire layouts recognised by :meth:`Codec.decode`, by their first bytes::

    C3 01 | fingerprint (8 bytes, LE CRC-64-AVRO) | Avro binary body   single-object encoding
    00    | schema id (4 bytes, big-endian)       | Avro binary body   Confluent, needs a registry
    [whitespace] {                                                     JSON of the record's fields

:meth:`Codec.encode` writes single-object encoding: the header names the
exact schema, so a reader with that schema or a later one (schemas/history)
can read the record, and no registry is needed. A codec built with
:meth:`Codec.with_registry` (what ``XWAIT_SCHEMA_REGISTRY_URL`` selects)
registers the current schemas once and writes the Confluent wire format
instead; it still reads all three layouts.

Per-record cost is kept to one dict look-up by fingerprint plus fastavro's
compiled reader, or an encoder generated per schema (:mod:`streams.codec.avro_writer`,
fastavro's bytes at a third of its cost); schemas are parsed once in :class:`SchemaSet`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from functools import cache
from io import BytesIO
from pathlib import Path
from typing import Any

from fastavro import parse_schema, schemaless_reader, schemaless_writer
from fastavro.validation import ValidationError, validate

from streams.codec.avro_writer import Fallback, Writer, compile_writer
from streams.codec.errors import (
    SchemaNotFound,
    UndecodableReason,
    UndecodableRecord,
    UnencodableRecord,
)
from streams.codec.jsonform import JsonFieldError, compile_json_reader, dumps, loads_object
from streams.codec.registry import SchemaLookup, SchemaRegistry, subject_for
from streams.codec.schemas import JSON_INPUT_TYPES, LoadedSchema, RecordType, SchemaSet

__all__ = [
    "CONFLUENT_HEADER_SIZE",
    "CONFLUENT_MAGIC",
    "SINGLE_OBJECT_HEADER_SIZE",
    "SINGLE_OBJECT_MAGIC",
    "Codec",
    "Record",
    "default_codec",
]

Record = dict[str, Any]
"""A decoded record: field name to value, every field of the reader schema present."""

SINGLE_OBJECT_MAGIC = b"\xc3\x01"
SINGLE_OBJECT_HEADER_SIZE = 10  # magic (2) + CRC-64-AVRO fingerprint (8)
CONFLUENT_MAGIC = 0
CONFLUENT_HEADER_SIZE = 5  # magic (1) + schema id (4, big-endian)

_JSON_WHITESPACE = b" \t\r\n"
_OTHER_JSON_MARK = b'"actionId"'
"""A JSON reply never holds this (it would be an unknown field; inside a string
value the quotes are escaped), so only JSON with it is looked at twice."""
_SHOWN_BYTES = 16  # how much of an unrecognised value the error message shows


class Codec:
    """Encodes and decodes xwait records against one loaded :class:`SchemaSet`.

    Build one per process (:func:`default_codec` does) and share it: it holds
    only immutable look-up tables (and `fallbacks`, a diagnostic count), so it is safe to
    use from any task.
    """

    def __init__(self, schemas: SchemaSet, *, registry: SchemaLookup | None = None,
                 registered: Mapping[RecordType, int] | None = None) -> None:
        """``registered``: the registry's id of each current schema, to write Confluent framing.

        Without it (or for a record type it lacks) :meth:`encode` writes
        single-object encoding; :meth:`with_registry` fills it in.
        """
        self.schemas = schemas
        self.registry = registry
        self._current = dict(schemas.current)
        self._by_fingerprint = dict(schemas.by_fingerprint)
        self._headers = {
            record_type: SINGLE_OBJECT_MAGIC + loaded.fingerprint
            for record_type, loaded in self._current.items()
        }
        self._writers: dict[RecordType, Writer | None] = {
            record_type: compile_writer(loaded.raw)
            for record_type, loaded in self._current.items()
        }
        self.fallbacks: Counter[str] = Counter()  # records the generated encoders passed on
        self._json_readers = {
            record_type: compile_json_reader(loaded.parsed)
            for record_type, loaded in self._current.items()
        }
        # schema id -> (record name, parsed writer schema); ids never change meaning.
        self._registry_schemas: dict[int, tuple[str, Any]] = {}
        for record_type, schema_id in (registered or {}).items():
            self._headers[record_type] = (
                bytes([CONFLUENT_MAGIC]) + schema_id.to_bytes(4, "big"))
            self._registry_schemas[schema_id] = (
                record_type.full_name, self._current[record_type].parsed)
        self.registered: Mapping[RecordType, int] = dict(registered or {})

    @classmethod
    def load(
        cls, directory: Path | str | None = None, *, registry: SchemaLookup | None = None
    ) -> Codec:
        """A codec over the schemas in ``directory`` (default: the packaged ``schemas/``)."""
        return cls(SchemaSet.load(directory), registry=registry)

    @classmethod
    def with_registry(cls, schemas: SchemaSet, registry: SchemaRegistry,
                      topic_prefix: str) -> Codec:
        """Register every current schema under ``<prefix>.<role>-value``; write Confluent framing.

        One HTTP round trip per record type, once per process (at start-up,
        so an unreachable registry fails the start, not a record). Raises
        :class:`streams.codec.RegistryUnavailable`.
        """
        ids = {record_type: registry.register(subject_for(topic_prefix, record_type),
                                              loaded.raw)
               for record_type, loaded in schemas.current.items()}
        return cls(schemas, registry=registry, registered=ids)

    # -- writing ---------------------------------------------------------------

    def encode(self, record_type: RecordType | str, record: Mapping[str, Any]) -> bytes:
        """Avro of ``record`` under the current schema of ``record_type``.

        Single-object encoding, or the Confluent wire format when this codec
        was built :meth:`with_registry` (the header is all that differs).

        Missing fields that have a default take it; a field the schema does not
        know, a missing required field or a wrong type raises
        :class:`UnencodableRecord` naming the field, since only our own code
        encodes and a silent loss would be a bug hidden.
        """
        kind = self._record_type(record_type)
        writer = self._writers[kind]
        if writer is not None:
            try:
                return self._headers[kind] + writer(record)
            except Fallback:
                # fastavro encodes it its way, or says what is wrong with it.  Counted:
                # a record type of our own always falling back is a slow path unseen.
                self.fallbacks[kind.value] += 1
        loaded = self._current[kind]
        buffer = BytesIO()
        buffer.write(self._headers[kind])
        try:
            schemaless_writer(buffer, loaded.parsed, record, strict_allow_default=True)
        except Exception as exc:  # fastavro: TypeError, ValueError, AttributeError, ...
            raise UnencodableRecord(kind.value, _explain_unencodable(loaded, record, exc)) from exc
        return buffer.getvalue()

    def to_json(
        self, record_type: RecordType | str, record: Mapping[str, Any], *, indent: int | None = None
    ) -> str:
        """JSON of a record for people and the CLI; ``bytes`` fields become base64.

        The output is exactly what :meth:`from_json` reads back, so a rejected
        record printed by the CLI can be fixed by hand and replayed.
        """
        self._record_type(record_type)
        try:
            return dumps(record, indent=indent)
        except (TypeError, ValueError) as exc:
            raise UnencodableRecord(str(record_type), f"not representable as JSON: {exc}") from exc

    # -- reading ---------------------------------------------------------------

    def decode(self, record_type: RecordType | str, data: bytes | None) -> Record:
        """Read one Kafka record value as ``record_type``, whatever format it came in.

        Raises :class:`UndecodableRecord` (and nothing else for bad bytes) with a
        machine ``reason`` and a human ``detail``; the caller turns it into a
        ``Rejected`` record. An unknown ``record_type`` is a programming error
        and raises :class:`SchemaNotFound`.
        """
        kind = self._record_type(record_type)
        if not data:
            raise UndecodableRecord(
                kind.value,
                UndecodableReason.EMPTY,
                "the value is empty; expected Avro single-object encoding"
                + (" or a JSON object" if kind in JSON_INPUT_TYPES else ""),
            )
        first = data[0]
        if first == SINGLE_OBJECT_MAGIC[0] and data[1:2] == SINGLE_OBJECT_MAGIC[1:]:
            return self._decode_single_object(kind, data)
        if first == CONFLUENT_MAGIC:
            return self._decode_confluent(kind, data)
        if data.lstrip(_JSON_WHITESPACE)[:1] == b"{":
            return self._decode_json_bytes(kind, data)
        raise UndecodableRecord(
            kind.value,
            UndecodableReason.UNKNOWN_FORMAT,
            f"starts with {_preview(data)}, which is neither Avro single-object encoding "
            f"(C3 01 ...), the Confluent wire format (00 ...) nor a JSON object ({{ ...)",
        )

    def decode_either(self, record_types: tuple[RecordType, ...],
                      data: bytes | None) -> tuple[RecordType, Record]:
        """Read a record of a topic that carries several types: which one it is, and it.

        The bytes say which: the single-object fingerprint, the Confluent
        schema id's record name, or for JSON the type whose required fields
        are all there (``Reply`` and ``ActionResult`` share only
        ``correlationKey``).  Bytes that are none of them are refused as the
        first type would refuse them.
        """
        first = record_types[0]
        if not data:
            return first, self.decode(first, data)
        kind = first
        if data[:2] == SINGLE_OBJECT_MAGIC and len(data) >= SINGLE_OBJECT_HEADER_SIZE:
            writer = self._by_fingerprint.get(data[2:SINGLE_OBJECT_HEADER_SIZE])
            if writer is not None and writer.record_type in record_types:
                kind = writer.record_type
        elif data[0] == CONFLUENT_MAGIC and len(data) >= CONFLUENT_HEADER_SIZE:
            kind = self._confluent_type(record_types, data)
        elif (len(record_types) > 1 and data.lstrip(_JSON_WHITESPACE)[:1] == b"{"
              and _OTHER_JSON_MARK in data):
            kind = self._json_type(record_types, data)
        return kind, self.decode(kind, data)

    def _confluent_type(self, record_types: tuple[RecordType, ...], data: bytes) -> RecordType:
        schema_id = int.from_bytes(data[1:CONFLUENT_HEADER_SIZE], "big")
        cached = self._registry_schemas.get(schema_id)
        name = cached[0] if cached is not None else None
        if name is None and self.registry is not None:
            try:
                name = str(self.registry.writer_schema(schema_id).get("name", ""))
            except SchemaNotFound:
                return record_types[0]  # decode() says so, with the id
        found = [t for t in record_types if name is not None and name.rsplit(".", 1)[-1] == t.value]
        return found[0] if found else record_types[0]

    def _json_type(self, record_types: tuple[RecordType, ...], data: bytes) -> RecordType:
        try:
            value = loads_object(data.decode("utf-8"))
        except (JsonFieldError, ValueError, RecursionError):
            return record_types[0]  # decode() says what is wrong with it
        if not isinstance(value, dict):
            return record_types[0]
        for kind in record_types:
            required = [f["name"] for f in self._current[kind].raw["fields"] if "default" not in f]
            if all(name in value for name in required):
                return kind
        return record_types[0]

    def from_json(self, record_type: RecordType | str, text: str | bytes) -> Record:
        """Check JSON text against the current schema and return the record.

        Accepts every record type (the CLI and tests need that); :meth:`decode`
        is the one that limits JSON to the input types. See
        :mod:`streams.codec.jsonform` for the rules.
        """
        kind = self._record_type(record_type)
        try:
            value = loads_object(text.decode("utf-8") if isinstance(text, bytes) else text)
        except JsonFieldError as exc:
            raise UndecodableRecord(
                kind.value, UndecodableReason.SCHEMA_MISMATCH, str(exc)
            ) from exc
        except UnicodeDecodeError as exc:
            raise UndecodableRecord(
                kind.value, UndecodableReason.NOT_UTF8, f"not valid UTF-8: {exc.reason}"
            ) from exc
        except (ValueError, RecursionError) as exc:
            raise UndecodableRecord(
                kind.value, UndecodableReason.INVALID_JSON, f"not valid JSON: {exc}"
            ) from exc
        if not isinstance(value, dict):
            raise UndecodableRecord(
                kind.value,
                UndecodableReason.INVALID_JSON,
                f"expected a JSON object with the fields of {kind.value}, "
                f"got {type(value).__name__}",
            )
        try:
            return self._json_readers[kind](value)
        except JsonFieldError as exc:
            raise UndecodableRecord(
                kind.value, UndecodableReason.SCHEMA_MISMATCH, str(exc)
            ) from exc

    # -- introspection ---------------------------------------------------------

    def schema(self, record_type: RecordType | str) -> LoadedSchema:
        """The current schema of ``record_type`` (fingerprint, docs, parsed form)."""
        return self._current[self._record_type(record_type)]

    def header(self, record_type: RecordType | str) -> bytes:
        """The header :meth:`encode` writes: single-object (10 bytes) or Confluent (5)."""
        return self._headers[self._record_type(record_type)]

    # -- internals -------------------------------------------------------------

    def _record_type(self, record_type: RecordType | str) -> RecordType:
        if isinstance(record_type, RecordType):
            return record_type
        try:
            return RecordType(record_type)
        except ValueError:
            raise SchemaNotFound(
                f"no record type {record_type!r}; known: {', '.join(t.value for t in RecordType)}"
            ) from None

    # Alike in shape with _decode_confluent (duplicates lists the pair), deliberately: each
    # wire format checks its own header, with its own words for a truncated one.
    def _decode_single_object(self, kind: RecordType, data: bytes) -> Record:
        if len(data) < SINGLE_OBJECT_HEADER_SIZE:
            raise UndecodableRecord(
                kind.value,
                UndecodableReason.TRUNCATED,
                f"only {len(data)} bytes; the single-object header alone is "
                f"{SINGLE_OBJECT_HEADER_SIZE} (C3 01 + 8-byte fingerprint)",
            )
        fingerprint = data[2:SINGLE_OBJECT_HEADER_SIZE]
        writer = self._by_fingerprint.get(fingerprint)
        if writer is None:
            known = [self._current[kind].fingerprint_hex] + [
                s.fingerprint_hex for s in self.schemas.history_of(kind)
            ]
            raise UndecodableRecord(
                kind.value,
                UndecodableReason.UNKNOWN_FINGERPRINT,
                f"unknown schema fingerprint 0x{fingerprint.hex()} (written with a schema this "
                f"build does not know, newer or foreign); known {kind.value} fingerprints: "
                f"{', '.join(known)}",
            )
        if writer.record_type is not kind:
            raise UndecodableRecord(
                kind.value,
                UndecodableReason.WRONG_RECORD_TYPE,
                f"this is a {writer.record_type.value} record (fingerprint "
                f"{writer.fingerprint_hex}), expected {kind.value}",
            )
        reader = None if writer.current else self._current[kind].parsed
        version = "current" if writer.current else f"historic {writer.path.name}"
        return self._read_body(
            kind, data, SINGLE_OBJECT_HEADER_SIZE, writer.parsed, reader, version
        )

    def _decode_confluent(self, kind: RecordType, data: bytes) -> Record:
        if len(data) < CONFLUENT_HEADER_SIZE:
            raise UndecodableRecord(
                kind.value,
                UndecodableReason.TRUNCATED,
                f"starts with the Confluent magic byte 00 but has only {len(data)} bytes; the "
                f"header alone is {CONFLUENT_HEADER_SIZE} (00 + 4-byte schema id)",
            )
        schema_id = int.from_bytes(data[1:CONFLUENT_HEADER_SIZE], "big")
        if self.registry is None:
            raise UndecodableRecord(
                kind.value,
                UndecodableReason.NEEDS_SCHEMA_REGISTRY,
                f"the value is in the Confluent wire format (magic byte 00, schema id "
                f"{schema_id}); reading it needs a Schema Registry URL, and none is configured. "
                f"Configure one, or produce Avro single-object encoding or JSON instead",
            )
        # Ids are immutable, so each writer schema is fetched and parsed once
        # per process; our own registered ids are known without a request.
        # A registry that is down raises RegistryUnavailable: not the record's
        # fault, so it is not turned into an undecodable record.
        cached = self._registry_schemas.get(schema_id)
        if cached is None:
            try:
                raw = self.registry.writer_schema(schema_id)
            except SchemaNotFound as exc:
                raise UndecodableRecord(
                    kind.value,
                    UndecodableReason.UNKNOWN_FINGERPRINT,
                    f"schema id {schema_id} is not in the Schema Registry: {exc}",
                ) from exc
            try:
                cached = (str(raw.get("name", "")), parse_schema(dict(raw), named_schemas={}))
            except Exception as exc:  # fastavro's parse errors are not one family
                raise UndecodableRecord(
                    kind.value,
                    UndecodableReason.MALFORMED_AVRO,
                    f"schema id {schema_id} from the Schema Registry is not a valid Avro "
                    f"schema: {exc}",
                ) from exc
            self._registry_schemas[schema_id] = cached
        name, writer = cached
        if name.rsplit(".", 1)[-1] != kind.value:
            raise UndecodableRecord(
                kind.value,
                UndecodableReason.WRONG_RECORD_TYPE,
                f"schema id {schema_id} is a {name or 'nameless'} schema, expected {kind.value}",
            )
        reader = self._current[kind].parsed
        return self._read_body(
            kind, data, CONFLUENT_HEADER_SIZE, writer, reader, f"registry id {schema_id}"
        )

    def _read_body(
        self, kind: RecordType, data: bytes, start: int, writer: Any, reader: Any, version: str
    ) -> Record:
        buffer = BytesIO(data)
        buffer.seek(start)
        try:
            record = schemaless_reader(buffer, writer, reader)
        except Exception as exc:
            # Corrupt bodies surface from fastavro as EOFError, IndexError,
            # UnicodeDecodeError, ValueError, SchemaResolutionError... Any of
            # them means the same thing here: these bytes are not this record.
            raise UndecodableRecord(
                kind.value,
                UndecodableReason.MALFORMED_AVRO,
                f"Avro body does not match the {version} {kind.value} schema "
                f"({_explain_read_error(exc)})",
            ) from exc
        trailing = len(data) - buffer.tell()
        if trailing:
            raise UndecodableRecord(
                kind.value,
                UndecodableReason.MALFORMED_AVRO,
                f"{trailing} unexpected byte{'s' if trailing > 1 else ''} after the {version} "
                f"{kind.value} record",
            )
        if not isinstance(record, dict):  # pragma: no cover - a record schema yields a dict
            raise UndecodableRecord(
                kind.value, UndecodableReason.MALFORMED_AVRO, "Avro body is not a record"
            )
        return record

    def _decode_json_bytes(self, kind: RecordType, data: bytes) -> Record:
        if kind not in JSON_INPUT_TYPES:
            raise UndecodableRecord(
                kind.value,
                UndecodableReason.JSON_NOT_ACCEPTED,
                f"{kind.value} records are written only by xwait and accepted only as Avro "
                f"single-object encoding; JSON is accepted for "
                f"{', '.join(sorted(t.value for t in JSON_INPUT_TYPES))}",
            )
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UndecodableRecord(
                kind.value,
                UndecodableReason.NOT_UTF8,
                f"looks like JSON but is not valid UTF-8 (byte 0x{data[exc.start]:02x} at "
                f"position {exc.start})",
            ) from exc
        return self.from_json(kind, text)


def _explain_read_error(exc: Exception) -> str:
    if isinstance(exc, EOFError | StopIteration):
        return "the body ends early: truncated or not this record"
    return f"{type(exc).__name__}: {exc}"


def _preview(data: bytes) -> str:
    shown = data[:_SHOWN_BYTES].hex(" ").upper()
    return shown + (" ..." if len(data) > _SHOWN_BYTES else "")


def _explain_unencodable(loaded: LoadedSchema, record: Any, exc: Exception) -> str:
    """A message naming the field, computed only once encoding already failed.

    fastavro's writer errors say little ("int is required"); its validator
    names the field, but running it on every record would double the cost of
    the hot path, so it runs only here.
    """
    if not isinstance(record, Mapping):
        return f"expected a mapping of field names, got {type(record).__name__}"
    fields = [field["name"] for field in loaded.raw["fields"]]
    unknown = [key for key in record if key not in fields]
    if unknown:
        return f"{', '.join(map(str, unknown))}: not a field of {loaded.record_type.value}"
    try:
        validate(dict(record), loaded.parsed, raise_errors=True)
    except ValidationError as invalid:
        prefix = loaded.record_type.full_name + "."
        return "; ".join(_describe(error, prefix) for error in invalid.errors)
    except Exception as other:  # only improving a message here; keep the original error
        return f"{type(exc).__name__}: {exc} (validator: {other})"
    return f"{type(exc).__name__}: {exc}"


def _describe(error: Any, prefix: str) -> str:
    field = str(getattr(error, "field", "") or "?").removeprefix(prefix)
    datum = getattr(error, "datum", None)
    schema = json.dumps(getattr(error, "schema", None))
    got = "null or missing" if datum is None else f"{type(datum).__name__} {datum!r}"
    return f"field {field}: expected {schema}, got {got}"


@cache
def default_codec() -> Codec:
    """The process-wide codec: single-object encoding over the packaged schemas.

    :func:`streams.codec.configure` replaces what the module-level functions
    use with a registry-aware codec; this one stays as it is.
    """
    return Codec.load()
