"""Rule 12: what channel adapters report about each send, retries, and the declared path."""

from __future__ import annotations

import dataclasses
import json

import pytest

from streams import core
from tests.core.core_harness import DAY, DEFINITIONS, HOUR, KEY, MINUTE, T0, Run
from tests.core.picking import actions, outcomes, rejects, the_outcome, the_reject

pytestmark = [pytest.mark.rule12]


def _with(route: core.SendFailureRoute | None, retries: int = 2,
          backoff: int = MINUTE) -> dict[str, core.WaitDefinition]:
    policy = None if route is None else core.SendFailurePolicy(retries, backoff, route)
    return {n: dataclasses.replace(d, on_send_failure=policy) for n, d in DEFINITIONS.items()}


ESCALATE = _with(core.SendFailureRoute.ESCALATE)
REVIEW = _with(core.SendFailureRoute.REVIEW)


def _request(run: Run, definition: str = "expense-approval") -> core.EmitAction:
    (sent,) = actions(run.start(definition), core.ActionKind.SEND_REQUEST)
    return sent


def _every_retry(run: Run, sent: core.EmitAction) -> list[core.EmitAction]:
    """The send, and each retry the policy allows (two), each after the last one failed."""
    tries = [sent]
    for _ in range(2):
        run.failed(tries[-1])
        (again,) = actions(run.fire(core.TimerKind.SEND_RETRY), core.ActionKind.SEND_REQUEST)
        tries.append(again)
    return tries


def _discards(effects: tuple[object, ...]) -> list[core.Discard]:
    return [e for e in effects if isinstance(e, core.Discard)]


def test_a_wait_stores_no_send_until_a_result_comes() -> None:
    run = Run(ESCALATE)
    _request(run)
    run.fire(core.TimerKind.REMINDER)
    run.fire(core.TimerKind.DEADLINE)
    assert run.wait.level == 1 and run.wait.sends == ()


def test_a_delivered_send_is_in_the_trace_and_a_second_report_of_it_changes_nothing() -> None:
    run = Run(ESCALATE)
    sent = _request(run)
    assert run.result(sent) == ()
    assert run.wait.trace[-1].event == "send_delivered"
    assert run.wait.sends[0].state is core.SendState.DELIVERED
    before = run.slot
    (again,) = _discards(run.result(sent))
    assert again.reason is core.DiscardReason.DUPLICATE_RESULT
    assert run.slot == before


def test_a_failed_send_goes_again_after_the_backoff_with_its_next_send_attempt() -> None:
    run = Run(ESCALATE)
    sent = _request(run)
    run.advance(5 * MINUTE)
    assert not actions(run.failed(sent, "503 Service Unavailable"))
    assert run.due(core.TimerKind.SEND_RETRY) == T0 + 6 * MINUTE
    assert "retry 1 of 2" in run.wait.trace[-1].detail
    (again,) = actions(run.fire(core.TimerKind.SEND_RETRY), core.ActionKind.SEND_REQUEST)
    assert (again.send_attempt, again.attempt, again.at) == (2, 1, T0 + 6 * MINUTE)
    assert again.action_id != sent.action_id
    request = core.ActionKind.SEND_REQUEST
    assert again.action_id == core.action_id(KEY, T0, request, 0, 0, None, 1, 2)
    assert sent.action_id == core.action_id(KEY, T0, request, 0, 0, None, 1)
    assert run.wait.status is core.WaitStatus.PARKED
    assert run.due(core.TimerKind.DEADLINE) == T0 + 3 * DAY  # the SLA does not move


def test_retries_never_exceed_the_policy_then_the_wait_escalates_to_the_next_level() -> None:
    run = Run(ESCALATE)
    tries = _every_retry(run, _request(run))
    assert [a.send_attempt for a in tries] == [1, 2, 3]
    run.advance(MINUTE)
    effects = run.failed(tries[-1], "550 mailbox unavailable")
    assert not actions(effects, core.ActionKind.SEND_REQUEST)
    (escalation,) = actions(effects, core.ActionKind.RUN_ESCALATION)
    assert (escalation.level, escalation.party, escalation.at) == (1, "director", run.now)
    assert run.wait.level == 1 and run.wait.status is core.WaitStatus.PARKED
    assert run.due(core.TimerKind.DEADLINE) == run.now + 12 * HOUR
    assert core.TimerKind.SEND_RETRY not in {t.kind for t in run.wait.timers}
    assert run.wait.send_error == "SEND_REQUEST: 550 mailbox unavailable"
    assert [t.detail for t in run.wait.trace if t.event == "escalated"] == [
        "level 1 to director (send_failed)"]


def test_every_send_attempt_of_one_send_carries_the_first_attempt_s_id_as_its_key() -> None:
    run = Run(ESCALATE)
    sent = _request(run)
    tries = _every_retry(run, sent)
    assert len({a.action_id for a in tries}) == 3  # each attempt reports under its own id
    assert {a.idempotency_key for a in tries} == {sent.action_id}
    # ... and every other action has a key of its own: a reminder, an escalation.
    (reminder,) = actions(run.fire(core.TimerKind.REMINDER), core.ActionKind.SEND_REMINDER)
    (second,) = actions(run.fire(core.TimerKind.REMINDER), core.ActionKind.SEND_REMINDER)
    (escalation,) = actions(run.fire(core.TimerKind.DEADLINE), core.ActionKind.RUN_ESCALATION)
    keys = [a.idempotency_key for a in (sent, reminder, second, escalation)]
    assert keys == [a.action_id for a in (sent, reminder, second, escalation)]
    assert len(set(keys)) == 4


def test_a_permanent_failure_takes_the_path_at_once_and_the_outcome_names_it() -> None:
    run = Run(ESCALATE)
    (sent,) = actions(run.start("first-valid", parties=("solo",)), core.ActionKind.SEND_REQUEST)
    run.advance(30 * MINUTE)  # before the first reminder
    effects = run.failed(sent, "404 no such carrier", permanent=True)
    (escalation,) = actions(effects, core.ActionKind.RUN_ESCALATION)
    outcome = the_outcome(effects)
    assert outcome.outcome is core.OutcomeKind.ESCALATED
    assert outcome.reason is core.OutcomeReason.SEND_FAILED
    assert outcome.send_error == "SEND_REQUEST to solo: 404 no such carrier"
    assert outcome.ended_at == T0 + 30 * MINUTE
    assert escalation.level == 1
    assert any(t.event == "send_failed" and "(permanent)" in t.detail for t in outcome.trace)


def test_then_review_asks_a_person_naming_the_send_and_the_wait_keeps_waiting() -> None:
    run = Run(REVIEW)
    sent = _request(run)
    effects = run.failed(sent, "550 mailbox unavailable", permanent=True)
    (review,) = actions(effects, core.ActionKind.REVIEW_NEEDED)
    payload = json.loads(review.payload or "")
    assert payload["sendFailed"] == {
        "actionId": sent.action_id, "action": "SEND_REQUEST", "party": None, "level": 0,
        "attempt": 1, "sendAttempts": 1, "error": "550 mailbox unavailable"}
    assert payload["validationIssue"] == "send_failed: SEND_REQUEST: 550 mailbox unavailable"
    assert run.wait.status is core.WaitStatus.PARKED
    assert run.due(core.TimerKind.DEADLINE) == T0 + 3 * DAY
    # A person who reached the approver by phone delivers the answer.
    outcome = the_outcome(run.command(core.CommandKind.DELIVER,
                                      response_data='{"decision":"approved"}'))
    assert outcome.reason is core.OutcomeReason.DELIVERED
    assert outcome.send_error == "SEND_REQUEST: 550 mailbox unavailable"


def test_without_a_policy_a_failure_is_only_recorded() -> None:
    run = Run(_with(None))
    sent = _request(run)
    assert run.failed(sent, "timeout") == ()
    assert run.wait.trace[-1].event == "send_failed"
    assert "declares no on_send_failure" in run.wait.trace[-1].detail
    assert run.wait.sends[0].state is core.SendState.FAILED


def test_results_for_no_wait_an_unknown_action_or_an_ended_wait_are_rejected() -> None:
    run = Run(ESCALATE)
    assert the_reject(run.result("nope")).reason is core.RejectReason.UNMATCHED
    sent = _request(run)
    assert the_reject(run.result("not-an-action")).reason is core.RejectReason.UNMATCHED
    (review,) = actions(run.reply("{broken"), core.ActionKind.REVIEW_NEEDED)
    assert the_reject(run.result(review)).reason is core.RejectReason.UNMATCHED  # not tracked
    assert the_reject(run.failed(sent)).reason is core.RejectReason.LATE  # in review
    run.command(core.CommandKind.REVIEW, review_outcome="Accept", review_note="ok")
    assert run.wait.status is core.WaitStatus.DONE
    assert the_reject(run.failed(sent)).reason is core.RejectReason.LATE


def test_a_reply_still_wins_against_a_pending_retry() -> None:
    run = Run(ESCALATE)
    sent = _request(run)
    run.failed(sent)
    assert run.due(core.TimerKind.SEND_RETRY)
    run.advance(30 * 1000)  # before the backoff has passed
    effects = run.reply()
    assert the_outcome(effects).reason is core.OutcomeReason.REPLY_VALID
    assert core.TimerKind.SEND_RETRY not in {t.kind for t in run.wait.timers}
    assert not actions(effects, core.ActionKind.SEND_REQUEST)


def test_a_failure_appended_after_the_deadline_finds_the_wait_escalated_and_is_not_retried(
) -> None:
    run = Run(ESCALATE)
    sent = _request(run)
    run.advance(3 * DAY + MINUTE)  # rule 2: the deadline was due before the result
    effects = run.failed(sent, "503")
    (escalation,) = actions(effects, core.ActionKind.RUN_ESCALATION)
    assert escalation.at == T0 + 3 * DAY
    assert not actions(effects, core.ActionKind.SEND_REQUEST)
    assert run.wait.level == 1
    assert "moved on" in run.wait.trace[-1].detail
    assert core.TimerKind.SEND_RETRY not in {t.kind for t in run.wait.timers}


def test_a_newer_reminder_supersedes_the_retry_of_an_older_one() -> None:
    run = Run(_with(core.SendFailureRoute.ESCALATE, backoff=2 * DAY))
    _request(run)
    (first,) = actions(run.fire(core.TimerKind.REMINDER), core.ActionKind.SEND_REMINDER)
    run.failed(first)
    assert run.due(core.TimerKind.SEND_RETRY) == run.now + 2 * DAY
    (second,) = actions(run.fire(core.TimerKind.REMINDER), core.ActionKind.SEND_REMINDER)
    assert second.attempt == 2
    assert core.TimerKind.SEND_RETRY not in {t.kind for t in run.wait.timers}
    # Only sends with a result are stored: reminder 1, failed (not sent again).
    assert [(s.attempt, s.state) for s in run.wait.sends] == [(1, core.SendState.FAILED)]


def test_a_retry_due_before_the_next_reminder_goes_first() -> None:
    run = Run(ESCALATE)
    _request(run)
    (first,) = actions(run.fire(core.TimerKind.REMINDER), core.ActionKind.SEND_REMINDER)
    run.failed(first)
    run.advance(DAY)  # the retry was due a minute after the failure, before reminder 2
    effects = run.fire(core.TimerKind.REMINDER)
    sent = [(a.attempt, a.send_attempt, a.at)
            for a in actions(effects, core.ActionKind.SEND_REMINDER)]
    assert sent == [(1, 2, T0 + DAY + MINUTE), (2, 1, T0 + 2 * DAY)]


def test_a_result_for_an_earlier_send_attempt_is_stale() -> None:
    run = Run(ESCALATE)
    sent = _request(run)
    run.failed(sent)
    run.fire(core.TimerKind.SEND_RETRY)
    (stale,) = _discards(run.result(sent))
    assert stale.reason is core.DiscardReason.STALE_RESULT


def test_contradicting_results_of_one_send_are_rejected_as_duplicate() -> None:
    run = Run(ESCALATE)
    sent = _request(run)
    run.result(sent)
    assert the_reject(run.failed(sent)).reason is core.RejectReason.DUPLICATE


def test_results_while_suspended_are_decided_on_resume_and_the_backoff_pauses() -> None:
    run = Run(ESCALATE)
    sent = _request(run)
    run.failed(sent)  # retry due in a minute
    run.command(core.CommandKind.SUSPEND, reason="holiday")
    run.advance(2 * HOUR)
    assert run.failed("unknown-while-suspended") == ()  # held, not decided
    assert run.wait.held_results
    effects = run.command(core.CommandKind.RESUME)
    assert the_reject(effects).reason is core.RejectReason.UNMATCHED  # decided on resume
    assert run.due(core.TimerKind.SEND_RETRY) == run.now + MINUTE
    assert run.wait.sends[0].retry_at == run.now + MINUTE


def test_a_failed_final_escalation_of_an_ended_wait_is_retried_then_reviewed() -> None:
    run = Run(ESCALATE)
    _request(run, "probe")  # no escalation level: the deadline escalates once and ends
    effects = run.fire(core.TimerKind.DEADLINE)
    (escalation,) = actions(effects, core.ActionKind.RUN_ESCALATION)
    assert the_outcome(effects).reason is core.OutcomeReason.DEADLINE_EXHAUSTED
    assert run.wait.status is core.WaitStatus.DONE
    run.failed(escalation, "502 Bad Gateway")
    (again,) = actions(run.fire(core.TimerKind.SEND_RETRY), core.ActionKind.RUN_ESCALATION)
    assert again.send_attempt == 2
    run.failed(again)
    (third,) = actions(run.fire(core.TimerKind.SEND_RETRY), core.ActionKind.RUN_ESCALATION)
    effects = run.failed(third, "502 Bad Gateway")
    (review,) = actions(effects, core.ActionKind.REVIEW_NEEDED)
    assert outcomes(effects) == []
    assert json.loads(review.payload or "")["sendFailed"]["sendAttempts"] == 3
    assert run.wait.status is core.WaitStatus.DONE
    assert core.TimerKind.RETENTION in {t.kind for t in run.wait.timers}


def test_first_valid_escalates_only_when_no_party_can_be_reached() -> None:
    run = Run(ESCALATE)
    sent = actions(run.start("first-valid"), core.ActionKind.SEND_REQUEST)
    for a in sent[:2]:
        effects = run.failed(a, "bounced", permanent=True)
        assert not actions(effects, core.ActionKind.RUN_ESCALATION)
        assert run.wait.trace[-1].event == "send_failed_path"
    effects = run.failed(sent[2], "bounced", permanent=True)
    assert the_outcome(effects).reason is core.OutcomeReason.SEND_FAILED


def test_a_party_result_carries_the_party_key_and_is_matched() -> None:
    run = Run(ESCALATE)
    sent = actions(run.start("first-valid"), core.ActionKind.SEND_REQUEST)
    assert sent[1].correlation_key == f"{KEY}~carrier-b"
    assert rejects(run.result(sent[1])) == []
    (stored,) = run.wait.sends
    assert (stored.party, stored.state) == ("carrier-b", core.SendState.DELIVERED)


def test_the_sends_a_wait_remembers_round_trip_through_the_stored_form() -> None:
    run = Run(ESCALATE)
    sent = _request(run)
    run.failed(sent, "503 Service Unavailable")
    run.command(core.CommandKind.SUSPEND, reason="x")
    run.failed("later")
    assert run.slot is not None
    assert core.decode_slot(core.encode_slot(run.slot)) == run.slot
