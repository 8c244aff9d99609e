"""The schemas are the user-facing contract: names, optionality and docs are checked here."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streams.codec import Codec, InvalidSchema, RecordType, SchemaNotFound, SchemaSet
from streams.codec.schemas import DEFAULT_SCHEMA_DIR, NAMESPACE

# The contract (docs/concepts/contract.md): add fields, never rename.
CONTRACT: dict[RecordType, list[str]] = {
    RecordType.START_WAIT: [
        "correlationKey",
        "definition",
        "tenant",
        "payload",
        "parties",
        "deadline",
        "requestedAt",
    ],
    RecordType.REPLY: [
        "correlationKey",
        "tenant",
        "channel",
        "responseData",
        "replyId",
        "sentAt",
    ],
    RecordType.COMMAND: [
        "correlationKey",
        "command",
        "reason",
        "reviewOutcome",
        "reviewNote",
        "responseData",
        "operator",
        "deadline",
        "moveBy",
        "version",
        "operationId",
    ],
    RecordType.TIMER: ["correlationKey", "kind", "dueAt", "generation", "firedAt"],
    RecordType.ACTION: [
        "actionId",
        "correlationKey",
        "definition",
        "tenant",
        "action",
        "party",
        "level",
        "attempt",
        "payload",
        "at",
        "sendAttempt",
        "idempotencyKey",
    ],
    RecordType.OUTCOME: [
        "outcomeId",
        "correlationKey",
        "definition",
        "tenant",
        "outcome",
        "reason",
        "responseData",
        "responseValid",
        "validationIssue",
        "reviewOutcome",
        "reviewNote",
        "remindersSent",
        "escalationLevel",
        "parkedAt",
        "endedAt",
        "trace",
        "operator",
        "operatorReason",
        "sendError",
        "definitionVersion",
    ],
    RecordType.REJECTED: [
        "topic",
        "partition",
        "offset",
        "key",
        "reason",
        "detail",
        "original",
        "rejectedAt",
    ],
    RecordType.ACTION_RESULT: [
        "correlationKey",
        "actionId",
        "status",
        "error",
        "permanent",
        "at",
    ],
    RecordType.RECEIPT: [
        "receiptId", "key", "correlationKey", "record", "command", "verdict", "reason",
        "detail", "decidedAt", "heldUntil", "outcome", "outcomeReason", "outcomeId", "party",
        "endedAt", "validationIssue", "actionId", "topic", "partition", "offset",
    ],
}
ENUMS = {
    "CommandKind": ["SUSPEND", "RESUME", "CANCEL", "DELIVER", "REVIEW", "RESCHEDULE",
                    "MIGRATE"],
    "ActionKind": [
        "SEND_REQUEST",
        "SEND_REMINDER",
        "RUN_ESCALATION",
        "REVIEW_NEEDED",
        "CLOSE_OUT",
        "POLL",
    ],
    "OutcomeKind": ["RECEIVED", "ESCALATED", "CANCELLED"],
}

SCHEMAS = SchemaSet.load()


def walk(schema: Any) -> Iterator[dict[str, Any]]:
    """Every named type and field definition in a raw schema."""
    if isinstance(schema, list):
        for branch in schema:
            yield from walk(branch)
    elif isinstance(schema, dict):
        if schema.get("type") in ("record", "enum"):
            yield schema
        for field in schema.get("fields", []):
            yield field
            yield from walk(field["type"])
        if schema.get("type") == "array":
            yield from walk(schema["items"])


@pytest.mark.parametrize("record_type", list(RecordType), ids=str)
def test_fields_are_exactly_the_contract(record_type: RecordType) -> None:
    raw = SCHEMAS.current[record_type].raw
    assert raw["namespace"] == NAMESPACE
    assert [field["name"] for field in raw["fields"]] == CONTRACT[record_type]


@pytest.mark.parametrize("record_type", list(RecordType), ids=str)
def test_every_schema_type_and_field_has_a_doc(record_type: RecordType) -> None:
    for definition in walk(SCHEMAS.current[record_type].raw):
        assert str(definition.get("doc", "")).strip(), f"{definition['name']} has no doc"


@pytest.mark.parametrize("record_type", list(RecordType), ids=str)
def test_optional_fields_are_null_first_with_null_default_and_lists_default_empty(
    record_type: RecordType,
) -> None:
    for field in SCHEMAS.current[record_type].raw["fields"]:
        kind = field["type"]
        if isinstance(kind, list):
            assert kind[0] == "null" and field["default"] is None, field["name"]
        if isinstance(kind, dict) and kind["type"] == "array":
            assert field["default"] == [], field["name"]


def test_times_are_plain_epoch_millisecond_longs() -> None:
    # logicalType timestamp-millis would make fastavro hand out datetimes
    text = "".join(path.read_text() for path in DEFAULT_SCHEMA_DIR.rglob("*.avsc"))
    assert "logicalType" not in text


def test_closed_sets_are_enums_with_an_unknown_default_for_evolution() -> None:
    enums = {
        definition["name"]: definition
        for loaded in SCHEMAS.current.values()
        for definition in walk(loaded.raw)
        if definition.get("type") == "enum"
    }
    assert set(enums) == set(ENUMS)
    for name, symbols in ENUMS.items():
        assert enums[name]["symbols"] == [*symbols, "UNKNOWN"]
        assert enums[name]["default"] == "UNKNOWN"


@pytest.fixture
def schema_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "schemas"
    shutil.copytree(DEFAULT_SCHEMA_DIR, folder)
    return folder


def test_schemas_load_from_an_override_folder(schema_copy: Path) -> None:
    codec = Codec.load(schema_copy)
    assert codec.schemas.directory == schema_copy
    assert codec.schema(RecordType.REPLY).path == schema_copy / "Reply.avsc"


def test_missing_folder_is_refused() -> None:
    with pytest.raises(SchemaNotFound, match="does not exist"):
        SchemaSet.load("/nonexistent/xwait/schemas")


def test_missing_record_type_is_refused_naming_it(schema_copy: Path) -> None:
    (schema_copy / "Timer.avsc").unlink()
    with pytest.raises(SchemaNotFound, match="has no schema for Timer"):
        SchemaSet.load(schema_copy)


def test_unparseable_schema_file_is_refused_naming_the_file(schema_copy: Path) -> None:
    (schema_copy / "Reply.avsc").write_text("{not json")
    with pytest.raises(InvalidSchema, match=r"Reply\.avsc"):
        SchemaSet.load(schema_copy)


def test_invalid_avro_is_refused_naming_the_file(schema_copy: Path) -> None:
    raw = json.loads((schema_copy / "Reply.avsc").read_text())
    raw["fields"][0]["type"] = "strng"
    (schema_copy / "Reply.avsc").write_text(json.dumps(raw))
    with pytest.raises(InvalidSchema, match=r"Reply\.avsc is not a valid Avro schema"):
        SchemaSet.load(schema_copy)


def test_file_named_after_another_record_is_refused(schema_copy: Path) -> None:
    shutil.copy(schema_copy / "Reply.avsc", schema_copy / "history" / "Command.v0.avsc")
    with pytest.raises(InvalidSchema, match="name the file Reply.avsc"):
        SchemaSet.load(schema_copy)


def test_unknown_record_in_the_folder_is_refused(schema_copy: Path) -> None:
    raw = json.loads((schema_copy / "Reply.avsc").read_text())
    raw["name"] = "Answer"
    (schema_copy / "Answer.avsc").write_text(json.dumps(raw))
    with pytest.raises(InvalidSchema, match="'Answer', which is not one of"):
        SchemaSet.load(schema_copy)


def test_copy_of_the_current_schema_in_history_is_harmless(schema_copy: Path) -> None:
    shutil.copy(schema_copy / "Reply.avsc", schema_copy / "history" / "Reply.v2.avsc")
    assert len(SchemaSet.load(schema_copy).history_of(RecordType.REPLY)) == 1
