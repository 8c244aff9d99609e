"""JSON input: any producer may answer a wait, and nothing it sends is coerced silently."""

from __future__ import annotations

import json
from typing import Any

import pytest

from streams.codec import RecordType, UndecodableReason, UndecodableRecord, decode, from_json

NOW = 1_767_225_600_000


def reply_json(**fields: Any) -> bytes:
    base: dict[str, Any] = {"correlationKey": "k-1", "channel": "email", "responseData": "{}"}
    base.update(fields)
    return json.dumps(base).encode()


def undecodable(record_type: RecordType, data: bytes) -> UndecodableRecord:
    with pytest.raises(UndecodableRecord) as caught:
        decode(record_type, data)
    return caught.value


def test_missing_optional_fields_take_their_defaults() -> None:
    # given a StartWait with only its required fields
    data = json.dumps(
        {"correlationKey": "k-1", "definition": "invoice-approval", "requestedAt": NOW}
    ).encode()
    # when it is decoded
    record = decode(RecordType.START_WAIT, data)
    # then every optional field is present with its default: null, or [] for lists
    assert record == {
        "correlationKey": "k-1",
        "definition": "invoice-approval",
        "tenant": None,
        "payload": None,
        "parties": [],
        "deadline": None,
        "requestedAt": NOW,
    }


def test_default_lists_are_not_shared_between_records() -> None:
    data = json.dumps({"correlationKey": "k", "definition": "d", "requestedAt": 1}).encode()
    first = decode(RecordType.START_WAIT, data)
    first["parties"].append("mutated")
    assert decode(RecordType.START_WAIT, data)["parties"] == []


def test_leading_whitespace_before_the_object_is_still_json() -> None:
    record = decode(RecordType.REPLY, b" \r\n\t" + reply_json())
    assert record["correlationKey"] == "k-1"


def test_command_enum_is_read_from_its_symbol() -> None:
    data = json.dumps({"correlationKey": "k", "command": "SUSPEND", "reason": "audit"}).encode()
    assert decode(RecordType.COMMAND, data)["command"] == "SUSPEND"


@pytest.mark.parametrize(
    ("data", "expected_detail"),
    [
        (
            json.dumps({"correlationKey": "k", "definition": "d", "requestedAt": "2026-01-01"}),
            'JSON field requestedAt: expected long, got string "2026-01-01"',
        ),
        (
            json.dumps({"correlationKey": "k", "definition": "d", "requestedAt": 1.5e12}),
            "JSON field requestedAt: expected long, got number 1500000000000.0",
        ),
        (
            json.dumps({"correlationKey": "k", "definition": "d", "requestedAt": True}),
            "JSON field requestedAt: expected long, got boolean true",
        ),
        (
            json.dumps({"correlationKey": "k", "definition": "d", "requestedAt": 2**63}),
            "JSON field requestedAt: 9223372036854775808 is out of range for long",
        ),
        (
            json.dumps({"correlationKey": "k", "definition": "d"}),
            "JSON field requestedAt: required, but missing",
        ),
        (
            json.dumps({"correlationKey": 42, "definition": "d", "requestedAt": 1}),
            "JSON field correlationKey: expected string, got number 42",
        ),
        (
            json.dumps(
                {"correlationKey": "k", "definition": "d", "requestedAt": 1, "parties": "a"}
            ),
            'JSON field parties: expected array of string, got string "a"',
        ),
        (
            json.dumps(
                {"correlationKey": "k", "definition": "d", "requestedAt": 1, "parties": [1]}
            ),
            "JSON field parties[0]: expected string, got number 1",
        ),
        (
            json.dumps({"correlationKey": "k", "definition": None, "requestedAt": 1}),
            "JSON field definition: expected string, got null",
        ),
    ],
    ids=[
        "string-for-long",
        "float-for-long",
        "boolean-for-long",
        "long-overflow",
        "required-missing",
        "number-for-string",
        "string-for-array",
        "wrong-array-item",
        "null-for-required",
    ],
)
def test_json_that_does_not_fit_the_schema_names_the_field_and_the_problem(
    data: str, expected_detail: str
) -> None:
    error = undecodable(RecordType.START_WAIT, data.encode())
    assert error.reason == UndecodableReason.SCHEMA_MISMATCH
    assert error.detail == expected_detail


def test_unknown_field_is_refused_rather_than_dropped() -> None:
    # given a reply whose producer misspelt an optional field
    error = undecodable(RecordType.REPLY, reply_json(replyid="r-1"))
    # then the typo is named, with the fields that exist
    assert error.reason == UndecodableReason.SCHEMA_MISMATCH
    assert error.detail.startswith("JSON field replyid: Reply has no such field (fields: ")
    assert "replyId" in error.detail


def test_unknown_command_symbol_lists_the_valid_ones() -> None:
    data = json.dumps({"correlationKey": "k", "command": "PAUSE"}).encode()
    error = undecodable(RecordType.COMMAND, data)
    assert error.detail == (
        "JSON field command: expected one of SUSPEND, RESUME, CANCEL, DELIVER, REVIEW, "
        'RESCHEDULE, MIGRATE, UNKNOWN, got string "PAUSE"'
    )


def test_duplicate_keys_are_refused() -> None:
    data = b'{"correlationKey": "a", "correlationKey": "b", "channel": "e", "responseData": "{}"}'
    error = undecodable(RecordType.REPLY, data)
    assert error.detail == "JSON field correlationKey: appears twice in the same object"


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_numbers_are_not_json(constant: str) -> None:
    data = reply_json()[:-1] + f', "sentAt": {constant}}}'.encode()
    error = undecodable(RecordType.REPLY, data)
    assert error.reason == UndecodableReason.INVALID_JSON
    assert constant in error.detail


def test_unparseable_json_says_where() -> None:
    error = undecodable(RecordType.REPLY, b'{"correlationKey": "k",')
    assert error.reason == UndecodableReason.INVALID_JSON
    assert error.detail.startswith("not valid JSON: ")
    assert "char 23" in error.detail


def test_json_that_is_not_utf8_is_refused_with_the_offending_byte() -> None:
    error = undecodable(RecordType.REPLY, b'{"correlationKey": "caf\xe9"}')
    assert error.reason == UndecodableReason.NOT_UTF8
    assert error.detail == "looks like JSON but is not valid UTF-8 (byte 0xe9 at position 23)"


def test_from_json_refuses_a_json_value_that_is_not_an_object() -> None:
    with pytest.raises(UndecodableRecord) as caught:
        from_json(RecordType.REPLY, "[1, 2]")
    assert caught.value.reason == UndecodableReason.INVALID_JSON
    assert caught.value.detail == "expected a JSON object with the fields of Reply, got list"


def test_bytes_in_json_must_be_standard_base64() -> None:
    text = json.dumps(
        {
            "topic": "t",
            "partition": 0,
            "offset": 0,
            "key": "not base64!",
            "reason": "late",
            "detail": "",
            "rejectedAt": 0,
        }
    )
    with pytest.raises(UndecodableRecord) as caught:
        from_json(RecordType.REJECTED, text)
    assert caught.value.detail == (
        'JSON field key: expected bytes as standard base64, got string "not base64!"'
    )


def test_trace_entries_are_checked_field_by_field() -> None:
    outcome = {
        "outcomeId": "o",
        "correlationKey": "k",
        "definition": "d",
        "outcome": "RECEIVED",
        "reason": "reply_accepted",
        "remindersSent": 0,
        "escalationLevel": 0,
        "parkedAt": 0,
        "endedAt": 1,
        "trace": [{"at": 0, "event": "parked", "detail": ""}, {"at": "later", "event": "x"}],
    }
    with pytest.raises(UndecodableRecord) as caught:
        from_json(RecordType.OUTCOME, json.dumps(outcome))
    assert caught.value.detail == 'JSON field trace[1].at: expected long, got string "later"'
