"""Rules 1-6 and 10 on the base shape.

expense-approval: reminders every PT24H up to 2, deadline P3D, director PT12H.
"""

from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams import core
from tests.core.core_harness import APPROVED, DAY, DEFINITIONS, HOUR, KEY, T0, Run
from tests.core.picking import actions, outcomes, the_outcome, the_reject

pytestmark = [
    pytest.mark.rule1, pytest.mark.rule2, pytest.mark.rule3, pytest.mark.rule4, pytest.mark.rule5,
    pytest.mark.rule6, pytest.mark.rule10,
]


def test_request_parks_the_wait_sends_the_request_and_arms_reminder_and_deadline() -> None:
    run = Run()
    effects = run.start(payload='{"expense": 42}')
    assert run.wait.status is core.WaitStatus.PARKED
    (send,) = actions(effects, core.ActionKind.SEND_REQUEST)
    assert send.correlation_key == KEY and send.payload == '{"expense": 42}'
    armed = {(e.kind, e.due_at) for e in effects if isinstance(e, core.ArmTimer)}
    assert armed == {(core.TimerKind.REMINDER, T0 + DAY), (core.TimerKind.DEADLINE, T0 + 3 * DAY)}


def test_deadline_counts_from_requested_at_not_from_processing_time() -> None:
    run = Run()
    run.advance(HOUR)
    run.start(requested_at=T0)
    assert run.due(core.TimerKind.DEADLINE) == T0 + 3 * DAY


def test_valid_reply_ends_the_wait_received_with_the_contract_variables() -> None:
    run = Run()
    run.start()
    run.advance(HOUR)
    effects = run.reply()
    outcome = the_outcome(effects)
    assert outcome.outcome is core.OutcomeKind.RECEIVED
    assert outcome.reason is core.OutcomeReason.REPLY_VALID
    assert outcome.response_data == APPROVED and outcome.response_valid
    assert outcome.validation_issue is None and outcome.reminders_sent == 0
    assert outcome.correlation_key == KEY and outcome.tenant == "acme"
    assert (outcome.parked_at, outcome.ended_at) == (T0, T0 + HOUR)
    assert [t.event for t in outcome.trace] == ["requested", "reply_valid", "ended"]
    assert run.wait.status is core.WaitStatus.DONE


def test_reply_that_wins_disarms_reminder_and_deadline_and_arms_retention() -> None:
    run = Run()
    run.start()
    effects = run.reply()
    disarmed = {e.kind for e in effects if isinstance(e, core.DisarmTimer)}
    armed = [e for e in effects if isinstance(e, core.ArmTimer)]
    assert disarmed == {core.TimerKind.REMINDER, core.TimerKind.DEADLINE}
    assert [(a.kind, a.due_at) for a in armed] == [(core.TimerKind.RETENTION, T0 + 7 * DAY)]


def test_deadline_that_loses_the_race_to_a_reply_is_discarded_as_stale() -> None:
    run = Run()
    run.start()
    deadline = [t for t in run.slot.armed_timers() if t.kind is core.TimerKind.DEADLINE][0]  # type: ignore[union-attr]
    run.reply()
    before = run.slot
    effects = run.send(core.TimerFired(KEY, deadline.kind, deadline.due_at, deadline.generation))
    assert run.slot == before
    assert [type(e) for e in effects] == [core.Discard]
    assert effects[0].reason is core.DiscardReason.STALE_TIMER  # type: ignore[union-attr]


def test_reply_that_loses_the_race_to_the_last_deadline_is_rejected_late() -> None:
    run = Run()
    run.start()
    run.fire(core.TimerKind.DEADLINE)
    run.fire(core.TimerKind.DEADLINE)
    reject = the_reject(run.reply())
    assert reject.reason is core.RejectReason.LATE
    assert "ended ESCALATED" in reject.detail


def test_second_reply_after_the_winner_is_rejected_late_and_changes_nothing() -> None:
    run = Run()
    run.start()
    run.reply()
    before = run.slot
    effects = run.reply('{"decision": "rejected"}')
    assert the_reject(effects).reason is core.RejectReason.LATE and not outcomes(effects)
    assert run.slot == before


def test_reminders_loop_back_to_the_same_wait_up_to_the_limit() -> None:
    run = Run()
    run.start()
    first = run.fire(core.TimerKind.REMINDER)
    second = run.fire(core.TimerKind.REMINDER)
    assert [a.attempt for a in actions(first + second, core.ActionKind.SEND_REMINDER)] == [1, 2]
    assert run.slot is not None
    assert {t.kind for t in run.slot.armed_timers()} == {core.TimerKind.DEADLINE}
    assert run.wait.status is core.WaitStatus.PARKED and run.wait.reminders_sent == 2
    outcome = the_outcome(run.reply())
    assert outcome.reminders_sent == 2


def test_deadline_escalates_to_the_director_who_waits_again_with_a_stricter_deadline() -> None:
    run = Run()
    run.start()
    effects = run.fire(core.TimerKind.DEADLINE)
    (escalation,) = actions(effects, core.ActionKind.RUN_ESCALATION)
    assert (escalation.party, escalation.level) == ("director", 1)
    assert not outcomes(effects)
    assert run.due(core.TimerKind.DEADLINE) == T0 + 3 * DAY + 12 * HOUR
    outcome = the_outcome(run.reply())
    assert outcome.outcome is core.OutcomeKind.RECEIVED and outcome.escalation_level == 1


def test_escalation_exhausted_ends_the_wait_escalated_with_the_level_reached() -> None:
    run = Run()
    run.start()
    run.fire(core.TimerKind.REMINDER)
    run.fire(core.TimerKind.DEADLINE)  # the second reminder, due at 48 h, fires first
    outcome = the_outcome(run.fire(core.TimerKind.DEADLINE))
    assert outcome.outcome is core.OutcomeKind.ESCALATED
    assert outcome.reason is core.OutcomeReason.DEADLINE_EXHAUSTED
    assert outcome.escalation_level == 1 and outcome.reminders_sent == 2


def test_a_deadline_record_processed_late_is_decided_at_its_due_time_with_what_was_due_before(
) -> None:
    run = Run()
    run.start()
    deadline = run.due(core.TimerKind.DEADLINE)
    run.advance(5 * DAY)  # the worker was far behind: the record is processed days late
    (armed,) = [t for t in run.wait.timers if t.kind is core.TimerKind.DEADLINE]
    effects = run.send(core.TimerFired(KEY, core.TimerKind.DEADLINE, deadline, armed.generation))
    reminders = actions(effects, core.ActionKind.SEND_REMINDER)
    assert [a.at for a in reminders] == [T0 + DAY, T0 + 2 * DAY]
    (escalation,) = actions(effects, core.ActionKind.RUN_ESCALATION)
    assert escalation.at == T0 + 3 * DAY
    assert run.due(core.TimerKind.DEADLINE) == T0 + 3 * DAY + 12 * HOUR


def test_a_reply_appended_after_the_deadline_loses_even_before_the_deadline_record_is_seen(
) -> None:
    run = Run()
    run.start()
    run.advance(3 * DAY + 13 * HOUR)  # past the deadline and the director's 12 hours
    effects = run.reply()
    outcome = the_outcome(effects)
    assert outcome.outcome is core.OutcomeKind.ESCALATED
    assert outcome.ended_at == T0 + 3 * DAY + 12 * HOUR
    assert the_reject(effects).reason is core.RejectReason.LATE


def test_a_reply_appended_before_the_deadline_wins_however_late_it_is_processed() -> None:
    run = Run()
    run.start()
    run.advance(3 * DAY - 1)
    outcome = the_outcome(run.reply())
    assert outcome.outcome is core.OutcomeKind.RECEIVED and outcome.reminders_sent == 2


def test_reply_with_another_correlation_key_is_unmatched_and_the_wait_goes_on() -> None:
    run = Run()
    run.start()
    reject = the_reject(run.reply(correlation_key="someone-else"))
    assert reject.reason is core.RejectReason.UNMATCHED
    assert run.wait.status is core.WaitStatus.PARKED


def test_reply_from_another_tenant_is_rejected_and_never_ends_the_wait() -> None:
    run = Run()
    run.start()
    effects = run.reply(tenant="globex")
    assert the_reject(effects).reason is core.RejectReason.TENANT_MISMATCH
    assert not outcomes(effects) and run.wait.status is core.WaitStatus.PARKED


def test_reply_that_fails_the_schema_goes_to_review_with_the_issue() -> None:
    run = Run()
    run.start()
    effects = run.reply('{"decision": "maybe"}')
    assert run.wait.status is core.WaitStatus.IN_REVIEW
    (review,) = actions(effects, core.ActionKind.REVIEW_NEEDED)
    payload = json.loads(review.payload or "")
    assert payload["validationIssue"].startswith("Expected responseData to match the schema")
    assert "maybe" in payload["validationIssue"]
    assert not outcomes(effects)
    assert run.slot is not None and not run.slot.armed_timers()


def test_unparseable_reply_goes_to_review_not_a_crash() -> None:
    run = Run()
    run.start()
    run.reply("{not json")
    assert run.wait.status is core.WaitStatus.IN_REVIEW
    assert (run.wait.validation_issue or "").startswith("Expected responseData to be JSON")


def test_reply_on_a_channel_the_definition_does_not_accept_goes_to_review() -> None:
    run = Run()
    run.start()
    run.reply(channel="fax")
    assert run.wait.status is core.WaitStatus.IN_REVIEW
    assert "'fax'" in (run.wait.validation_issue or "")


def test_review_accept_ends_received_with_the_original_data_and_the_note() -> None:
    run = Run()
    run.start()
    run.reply('{"decision": "maybe"}')
    outcome = the_outcome(run.command(core.CommandKind.REVIEW, review_outcome="Accept",
                                      review_note="called them, it is a yes"))
    assert outcome.outcome is core.OutcomeKind.RECEIVED
    assert outcome.reason is core.OutcomeReason.REVIEW_ACCEPTED
    assert outcome.response_data == '{"decision": "maybe"}' and not outcome.response_valid
    assert outcome.review_outcome == "Accept"
    assert outcome.review_note == "called them, it is a yes"
    assert outcome.validation_issue is not None


def test_review_correction_ends_received_with_the_corrected_data() -> None:
    run = Run()
    run.start()
    run.reply('{"decision": "maybe"}')
    outcome = the_outcome(run.command(core.CommandKind.REVIEW, review_outcome="Submit Correction",
                                      review_note="fixed", response_data=APPROVED))
    assert outcome.reason is core.OutcomeReason.REVIEW_CORRECTED
    assert outcome.response_data == APPROVED and outcome.response_valid


def test_review_correction_that_still_fails_the_schema_is_refused_and_review_goes_on() -> None:
    run = Run()
    run.start()
    run.reply('{"decision": "maybe"}')
    effects = run.command(core.CommandKind.REVIEW, review_outcome="Submit Correction",
                          response_data='{"decision": 3}')
    assert the_reject(effects).reason is core.RejectReason.INVALID_COMMAND
    assert run.wait.status is core.WaitStatus.IN_REVIEW


def test_review_with_an_unknown_outcome_is_refused() -> None:
    run = Run()
    run.start()
    run.reply('{"decision": "maybe"}')
    reject = the_reject(run.command(core.CommandKind.REVIEW, review_outcome="Approve"))
    assert reject.reason is core.RejectReason.INVALID_COMMAND and "'Approve'" in reject.detail


def test_review_on_a_parked_wait_is_refused() -> None:
    run = Run()
    run.start()
    assert the_reject(run.command(core.CommandKind.REVIEW, review_outcome="Accept")).reason \
        is core.RejectReason.INVALID_COMMAND


def test_reply_while_another_is_in_review_is_rejected_late() -> None:
    run = Run()
    run.start()
    run.reply('{"decision": "maybe"}')
    assert the_reject(run.reply()).reason is core.RejectReason.LATE
    assert run.wait.status is core.WaitStatus.IN_REVIEW


def test_definition_routing_invalid_replies_to_escalation_escalates_instead_of_review() -> None:
    run = Run()
    run.start("probe")
    effects = run.reply('{"resultReady": "soon"}', channel="poller")
    outcome = the_outcome(effects)
    assert outcome.outcome is core.OutcomeKind.ESCALATED
    assert outcome.reason is core.OutcomeReason.INVALID_REPLY_ESCALATED
    assert "resultReady" in (outcome.validation_issue or "")
    assert actions(effects, core.ActionKind.RUN_ESCALATION)


def test_duplicate_request_is_rejected_and_the_wait_is_untouched() -> None:
    run = Run()
    run.start()
    before = run.slot
    reject = the_reject(run.start())
    assert reject.reason is core.RejectReason.DUPLICATE and run.slot == before


def test_request_after_the_wait_ended_is_still_a_duplicate_during_retention() -> None:
    run = Run()
    run.start()
    run.reply()
    assert the_reject(run.start()).reason is core.RejectReason.DUPLICATE


def test_reply_with_a_seen_reply_id_is_a_duplicate_not_late() -> None:
    run = Run()
    run.start()
    run.reply(reply_id="r-1")
    assert the_reject(run.reply(reply_id="r-1")).reason is core.RejectReason.DUPLICATE


def test_request_naming_an_unknown_definition_is_rejected() -> None:
    run = Run()
    reject = the_reject(run.start("no-such-thing"))
    assert reject.reason is core.RejectReason.UNKNOWN_DEFINITION and run.slot is None


def test_request_deadline_overrides_the_definition_for_that_wait_only() -> None:
    run = Run()
    run.start(deadline="PT2H")
    assert run.due(core.TimerKind.DEADLINE) == T0 + 2 * HOUR
    other = Run()
    other.start()
    assert other.due(core.TimerKind.DEADLINE) == T0 + 3 * DAY


def test_request_with_a_malformed_deadline_override_is_rejected() -> None:
    run = Run()
    reject = the_reject(run.start(deadline="P1M"))
    assert reject.reason is core.RejectReason.INVALID_REQUEST and "months" in reject.detail


def test_request_with_a_party_separator_in_its_key_is_rejected() -> None:
    run = Run()
    assert the_reject(run.start(correlation_key="a~b")).reason is core.RejectReason.INVALID_REQUEST


def test_retention_purges_the_finished_wait_and_the_key_can_be_reused_with_a_new_id() -> None:
    run = Run()
    run.start()
    first = the_outcome(run.reply())
    effects = run.fire(core.TimerKind.RETENTION)
    assert run.slot is None and isinstance(effects[-1], core.Purge)
    run.start()
    second = the_outcome(run.reply())
    assert first.outcome_id != second.outcome_id
    assert second.outcome_id == core.outcome_id(KEY, run.wait.parked_at)


def test_outcome_and_action_ids_are_the_same_when_the_same_events_are_replayed() -> None:
    a, b = Run(), Run()
    for run in (a, b):
        run.start()
        run.fire(core.TimerKind.REMINDER)
        run.reply()
    assert a.history == b.history
    ids = [e.action_id for effects in a.history for e in actions(effects)]
    assert len(ids) == len(set(ids))


def test_trace_of_a_long_wait_is_bounded_and_marks_what_was_left_out() -> None:
    run = Run()
    run.start("probe")
    for _ in range(23):
        run.fire(core.TimerKind.POLL)
    outcome = the_outcome(run.reply('{"resultReady": true}'))
    events = [t.event for t in outcome.trace]
    assert len(events) == 17
    assert events[0] == "requested" and events[-1] == "ended"
    assert "trace_truncated" in events


def test_every_action_counts_its_attempts_from_one() -> None:
    run = Run()
    sent = run.start()
    run.fire(core.TimerKind.REMINDER)
    escalated = run.fire(core.TimerKind.DEADLINE)
    assert [a.attempt for a in actions(sent, core.ActionKind.SEND_REQUEST)] == [1]
    assert [a.attempt for a in actions(escalated, core.ActionKind.RUN_ESCALATION)] == [1]


@given(st.text(max_size=200), st.integers(-(2**63), 2**63 - 1))
def test_ids_are_the_uuid5_they_always_were(key: str, parked_at: int) -> None:
    namespace = uuid.UUID("5f0c1d2e-8a57-4c1b-9a7e-3b6d2f0e9c41")
    assert core.outcome_id(key, parked_at) == str(uuid.uuid5(namespace,
                                                             f"outcome\x1f{key}\x1f{parked_at}"))
    assert core.action_id(key, parked_at, core.ActionKind.POLL, 1, 2, None, 3) == str(uuid.uuid5(
        namespace, f"action\x1f{key}\x1f{parked_at}\x1fPOLL\x1f1\x1f2\x1f\x1f3"))


@given(st.sampled_from(['{"decision": "approved"}', '{"decision": "maybe"}', "{", "[]",
                        '{"decision": "rejected", "by": 3}']), st.booleans())
def test_a_remembered_verdict_is_the_one_computed_afresh(text: str, long: bool) -> None:
    from streams.core.validation import MEMO_TEXT, parse_json, schema_issue, text_issue

    schema = DEFINITIONS["expense-approval"].response_schema
    if long:  # past the memo limit: computed every time
        text = text + " " * (MEMO_TEXT + 1)
    parsed = parse_json(text)
    fresh = schema_issue(schema, parsed.value) if parsed.issue is None else None
    assert (text_issue(schema, text, parsed.value) if parsed.issue is None else None) == fresh
    assert parse_json(text) == parsed
