"""The Avro schemas in ``schemas/``, parsed and fingerprinted once at start-up.

Decoding runs per Kafka record at tens of thousands per second, so nothing
here is parsed per call: a :class:`SchemaSet` holds every schema already
parsed by fastavro and indexed by its 8-byte CRC-64-AVRO fingerprint, which is
exactly what the single-object header carries.

Layout of the folder (the default is ``streams/schemas``, package data that
the wheel ships and ``importlib.resources`` finds; the checkout's
``schemas/`` is a link to it)::

    schemas/<RecordType>.avsc                the current version, used to write and as reader
    schemas/history/<RecordType>.<tag>.avsc  earlier versions, kept only so old records stay
                                             readable (resolved to the current version)

Evolving a schema: copy the current file to ``history/<RecordType>.v<N>.avsc``
first, then change the current one by *adding* fields with defaults. The
fingerprint-pinning test fails until both steps are done.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import Any

import fastavro
from fastavro.schema import fingerprint as _fastavro_fingerprint
from fastavro.schema import to_parsing_canonical_form

from streams.codec.errors import InvalidSchema, SchemaNotFound

__all__ = [
    "DEFAULT_SCHEMA_DIR",
    "HISTORY_DIR_NAME",
    "JSON_INPUT_TYPES",
    "NAMESPACE",
    "LoadedSchema",
    "RecordType",
    "SchemaSet",
    "fingerprint_of",
]

NAMESPACE = "dev.xwait"
"""Namespace of every xwait record; part of the fingerprint, so never change it."""

DEFAULT_SCHEMA_DIR = Path(str(resources.files("streams") / "schemas"))
"""The schemas shipped inside the ``streams`` package (the checkout's ``schemas/`` links here).

A wheel installs unpacked, so this resource is a real folder."""

HISTORY_DIR_NAME = "history"

_FINGERPRINT_ALGORITHM = "CRC-64-AVRO"
"""The Rabin fingerprint the Avro spec prescribes for single-object encoding."""


class RecordType(StrEnum):
    """Every record xwait reads or writes; the value is the Avro record name."""

    START_WAIT = "StartWait"
    REPLY = "Reply"
    COMMAND = "Command"
    TIMER = "Timer"
    ACTION = "Action"
    OUTCOME = "Outcome"
    REJECTED = "Rejected"
    ACTION_RESULT = "ActionResult"
    RECEIPT = "Receipt"

    @property
    def full_name(self) -> str:
        return f"{NAMESPACE}.{self.value}"


JSON_INPUT_TYPES: frozenset[RecordType] = frozenset(
    {RecordType.START_WAIT, RecordType.REPLY, RecordType.COMMAND, RecordType.ACTION_RESULT}
)
"""Records that users produce, so any producer in any language may send JSON.

Everything else is written only by xwait itself (timers by older workers,
outputs by the processor) and is accepted only as Avro: a JSON record on the
timers topic is somebody else's mistake, not a format to honour.
"""


def fingerprint_of(schema: dict[str, Any] | str) -> bytes:
    """CRC-64-AVRO of the Parsing Canonical Form, in header byte order.

    fastavro returns the Rabin fingerprint as hex of the little-endian bytes
    (as Java's ``SchemaNormalization`` writes them), which is the order the
    single-object header uses, so ``bytes.fromhex`` gives the header bytes.
    """
    canonical = to_parsing_canonical_form(schema)
    return bytes.fromhex(_fastavro_fingerprint(canonical, _FINGERPRINT_ALGORITHM))


@dataclass(frozen=True, slots=True)
class LoadedSchema:
    """One schema version, ready for the hot path."""

    record_type: RecordType
    path: Path
    raw: Mapping[str, Any]
    """The schema as written in the file (with its docs), for tooling."""
    parsed: Any
    """fastavro's parsed form; handing this to fastavro skips re-parsing."""
    canonical_form: str
    fingerprint: bytes
    """8 bytes, in the order they appear in the single-object header."""
    current: bool
    """True for ``schemas/<T>.avsc``; False for a version kept in ``history/``."""

    @property
    def fingerprint_hex(self) -> str:
        return "0x" + self.fingerprint.hex()


@dataclass(frozen=True, slots=True)
class SchemaSet:
    """Every known schema: the current one per record type, and all by fingerprint."""

    directory: Path
    current: Mapping[RecordType, LoadedSchema]
    by_fingerprint: Mapping[bytes, LoadedSchema]

    @classmethod
    def load(cls, directory: Path | str | None = None) -> SchemaSet:
        """Read, parse and fingerprint the folder, refusing anything inconsistent.

        Refusing at start-up (a missing record type, a file whose record name
        does not match its file name, two schemas with one fingerprint) is far
        cheaper than discovering it as undecodable records in production.
        """
        folder = Path(directory) if directory is not None else DEFAULT_SCHEMA_DIR
        if not folder.is_dir():
            raise SchemaNotFound(f"schema folder {folder} does not exist")

        current: dict[RecordType, LoadedSchema] = {}
        for path in sorted(folder.glob("*.avsc")):
            loaded = _load_file(path, current=True)
            current[loaded.record_type] = loaded
        missing = [t.value for t in RecordType if t not in current]
        if missing:
            raise SchemaNotFound(
                f"schema folder {folder} has no schema for {', '.join(missing)}; "
                f"expected one file <RecordType>.avsc for each of "
                f"{', '.join(t.value for t in RecordType)}"
            )

        by_fingerprint: dict[bytes, LoadedSchema] = {}
        for loaded in current.values():
            _index(by_fingerprint, loaded)
        history = folder / HISTORY_DIR_NAME
        if history.is_dir():
            for path in sorted(history.glob("*.avsc")):
                old = _load_file(path, current=False)
                if current[old.record_type].fingerprint == old.fingerprint:
                    continue  # a copy of the current version: nothing to resolve
                _index(by_fingerprint, old)
        return cls(directory=folder, current=current, by_fingerprint=by_fingerprint)

    def history_of(self, record_type: RecordType) -> list[LoadedSchema]:
        """The older versions of one record type that can still be read."""
        return [
            s
            for s in self.by_fingerprint.values()
            if s.record_type is record_type and not s.current
        ]


def _index(by_fingerprint: dict[bytes, LoadedSchema], loaded: LoadedSchema) -> None:
    clash = by_fingerprint.get(loaded.fingerprint)
    if clash is not None:
        raise InvalidSchema(
            f"{loaded.path} and {clash.path} have the same fingerprint "
            f"{loaded.fingerprint_hex}; keep only one of them"
        )
    by_fingerprint[loaded.fingerprint] = loaded


def _load_file(path: Path, *, current: bool) -> LoadedSchema:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidSchema(f"cannot read schema {path}: {exc}") from exc
    if not isinstance(raw, dict) or raw.get("type") != "record":
        raise InvalidSchema(f"schema {path} must be a JSON object declaring an Avro record")

    name = raw.get("name")
    namespace = raw.get("namespace", NAMESPACE)
    if not isinstance(name, str) or namespace != NAMESPACE:
        raise InvalidSchema(
            f"schema {path} must declare a record name and namespace {NAMESPACE!r}, "
            f"got name={name!r} namespace={namespace!r}"
        )
    try:
        record_type = RecordType(name)
    except ValueError:
        raise InvalidSchema(
            f"schema {path} declares record {name!r}, which is not one of "
            f"{', '.join(t.value for t in RecordType)}"
        ) from None
    stem = path.name.split(".", 1)[0]
    if stem != name:
        raise InvalidSchema(
            f"schema {path} declares record {name!r}; name the file {name}.avsc "
            f"(or {name}.<version>.avsc under {HISTORY_DIR_NAME}/)"
        )

    try:
        # A fresh named-types dict per file: the current and the historic
        # versions of one record share a name and must not see each other.
        parsed = fastavro.parse_schema(raw, named_schemas={})
        canonical = to_parsing_canonical_form(raw)
    except Exception as exc:  # fastavro raises SchemaParseException, UnknownType, ValueError...
        raise InvalidSchema(f"schema {path} is not a valid Avro schema: {exc}") from exc
    return LoadedSchema(
        record_type=record_type,
        path=path,
        raw=raw,
        parsed=parsed,
        canonical_form=canonical,
        fingerprint=bytes.fromhex(_fastavro_fingerprint(canonical, _FINGERPRINT_ALGORITHM)),
        current=current,
    )
