"""Typed consumption of the processor's outputs, written here with streams.codec directly."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Producer

from streams import codec
from streams.client import (
    Action,
    ActionKind,
    Outcome,
    OutcomeKind,
    Rejected,
    TraceEntry,
    UndecodableOutput,
    XwaitClient,
    XwaitConsumer,
)
from streams.codec import RecordType
from streams.config import Settings

OUTCOME: dict[str, Any] = {
    "outcomeId": "o-1", "correlationKey": "w-1", "definition": "expense-approval",
    "tenant": "acme", "outcome": "RECEIVED", "reason": "review_corrected",
    "responseData": '{"decision":"approved"}', "responseValid": False,
    "validationIssue": "decision: 'ok' is not one of ['approved', 'rejected']",
    "reviewOutcome": "Submit Correction", "reviewNote": "meant approved",
    "remindersSent": 1, "escalationLevel": 0, "parkedAt": 1_700_000_000_000,
    "endedAt": 1_700_000_100_000,
    "trace": [{"at": 1_700_000_000_000, "event": "requested", "detail": "definition x"},
              {"at": 1_700_000_100_000, "event": "reviewed", "detail": ""}],
    "operator": "rita", "operatorReason": "checked by phone",
    "sendError": "SEND_REQUEST: 550 mailbox unavailable", "definitionVersion": "4eff47727d45",
}
ACTION: dict[str, Any] = {
    "actionId": "a-1", "correlationKey": "w-2", "definition": "first-valid", "tenant": None,
    "action": "SEND_REQUEST", "party": "carrier-a", "level": 0, "attempt": 1,
    "payload": '{"lane":"HAM-NYC"}', "at": 1_700_000_000_000, "sendAttempt": 2,
    "idempotencyKey": "a-0",
}
REJECTED: dict[str, Any] = {
    "topic": "x.replies", "partition": 3, "offset": 42, "key": b"w-3", "reason": "unmatched",
    "detail": "Expected a wait for the key, but none arrived", "original": b"\xc3\x01raw",
    "rejectedAt": 1_700_000_000_000,
}


def _produce(settings: Settings, role: str, values: list[tuple[str, bytes]]) -> None:
    producer = Producer(settings.confluent(partitioner="murmur2_random"))
    for key, value in values:
        producer.produce(settings.topic(role), key=key.encode(), value=value)
    assert producer.flush(10) == 0


def _take(consumer: XwaitConsumer[Any], count: int, timeout: float = 15.0) -> list[Any]:
    found: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(found) < count and time.monotonic() < deadline:
        record = consumer.poll(0.5)
        if record is not None:
            found.append(record)
    return found


def test_outcomes_actions_and_rejections_are_read_back_as_typed_frozen_records(
    topics: Settings,
) -> None:
    _produce(topics, "outcomes", [("w-1", codec.encode(RecordType.OUTCOME, OUTCOME))])
    _produce(topics, "actions", [("w-2", codec.encode(RecordType.ACTION, ACTION))])
    _produce(topics, "rejected", [("w-3", codec.encode(RecordType.REJECTED, REJECTED))])

    client = XwaitClient(topics)
    with client.subscribe("outcomes", from_beginning=True) as outcomes:
        [outcome] = _take(outcomes, 1)
    with client.subscribe("actions", from_beginning=True) as actions:
        [action] = _take(actions, 1)
    with client.subscribe("rejected", from_beginning=True) as rejected:
        [rejection] = _take(rejected, 1)

    assert isinstance(outcome, Outcome)
    assert outcome.outcome is OutcomeKind.RECEIVED
    assert outcome.correlation_key == "w-1" and outcome.reminders_sent == 1
    assert outcome.review_outcome == "Submit Correction" and outcome.response_valid is False
    assert outcome.trace[1] == TraceEntry(at=1_700_000_100_000, event="reviewed", detail="")
    assert (outcome.operator, outcome.operator_reason) == ("rita", "checked by phone")
    assert outcome.to_record() == OUTCOME
    with pytest.raises(AttributeError):
        outcome.reason = "changed"  # type: ignore[misc]

    assert isinstance(action, Action)
    assert action.action is ActionKind.SEND_REQUEST and action.party == "carrier-a"
    assert action.reply_key == "w-2~carrier-a"
    assert action.to_record() == ACTION

    assert isinstance(rejection, Rejected)
    assert rejection.key == b"w-3" and rejection.original == b"\xc3\x01raw"
    assert rejection.rejected_at == 1_700_000_000_000
    assert rejection.to_record() == REJECTED


def test_a_group_consumer_resumes_after_the_last_record_it_finished(topics: Settings) -> None:
    actions = [(f"w-{i}", codec.encode(RecordType.ACTION, {**ACTION, "actionId": f"a-{i}",
                                                           "correlationKey": "same"}))
               for i in range(3)]
    _produce(topics, "actions", actions)
    group = f"{topics.topic_prefix}-reader"

    with XwaitConsumer("actions", topics, group_id=group, from_beginning=True) as first:
        assert [a.action_id for a in _take(first, 2)] == ["a-0", "a-1"]
    with XwaitConsumer("actions", topics, group_id=group, from_beginning=True) as second:
        assert [a.action_id for a in _take(second, 1)] == ["a-2"]


def test_an_undecodable_output_is_raised_with_its_position_and_then_skipped(
    topics: Settings,
) -> None:
    _produce(topics, "outcomes", [("w", b"garbage"), ("w", codec.encode(RecordType.OUTCOME,
                                                                        OUTCOME))])
    with XwaitConsumer("outcomes", topics, from_beginning=True) as consumer:
        deadline = time.monotonic() + 15
        with pytest.raises(UndecodableOutput) as caught:
            while time.monotonic() < deadline:
                consumer.poll(0.5)
        assert caught.value.value == b"garbage" and caught.value.offset == 0
        [outcome] = _take(consumer, 1)
    assert outcome.outcome_id == "o-1"


@pytest.mark.parametrize("group", [None, "billing"])
def test_a_record_written_while_the_consumer_joins_is_not_missed(
    topics: Settings, group: str | None,
) -> None:
    # given a consumer of new records only, created but not yet assigned any partition
    with XwaitConsumer("outcomes", topics, group_id=group and f"{group}-{time.time_ns()}",
                       from_beginning=False) as consumer:
        # when an outcome is written before its first poll joins the group
        _produce(topics, "outcomes", [("w-1", codec.encode(RecordType.OUTCOME, OUTCOME))])
        # then it is read: the start is "when the consumer was created", not "latest at join"
        [outcome] = _take(consumer, 1)
    assert outcome.outcome_id == "o-1"


def test_a_named_groups_first_run_reads_from_the_beginning_by_default(topics: Settings) -> None:
    _produce(topics, "outcomes", [("w-1", codec.encode(RecordType.OUTCOME, OUTCOME))])
    client = XwaitClient(topics)
    with client, client.subscribe("outcomes", group_id=f"billing-{time.time_ns()}") as outcomes:
        [outcome] = _take(outcomes, 1)
    assert outcome.correlation_key == "w-1"


def test_result_reads_only_the_keys_partition_and_returns_its_outcome(topics: Settings) -> None:
    others = [(f"other-{i}", codec.encode(RecordType.OUTCOME,
                                          {**OUTCOME, "correlationKey": f"other-{i}"}))
              for i in range(5)]
    _produce(topics, "outcomes", [*others, ("w-1", codec.encode(RecordType.OUTCOME, OUTCOME))])
    with XwaitClient(topics) as client:  # no worker answers here: the topic alone decides
        outcome = client.result("w-1", timeout=15)
    assert (outcome.correlation_key, outcome.reason) == ("w-1", "review_corrected")
