"""The four variants beyond single-channel, all through the same decide()."""

from __future__ import annotations

import json

import pytest

from streams import core
from tests.core.core_harness import DAY, HOUR, KEY, MINUTE, T0, Run
from tests.core.picking import actions, outcomes, the_outcome, the_reject

pytestmark = [pytest.mark.rule1, pytest.mark.rule3, pytest.mark.rule4, pytest.mark.rule6]

QUOTE = '{"amount": 120.5, "currency": "EUR"}'


# ---- multi-channel (vendor-quote: email, webhook, portal)

def test_multi_channel_first_reply_on_any_accepted_channel_wins() -> None:
    run = Run()
    run.start("vendor-quote")
    outcome = the_outcome(run.reply(QUOTE, channel="webhook"))
    assert outcome.outcome is core.OutcomeKind.RECEIVED
    assert any("webhook" in t.detail for t in outcome.trace)
    assert the_reject(run.reply(QUOTE, channel="email")).reason is core.RejectReason.LATE


def test_multi_channel_reply_on_an_unlisted_channel_goes_to_review() -> None:
    run = Run()
    run.start("vendor-quote")
    run.reply(QUOTE, channel="sms")
    assert run.wait.status is core.WaitStatus.IN_REVIEW


def test_multi_channel_reminders_come_from_a_cycle_definition() -> None:
    run = Run()
    run.start("vendor-quote")
    sent = [run.fire(core.TimerKind.REMINDER) for _ in range(3)]
    assert [a.attempt for e in sent for a in actions(e, core.ActionKind.SEND_REMINDER)] == [1, 2, 3]
    assert run.slot is not None
    assert core.TimerKind.REMINDER not in {t.kind for t in run.slot.armed_timers()}


# ---- first valid response wins (carrier-a, carrier-b, carrier-c)

def test_first_valid_sends_one_request_per_party_each_with_its_own_key() -> None:
    run = Run()
    effects = run.start("first-valid")
    sent = actions(effects, core.ActionKind.SEND_REQUEST)
    assert [(a.party, a.correlation_key) for a in sent] == [
        (p, f"{KEY}~{p}") for p in ("carrier-a", "carrier-b", "carrier-c")]


def test_first_valid_request_may_name_its_own_parties() -> None:
    run = Run()
    effects = run.start("first-valid", parties=("x", "y"))
    assert [a.party for a in actions(effects, core.ActionKind.SEND_REQUEST)] == ["x", "y"]


def test_first_valid_unacceptable_reply_is_rejected_and_the_wait_goes_on() -> None:
    run = Run()
    run.start("first-valid")
    declined = run.reply('{"price": 10, "replyAcceptable": false}',
                         correlation_key=f"{KEY}~carrier-a")
    assert the_reject(declined).reason is core.RejectReason.UNACCEPTABLE
    broken = run.reply('{"price": -1}', correlation_key=f"{KEY}~carrier-b")
    assert the_reject(broken).reason is core.RejectReason.UNACCEPTABLE
    assert run.wait.status is core.WaitStatus.PARKED and not outcomes(declined + broken)


def test_first_valid_first_acceptable_reply_wins_and_closes_out_the_others() -> None:
    run = Run()
    run.start("first-valid")
    run.reply('{"price": 10, "replyAcceptable": false}', correlation_key=f"{KEY}~carrier-a")
    effects = run.reply('{"price": 12}', correlation_key=f"{KEY}~carrier-c")
    assert the_outcome(effects).response_data == '{"price": 12}'
    closed = actions(effects, core.ActionKind.CLOSE_OUT)
    assert [(a.party, a.correlation_key) for a in closed] == [
        ("carrier-a", f"{KEY}~carrier-a"), ("carrier-b", f"{KEY}~carrier-b")]
    late = run.reply('{"price": 9}', correlation_key=f"{KEY}~carrier-b")
    assert the_reject(late).reason is core.RejectReason.LATE


def test_first_valid_reply_without_a_party_key_or_from_a_stranger_is_unmatched() -> None:
    run = Run()
    run.start("first-valid")
    assert the_reject(run.reply('{"price": 1}')).reason is core.RejectReason.UNMATCHED
    stranger = run.reply('{"price": 1}', correlation_key=f"{KEY}~carrier-z")
    assert the_reject(stranger).reason is core.RejectReason.UNMATCHED


def test_first_valid_reminders_go_to_every_party() -> None:
    run = Run()
    run.start("first-valid")
    effects = run.fire(core.TimerKind.REMINDER)
    assert len(actions(effects, core.ActionKind.SEND_REMINDER)) == 3


def test_first_valid_without_any_parties_is_an_invalid_request() -> None:
    from dataclasses import replace

    from tests.core.core_harness import DEFINITIONS

    defs = dict(DEFINITIONS)
    defs["first-valid"] = replace(defs["first-valid"], parties=())
    run = Run(defs)
    assert the_reject(run.start("first-valid")).reason is core.RejectReason.INVALID_REQUEST


# ---- long-running probe (poll PT5M, deadline PT2H, invalid -> escalate)

def test_probe_polls_on_the_timer_and_the_loop_returns_to_the_timer() -> None:
    run = Run()
    run.start("probe")
    assert run.due(core.TimerKind.POLL) == T0 + 5 * MINUTE
    effects = run.fire(core.TimerKind.POLL)
    (poll,) = actions(effects, core.ActionKind.POLL)
    assert poll.attempt == 1
    assert run.due(core.TimerKind.POLL) == T0 + 10 * MINUTE


def test_probe_result_not_ready_keeps_polling() -> None:
    run = Run()
    run.start("probe")
    run.fire(core.TimerKind.POLL)
    effects = run.reply('{"resultReady": false}', channel="poller")
    assert not outcomes(effects) and run.wait.status is core.WaitStatus.PARKED
    assert actions(run.fire(core.TimerKind.POLL), core.ActionKind.POLL)[0].attempt == 2


def test_probe_result_ready_ends_the_wait_received() -> None:
    run = Run()
    run.start("probe")
    run.fire(core.TimerKind.POLL)
    effects = run.reply('{"resultReady": true, "result": {"rows": 3}}', channel="poller")
    outcome = the_outcome(effects)
    assert outcome.reason is core.OutcomeReason.RESULT_READY
    assert json.loads(outcome.response_data or "")["result"] == {"rows": 3}
    assert run.slot is not None
    assert {t.kind for t in run.slot.armed_timers()} == {core.TimerKind.RETENTION}


def test_probe_deadline_stops_the_loop_and_escalates() -> None:
    run = Run()
    run.start("probe")
    effects = run.fire(core.TimerKind.DEADLINE)
    assert the_outcome(effects).outcome is core.OutcomeKind.ESCALATED
    assert actions(effects, core.ActionKind.RUN_ESCALATION)
    assert run.slot is not None
    assert core.TimerKind.POLL not in {t.kind for t in run.slot.armed_timers()}


# ---- chained stages (manager P2D -> director PT12H; finance P1D -> cfo PT8H)

APPROVED = '{"decision": "approved"}'


def test_chained_valid_reply_completes_the_stage_and_opens_the_next_with_its_deadline() -> None:
    run = Run()
    first = run.start("two-stage-approval")
    assert [a.party for a in actions(first, core.ActionKind.SEND_REQUEST)] == ["manager"]
    run.advance(HOUR)
    effects = run.reply(APPROVED)
    assert not outcomes(effects)
    assert [a.party for a in actions(effects, core.ActionKind.SEND_REQUEST)] == ["finance"]
    assert run.due(core.TimerKind.DEADLINE) == T0 + HOUR + DAY
    assert run.wait.stage == 1


def test_chained_wait_ends_received_after_the_last_stage_with_every_stages_answer() -> None:
    run = Run()
    run.start("two-stage-approval")
    run.reply('{"decision": "approved", "by": "m"}')
    outcome = the_outcome(run.reply('{"decision": "approved", "by": "f"}'))
    assert outcome.outcome is core.OutcomeKind.RECEIVED
    assert json.loads(outcome.response_data or "") == {
        "manager": {"decision": "approved", "by": "m"},
        "finance": {"decision": "approved", "by": "f"}}


def test_chained_stage_escalates_on_its_own_and_reply_at_that_level_still_advances() -> None:
    run = Run()
    run.start("two-stage-approval")
    effects = run.fire(core.TimerKind.DEADLINE)
    assert [a.party for a in actions(effects, core.ActionKind.RUN_ESCALATION)] == ["director"]
    run.reply(APPROVED)
    assert run.wait.stage == 1 and run.wait.level == 0
    effects = run.fire(core.TimerKind.DEADLINE)
    assert [a.party for a in actions(effects, core.ActionKind.RUN_ESCALATION)] == ["cfo"]
    outcome = the_outcome(run.fire(core.TimerKind.DEADLINE))
    assert outcome.outcome is core.OutcomeKind.ESCALATED and outcome.escalation_level == 1


def test_chained_invalid_reply_is_reviewed_and_acceptance_opens_the_next_stage() -> None:
    run = Run()
    run.start("two-stage-approval")
    run.reply('{"decision": "perhaps"}')
    status_before = run.wait.status
    effects = run.command(core.CommandKind.REVIEW, review_outcome="Submit Correction",
                          response_data=APPROVED, review_note="asked again")
    assert status_before is core.WaitStatus.IN_REVIEW
    assert not outcomes(effects) and run.wait.stage == 1
    assert run.wait.status is core.WaitStatus.PARKED
