"""Records written with older schemas stay readable; schemas cannot change by accident."""

from __future__ import annotations

import json
import shutil
from io import BytesIO
from pathlib import Path
from typing import Any

import fastavro
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.codec import Codec, RecordType, default_codec
from streams.codec.schemas import fingerprint_of

CODEC = default_codec()
SCHEMAS = CODEC.schemas.directory

# Every fingerprint ever released, oldest first. Changing a schema changes its
# fingerprint: move the old file to schemas/history/ first (so records already
# on the topics stay readable) and append the new fingerprint here.
RELEASED_FINGERPRINTS: dict[RecordType, list[str]] = {
    RecordType.START_WAIT: ["20d3d55f0435eb59"],
    RecordType.REPLY: ["5aff4365118dc500", "22f4c09c3eb80e68"],
    RecordType.COMMAND: ["7f114b6ba1f4b9cc", "52804fdb7a4cbc87", "5deee44c4dac9a16",
                          "54a4c6cfdadca36b"],
    RecordType.TIMER: ["c41c8d4cab0d98b3"],
    RecordType.ACTION: ["be4fdbaee90a6422", "23d4083c381689aa", "f1d1c4fa9ad3efad"],
    RecordType.OUTCOME: ["d04c7320ffe257c4", "70bbe7145b27dfe9", "c37cb4a71c2b6626"],
    RecordType.REJECTED: ["f67ad6a42b9a4ead"],
    RecordType.ACTION_RESULT: ["89fd9490f7a5455b"],
    RecordType.RECEIPT: ["1ab53f44bb6fe30e"],
}

GOLDEN_REPLY = {
    "correlationKey": "7f3a9c2e",
    "tenant": "acme",
    "channel": "email",
    "responseData": '{"approved":true}',
    "replyId": "r-1",
    "sentAt": 1_767_225_600_000,
}
GOLDEN_REPLY_BYTES = bytes.fromhex(
    "c301 22f4c09c3eb80e68"  # magic, fingerprint of the current Reply
    " 10 3766336139633265"  # correlationKey: length 8 (zig-zag), "7f3a9c2e"
    " 02 08 61636d65"  # tenant: union branch 1 (string), length 4, "acme"
    " 0a 656d61696c"  # channel: "email"
    " 22 7b22617070726f766564223a747275657d"  # responseData: '{"approved":true}'
    " 02 06 722d31"  # replyId: union branch 1, "r-1"
    " 02 80a0d5edee66"  # sentAt: union branch 1 (long), 1767225600000
)


def write_with(schema_path: Path, record: dict[str, Any]) -> bytes:
    """What a producer still on an old schema puts on the topic."""
    raw = json.loads(schema_path.read_text())
    buffer = BytesIO()
    buffer.write(b"\xc3\x01" + fingerprint_of(raw))
    fastavro.schemaless_writer(buffer, fastavro.parse_schema(raw, named_schemas={}), record)
    return buffer.getvalue()


def test_reply_encodes_to_the_golden_bytes() -> None:
    # an accidental change to Reply.avsc, or to the encoder, breaks this
    assert CODEC.encode(RecordType.REPLY, GOLDEN_REPLY) == GOLDEN_REPLY_BYTES
    assert CODEC.decode(RecordType.REPLY, GOLDEN_REPLY_BYTES) == GOLDEN_REPLY


def test_every_released_fingerprint_is_still_readable() -> None:
    known = {fp.hex(): schema.record_type for fp, schema in CODEC.schemas.by_fingerprint.items()}
    for record_type, fingerprints in RELEASED_FINGERPRINTS.items():
        for fingerprint in fingerprints:
            assert known.get(fingerprint) is record_type, (
                f"{record_type} fingerprint {fingerprint} was released but no schema in "
                f"schemas/ or schemas/history/ has it any more"
            )


def test_every_current_schema_is_the_last_released_version() -> None:
    for record_type, fingerprints in RELEASED_FINGERPRINTS.items():
        current = CODEC.schema(record_type).fingerprint.hex()
        assert current == fingerprints[-1], (
            f"{record_type}.avsc changed (fingerprint {current}); keep the old version in "
            f"schemas/history/ and append the new fingerprint to RELEASED_FINGERPRINTS"
        )


# Alike in shape with test_codec_json.py's records (duplicates lists the pair),
# deliberately: test records written out field by field.
def test_reply_written_with_v1_decodes_with_the_current_reader() -> None:
    # given a reply from a producer still on Reply v1, which had no sentAt
    v1_record = {
        "correlationKey": "7f3a9c2e~finance",
        "tenant": "acme",
        "channel": "portal",
        "responseData": "{}",
        "replyId": None,
    }
    data = write_with(SCHEMAS / "history" / "Reply.v1.avsc", v1_record)
    # when the current service decodes it
    record = CODEC.decode(RecordType.REPLY, data)
    # then it reads as a current Reply whose sentAt took its default
    assert record == {**v1_record, "sentAt": None}


def v1_replies() -> st.SearchStrategy[dict[str, Any]]:
    optional = st.none() | st.text(max_size=20)
    return st.fixed_dictionaries(
        {
            "correlationKey": st.text(max_size=40),
            "tenant": optional,
            "channel": st.text(max_size=10),
            "responseData": st.text(max_size=40),
            "replyId": optional,
        }
    )


@settings(max_examples=200)
@given(v1_replies())
def test_any_v1_reply_resolves_to_the_current_schema(v1_record: dict[str, Any]) -> None:
    data = write_with(SCHEMAS / "history" / "Reply.v1.avsc", v1_record)
    assert CODEC.decode(RecordType.REPLY, data) == {**v1_record, "sentAt": None}


def test_command_symbol_from_a_newer_schema_reads_as_unknown(tmp_path: Path) -> None:
    # given a writer schema with a symbol this reader does not know (PAUSE)
    folder = tmp_path / "schemas"
    shutil.copytree(SCHEMAS, folder)
    newer = json.loads((SCHEMAS / "Command.avsc").read_text())
    newer["fields"][1]["type"]["symbols"].insert(0, "PAUSE")
    newer_path = folder / "history" / "Command.newer.avsc"
    newer_path.write_text(json.dumps(newer))
    codec = Codec.load(folder)
    data = write_with(newer_path, {"correlationKey": "k", "command": "PAUSE"})
    # when the current reader decodes it
    record = codec.decode(RecordType.COMMAND, data)
    # then the enum's declared default stands in, instead of the record being unreadable
    assert record["command"] == "UNKNOWN"


def test_an_action_written_before_send_attempts_reads_as_the_first_send_attempt() -> None:
    old = {"actionId": "a", "correlationKey": "k", "definition": "d", "tenant": None,
           "action": "SEND_REQUEST", "party": None, "level": 0, "attempt": 1,
           "payload": None, "at": 5}
    data = write_with(SCHEMAS / "history" / "Action.v1.avsc", old)
    assert CODEC.decode(RecordType.ACTION, data) == {**old, "sendAttempt": 1,
                                                     "idempotencyKey": None}


def test_an_action_written_before_idempotency_keys_reads_without_one() -> None:
    old = {"actionId": "a2", "correlationKey": "k", "definition": "d", "tenant": None,
           "action": "SEND_REQUEST", "party": None, "level": 0, "attempt": 1,
           "payload": None, "at": 5, "sendAttempt": 2}
    data = write_with(SCHEMAS / "history" / "Action.v2.avsc", old)
    assert CODEC.decode(RecordType.ACTION, data) == {**old, "idempotencyKey": None}


def test_a_command_written_before_operations_reads_as_a_command_of_its_own() -> None:
    old = {"correlationKey": "k", "command": "CANCEL", "reason": "dup", "reviewOutcome": None,
           "reviewNote": None, "responseData": None, "operator": "ann", "deadline": None,
           "moveBy": None, "version": None}
    data = write_with(SCHEMAS / "history" / "Command.v3.avsc", old)
    assert CODEC.decode(RecordType.COMMAND, data) == {**old, "operationId": None}


def test_an_outcome_written_before_versions_reads_without_one() -> None:
    raw = json.loads((SCHEMAS / "history" / "Outcome.v2.avsc").read_text())
    old = {f["name"]: f.get("default") for f in raw["fields"]}
    old.update(outcomeId="o", correlationKey="k", definition="d", outcome="RECEIVED",
               reason="reply_valid", remindersSent=0, escalationLevel=0, parkedAt=1,
               endedAt=2, trace=[], responseValid=True)
    data = write_with(SCHEMAS / "history" / "Outcome.v2.avsc", old)
    decoded = CODEC.decode(RecordType.OUTCOME, data)
    assert decoded["sendError"] is None and decoded["definitionVersion"] is None
