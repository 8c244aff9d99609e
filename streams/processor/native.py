"""The processor's seam to the native record path (`streams.core.native`).

`RecordHandler` asks `record_path` once for a native core and then hands it
each record and fired timer; the core answers with the very `Handled` the
Python path would build, or None when the Python path must decide (see
`streams.core.native` for when, and how the two are held equal).  The core is
made for the codec in use (its schemas and headers: single-object encoding,
or a Schema Registry's ids) and rebuilt if another codec is configured.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from streams.codec import Codec, RecordType
from streams.codec.codec import CONFLUENT_MAGIC, SINGLE_OBJECT_MAGIC
from streams.core import (
    ArmedTimer,
    EmitOutcome,
    OutcomeKind,
    OutcomeReason,
    TimerKind,
    TraceEntry,
    WaitDefinition,
    WaitStatus,
)
from streams.core import native as native_rules
from streams.processor.model import Handled, OutRecord, Role, RowHead, RowWrite

__all__ = ["record_path", "unavailable"]

# The classes and enums a native `Handled` is made of.
_TYPES = SimpleNamespace(
    Handled=Handled, OutRecord=OutRecord, RowHead=RowHead, ArmedTimer=ArmedTimer,
    EmitOutcome=EmitOutcome, TraceEntry=TraceEntry, RowWrite=RowWrite, Role=Role,
    TimerKind=TimerKind, WaitStatus=WaitStatus, OutcomeKind=OutcomeKind,
    OutcomeReason=OutcomeReason,
)


def codec_tables(codec: Codec) -> dict[str, tuple[str, bytes, list[bytes]]]:
    """Per record type: its current schema (JSON), the header `codec` writes, and the
    headers of its current schema the native path reads (single-object; the registry's id
    of our own schema, when registered)."""
    tables = {}
    for record_type in RecordType:
        loaded = codec.schema(record_type)
        reads = [SINGLE_OBJECT_MAGIC + loaded.fingerprint]
        schema_id = codec.registered.get(record_type)
        if schema_id is not None:
            reads.append(bytes([CONFLUENT_MAGIC]) + schema_id.to_bytes(4, "big"))
        tables[record_type.value] = (json.dumps(loaded.raw), codec.header(record_type), reads)
    return tables


def record_path(definitions: Mapping[str, WaitDefinition], partitions: int, timers_topic: str,
                codec: Codec) -> Any | None:
    """A native core deciding records as `RecordHandler` does, or None when the extension
    is not there (`streams.core.native.unavailable` says why)."""
    module = native_rules.load()
    if module is None:
        return None
    return module.Core(definitions, partitions, timers_topic, native_rules.Helpers, _TYPES,
                       codec_tables(codec))


def unavailable() -> str:
    """Why there is no native core (the extension is not built, or does not load)."""
    return native_rules.unavailable or "the native record path is not available"
