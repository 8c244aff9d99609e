"""Every record type survives encode → decode, and the header names its schema.

Records are generated from the schemas themselves (hypothesis), so a field
added to a schema is covered without touching this file.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import avro.schema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.codec import Codec, RecordType, UndecodableRecord, default_codec
from streams.codec.codec import SINGLE_OBJECT_HEADER_SIZE, SINGLE_OBJECT_MAGIC
from streams.codec.schemas import JSON_INPUT_TYPES

CODEC = default_codec()
NOW = 1_767_225_600_000


def strategy_for(schema: Any) -> st.SearchStrategy[Any]:
    """Values valid for a fastavro-parsed schema (no named-type references needed here)."""
    if isinstance(schema, list):
        return st.one_of(*[strategy_for(branch) for branch in schema])
    kind = schema if isinstance(schema, str) else schema["type"]
    simple: dict[str, st.SearchStrategy[Any]] = {
        "null": st.none(),
        "boolean": st.booleans(),
        "int": st.integers(-(2**31), 2**31 - 1),
        "long": st.integers(-(2**63), 2**63 - 1),
        "string": st.text(max_size=30),
        "bytes": st.binary(max_size=30),
    }
    if kind in simple:
        return simple[kind]
    if kind == "record":
        return st.fixed_dictionaries(
            {field["name"]: strategy_for(field["type"]) for field in schema["fields"]}
        )
    if kind == "enum":
        return st.sampled_from(schema["symbols"])
    if kind == "array":
        return st.lists(strategy_for(schema["items"]), max_size=4)
    raise AssertionError(f"no strategy for {schema!r}")


def records_of(record_type: RecordType, codec: Codec = CODEC) -> st.SearchStrategy[Any]:
    return strategy_for(codec.schema(record_type).parsed)


any_record = st.sampled_from(list(RecordType)).flatmap(
    lambda record_type: st.tuples(st.just(record_type), records_of(record_type))
)

SAMPLES: dict[RecordType, dict[str, Any]] = {
    RecordType.START_WAIT: {
        "correlationKey": "9b1e4c0d2f7a4e3b8c6d5a4f3e2d1c0b",
        "definition": "invoice-approval",
        "tenant": "acme",
        "payload": json.dumps({"invoice": "INV-7"}),
        "parties": ["manager", "finance"],
        "deadline": "P3D",
        "requestedAt": NOW,
    },
    RecordType.REPLY: {
        "correlationKey": "9b1e4c0d2f7a4e3b8c6d5a4f3e2d1c0b~finance",
        "tenant": "acme",
        "channel": "webhook",
        "responseData": json.dumps({"approved": True}),
        "replyId": "r-1",
        "sentAt": NOW + 1000,
    },
    RecordType.COMMAND: {
        "correlationKey": "9b1e4c0d2f7a4e3b8c6d5a4f3e2d1c0b",
        "command": "REVIEW",
        "reason": None,
        "reviewOutcome": "Submit Correction",
        "reviewNote": "amount was in cents",
        "responseData": json.dumps({"amount": 12.5}),
        "operator": "jane",
        "deadline": None,
        "moveBy": None,
        "version": None,
        "operationId": "op-7",
    },
    RecordType.TIMER: {
        "correlationKey": "9b1e4c0d2f7a4e3b8c6d5a4f3e2d1c0b",
        "kind": "reminder",
        "dueAt": NOW + 3_600_000,
        "generation": 3,
        "firedAt": NOW + 3_600_250,
    },
    RecordType.ACTION: {
        "actionId": "a-1",
        "correlationKey": "9b1e4c0d2f7a4e3b8c6d5a4f3e2d1c0b",
        "definition": "invoice-approval",
        "tenant": None,
        "action": "SEND_REMINDER",
        "party": "finance",
        "level": 0,
        "attempt": 2,
        "payload": json.dumps({"invoice": "INV-7"}),
        "at": NOW + 3_600_000,
        "sendAttempt": 2,
        "idempotencyKey": "a-0",
    },
    RecordType.OUTCOME: {
        "outcomeId": "o-1",
        "correlationKey": "9b1e4c0d2f7a4e3b8c6d5a4f3e2d1c0b",
        "definition": "invoice-approval",
        "tenant": "acme",
        "outcome": "ESCALATED",
        "reason": "escalation_exhausted",
        "responseData": None,
        "responseValid": None,
        "validationIssue": None,
        "reviewOutcome": None,
        "reviewNote": None,
        "remindersSent": 3,
        "escalationLevel": 2,
        "parkedAt": NOW,
        "endedAt": NOW + 86_400_000,
        "trace": [
            {"at": NOW, "event": "parked", "detail": ""},
            {"at": NOW + 86_400_000, "event": "escalated", "detail": "level 2 deadline passed"},
        ],
        "operator": None,
        "operatorReason": None,
        "sendError": "SEND_REQUEST: 550 mailbox unavailable",
        "definitionVersion": "4eff47727d45",
    },
    RecordType.ACTION_RESULT: {
        "correlationKey": "9b1e4c0d2f7a4e3b8c6d5a4f3e2d1c0b~finance",
        "actionId": "0d2c5f3e-9a1b-5c4d-8e7f-6a5b4c3d2e1f",
        "status": "failed",
        "error": "503 Service Unavailable",
        "permanent": False,
        "at": NOW + 2000,
    },
    RecordType.REJECTED: {
        "topic": "xwait.replies",
        "partition": 7,
        "offset": 123456789012,
        "key": b"9b1e\x00\xff",
        "reason": "undecodable",
        "detail": "unknown schema fingerprint 0x0000000000000000",
        "original": b"\xc3\x01\x00\x00",
        "rejectedAt": NOW,
    },
    RecordType.RECEIPT: {
        "receiptId": "4c1f0e2a9b3d4e5f8a6b7c8d9e0f1a2b",
        "key": "9b1e4c0d2f7a4e3b8c6d5a4f3e2d1c0b",
        "correlationKey": "9b1e4c0d2f7a4e3b8c6d5a4f3e2d1c0b~finance",
        "record": "Reply",
        "command": None,
        "verdict": "won",
        "reason": None,
        "detail": None,
        "decidedAt": NOW + 1000,
        "heldUntil": None,
        "outcome": "RECEIVED",
        "outcomeReason": "reply_valid",
        "outcomeId": "o-1",
        "party": "finance",
        "endedAt": NOW + 1000,
        "validationIssue": None,
        "actionId": None,
        "topic": "xwait.replies",
        "partition": 3,
        "offset": 42,
    },
}


def test_samples_cover_every_record_type() -> None:
    assert set(SAMPLES) == set(RecordType)


@pytest.mark.parametrize("record_type", list(RecordType), ids=str)
def test_sample_record_decodes_to_what_was_encoded(record_type: RecordType) -> None:
    # given a realistic record
    record = SAMPLES[record_type]
    # when it is encoded and decoded again
    data = CODEC.encode(record_type, record)
    # then it is unchanged
    assert CODEC.decode(record_type, data) == record


@pytest.mark.parametrize("record_type", list(RecordType), ids=str)
def test_header_is_magic_and_fingerprint_of_the_current_schema(record_type: RecordType) -> None:
    # given the schema file, fingerprinted by an independent implementation (Apache avro)
    path = CODEC.schema(record_type).path
    expected = avro.schema.parse(path.read_text()).fingerprint("CRC-64-AVRO")
    # when a record is encoded
    data = CODEC.encode(record_type, SAMPLES[record_type])
    # then the header is C3 01 + that fingerprint
    assert data[:2] == SINGLE_OBJECT_MAGIC
    assert data[2:SINGLE_OBJECT_HEADER_SIZE] == bytes(expected)
    assert CODEC.header(record_type) == data[:SINGLE_OBJECT_HEADER_SIZE]


@pytest.mark.parametrize(("there", "back"), [
    (CODEC.encode, CODEC.decode),
    (CODEC.to_json, CODEC.from_json),
], ids=["single_object_encoding", "to_json_and_from_json"])
@settings(max_examples=300)
@given(typed=any_record)
def test_any_valid_record_round_trips_through(
    there: Callable[[RecordType, dict[str, Any]], Any],
    back: Callable[[RecordType, Any], dict[str, Any]],
    typed: tuple[RecordType, dict[str, Any]],
) -> None:
    record_type, record = typed
    assert back(record_type, there(record_type, record)) == record


@settings(max_examples=200)
@given(
    st.sampled_from(sorted(JSON_INPUT_TYPES)).flatmap(
        lambda record_type: st.tuples(st.just(record_type), records_of(record_type))
    )
)
def test_input_record_decodes_the_same_from_json_and_from_avro(
    typed: tuple[RecordType, dict[str, Any]],
) -> None:
    record_type, record = typed
    as_json = CODEC.to_json(record_type, record).encode()
    as_avro = CODEC.encode(record_type, record)
    assert CODEC.decode(record_type, as_json) == CODEC.decode(record_type, as_avro) == record


def test_rejected_bytes_are_printed_as_base64_and_read_back() -> None:
    # given a rejected record whose key and original value are not text
    record = SAMPLES[RecordType.REJECTED]
    # when it is printed for the CLI
    printed = json.loads(CODEC.to_json(RecordType.REJECTED, record, indent=2))
    # then bytes are standard base64, and reading the JSON gives the bytes back
    assert printed["key"] == "OWIxZQD/"
    assert printed["original"] == "wwEAAA=="
    assert CODEC.from_json(RecordType.REJECTED, json.dumps(printed)) == record


def test_outputs_are_accepted_only_as_avro_not_json() -> None:
    # given an Outcome written as JSON (only xwait writes outcomes)
    data = CODEC.to_json(RecordType.OUTCOME, SAMPLES[RecordType.OUTCOME]).encode()
    # when it is decoded from a topic
    with pytest.raises(UndecodableRecord) as caught:
        CODEC.decode(RecordType.OUTCOME, data)
    # then it is refused, saying which types take JSON
    assert caught.value.reason == "json_not_accepted"
    assert "Command, Reply, StartWait" in caught.value.detail


def test_record_types_are_accepted_by_name_as_well_as_by_enum() -> None:
    data = CODEC.encode("Timer", SAMPLES[RecordType.TIMER])
    assert CODEC.decode(RecordType.TIMER, data) == SAMPLES[RecordType.TIMER]
