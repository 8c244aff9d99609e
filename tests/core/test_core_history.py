"""Rule 10 and 5: a finished wait shows its history until purged; the operator's words
reach the outcome as fields."""

from __future__ import annotations

import pytest

from streams.core import (
    KEPT_PAYLOAD_BYTES,
    Command,
    CommandKind,
    OutcomeKind,
    OutcomeReason,
    TimerKind,
    WaitStatus,
    decode_slot,
    encode_slot,
)
from streams.core.rules import emitted_trace
from tests.core.core_harness import APPROVED, DAY, HOUR, KEY, Run, the_outcome

pytestmark = [pytest.mark.rule5, pytest.mark.rule10]


def test_a_finished_wait_keeps_its_outcome_response_and_trace_until_purged() -> None:
    run = Run()
    run.start(payload='{"expense": 42}')
    run.advance(HOUR)
    outcome = the_outcome(run.reply())
    w = run.wait
    assert w.status is WaitStatus.DONE
    assert (w.outcome, w.reason, w.ended_at) == (outcome.outcome, outcome.reason,
                                                  outcome.ended_at)
    assert w.response_data == outcome.response_data == APPROVED
    assert w.response_valid is True
    assert emitted_trace(w) == outcome.trace
    assert w.payload == '{"expense": 42}'
    assert [t.kind for t in w.timers] == [TimerKind.RETENTION]
    assert decode_slot(encode_slot(run.slot)) == run.slot  # type: ignore[arg-type]
    run.fire(TimerKind.RETENTION)
    assert run.slot is None


def test_a_review_is_kept_with_its_issue_note_and_reviewer() -> None:
    run = Run()
    run.start()
    run.reply('{"decision": "maybe"}')
    run.send(Command(KEY, CommandKind.REVIEW, review_outcome="Accept", review_note="ok by me",
                     operator="rita", reason="checked by phone"))
    w = run.wait
    assert (w.review_outcome, w.review_note, w.response_valid) == ("Accept", "ok by me", False)
    assert w.validation_issue
    assert (w.operator, w.operator_reason) == ("rita", "checked by phone")


def test_a_large_payload_is_not_kept_once_the_wait_is_done() -> None:
    big = '"' + "x" * KEPT_PAYLOAD_BYTES + '"'
    run = Run()
    run.start(payload=big)
    assert run.wait.payload == big
    run.reply()
    assert run.wait.payload is None and run.wait.payload_dropped


def test_a_cancel_names_the_operator_and_their_reason_in_the_outcome() -> None:
    run = Run()
    run.start()
    outcome = the_outcome(run.command(CommandKind.CANCEL, reason="duplicate expense"))
    assert outcome.reason is OutcomeReason.CANCELLED_BY_OPERATOR
    assert (outcome.operator, outcome.operator_reason) == ("olga", "duplicate expense")
    assert (run.wait.operator, run.wait.operator_reason) == ("olga", "duplicate expense")


def test_a_delivered_reply_names_who_delivered_it() -> None:
    run = Run()
    run.start()
    outcome = the_outcome(run.command(CommandKind.DELIVER, response_data=APPROVED,
                                      reason="phoned in"))
    assert (outcome.outcome, outcome.reason) == (OutcomeKind.RECEIVED, OutcomeReason.DELIVERED)
    assert (outcome.operator, outcome.operator_reason) == ("olga", "phoned in")


def test_a_delivery_recorded_while_suspended_names_the_deliverer_not_who_resumed() -> None:
    run = Run()
    run.start()
    run.send(Command(KEY, CommandKind.SUSPEND, reason="audit", operator="ann"))
    run.send(Command(KEY, CommandKind.DELIVER, response_data=APPROVED, reason="by mail",
                     operator="ben"))
    assert decode_slot(encode_slot(run.slot)) == run.slot  # type: ignore[arg-type]
    outcome = the_outcome(run.send(Command(KEY, CommandKind.RESUME, operator="cid")))
    assert (outcome.operator, outcome.operator_reason) == ("ben", "by mail")


def test_a_reply_or_a_deadline_ends_a_wait_without_an_operator() -> None:
    run = Run()
    run.start()
    run.send(Command(KEY, CommandKind.SUSPEND, reason="audit", operator="ann"))
    run.reply()
    replied = the_outcome(run.send(Command(KEY, CommandKind.RESUME, operator="cid")))
    assert (replied.operator, replied.operator_reason) == (None, None)
    late = Run()
    late.start()
    late.advance(5 * DAY)
    escalated = the_outcome(late.send(Command(KEY, CommandKind.CANCEL, operator="x")))
    # The deadlines passed before the cancel: they ended it, not the operator.
    assert escalated.outcome is OutcomeKind.ESCALATED
    assert escalated.operator is None
