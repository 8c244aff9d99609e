"""The SDK's output records give JSON fields as values, and travel back unchanged."""

from __future__ import annotations

from typing import Any

from streams import codec
from streams.cli.tail import readable
from streams.client import Action, Outcome
from streams.codec import RecordType


def _outcome(response_data: str | None) -> dict[str, Any]:
    return {"outcomeId": "o-k", "correlationKey": "k", "definition": "expense-approval",
            "tenant": None, "outcome": "RECEIVED", "reason": "reply_valid",
            "responseData": response_data, "responseValid": True, "validationIssue": None,
            "reviewOutcome": None, "reviewNote": None, "remindersSent": 0,
            "escalationLevel": 0, "parkedAt": 1, "endedAt": 2,
            "trace": [{"at": 1, "event": "requested", "detail": ""}],
            "operator": None, "operatorReason": None}


def test_response_data_is_the_decoded_answer_and_its_text_travels_back_byte_for_byte() -> None:
    # given an outcome whose answer came as JSON text with its own spacing
    text = '{"decision":  "approved", "by": ["sam"]}'
    wire = codec.encode(RecordType.OUTCOME, _outcome(text))
    # when the SDK reads it
    outcome = Outcome.from_record(codec.decode(RecordType.OUTCOME, wire))
    # then the answer is a value, as it was handed to reply(), not JSON text
    assert outcome.response_data == {"decision": "approved", "by": ["sam"]}
    assert outcome.response_data_text == text
    # and the record it gives back is the one it read
    assert codec.encode(RecordType.OUTCOME, outcome.to_record()) == wire
    # and the CLI shows the answer nested, not as a string inside JSON
    assert readable(RecordType.OUTCOME, outcome.to_record())["responseData"] == {
        "decision": "approved", "by": ["sam"]}


def test_an_answer_that_is_not_json_stays_text_and_none_stays_none() -> None:
    broken = Outcome.from_record(_outcome("approved, I think"))  # accepted in review
    assert broken.response_data == "approved, I think"
    assert broken.to_record()["responseData"] == "approved, I think"
    assert Outcome.from_record(_outcome(None)).response_data is None
    assert Outcome.from_record(_outcome(None)).to_record()["responseData"] is None


def test_an_action_payload_is_the_value_the_wait_was_started_with() -> None:
    action = Action.from_record({
        "actionId": "a", "correlationKey": "k", "definition": "d", "tenant": None,
        "action": "SEND_REQUEST", "party": None, "level": 0, "attempt": 1,
        "payload": '{"amount": 120}', "at": 5})
    assert action.payload == {"amount": 120}
    assert action.to_record()["payload"] == '{"amount": 120}'
