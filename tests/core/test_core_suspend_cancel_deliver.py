"""Rule 9 (seed 001 wins): suspend keeps the place, pauses deadlines, records replies."""

from __future__ import annotations

import pytest

from streams import core
from tests.core.core_harness import APPROVED, DAY, HOUR, KEY, T0, Run
from tests.core.picking import actions, outcomes, the_outcome, the_reject

pytestmark = [pytest.mark.rule9]


def test_suspend_disarms_every_timer_and_reports_reason_time_and_what_it_goes_back_to() -> None:
    run = Run()
    run.start()
    run.advance(HOUR)
    effects = run.command(core.CommandKind.SUSPEND, reason="downstream maintenance")
    assert {e.kind for e in effects if isinstance(e, core.DisarmTimer)} == {
        core.TimerKind.REMINDER, core.TimerKind.DEADLINE}
    assert run.slot is not None and not run.slot.armed_timers()
    s = run.wait.suspension
    assert s is not None
    assert (s.reason, s.at, s.resume_to) == ("downstream maintenance", T0 + HOUR,
                                             core.WaitStatus.PARKED)


def test_resume_restores_what_was_left_of_the_deadline_so_suspension_never_counts() -> None:
    run = Run()
    run.start()
    run.advance(2 * DAY)
    run.command(core.CommandKind.SUSPEND, reason="incident")
    run.advance(10 * DAY)
    run.command(core.CommandKind.RESUME)
    assert run.due(core.TimerKind.DEADLINE) == run.now + 1 * DAY


def test_resume_after_a_long_suspension_sends_one_reminder_not_a_burst() -> None:
    run = Run()
    run.start()
    run.advance(23 * HOUR)
    run.command(core.CommandKind.SUSPEND)
    run.advance(30 * DAY)
    effects = run.command(core.CommandKind.RESUME)
    assert not actions(effects, core.ActionKind.SEND_REMINDER)
    armed = [e.kind for e in effects if isinstance(e, core.ArmTimer)]
    assert armed.count(core.TimerKind.REMINDER) == 1
    assert run.due(core.TimerKind.REMINDER) == run.now + HOUR


def test_timer_that_was_due_before_suspension_is_stale_after_it() -> None:
    run = Run()
    run.start()
    deadline = [t for t in run.slot.armed_timers() if t.kind is core.TimerKind.DEADLINE][0]  # type: ignore[union-attr]
    run.command(core.CommandKind.SUSPEND)
    run.now = deadline.due_at
    effects = run.send(core.TimerFired(KEY, deadline.kind, deadline.due_at, deadline.generation))
    assert isinstance(effects[0], core.Discard)
    assert effects[0].reason is core.DiscardReason.STALE_TIMER
    assert run.wait.status is core.WaitStatus.SUSPENDED


def test_reply_while_suspended_is_recorded_and_decided_only_on_resume() -> None:
    run = Run()
    run.start()
    run.command(core.CommandKind.SUSPEND)
    effects = run.reply()
    assert effects == () and run.wait.status is core.WaitStatus.SUSPENDED
    run.advance(HOUR)
    outcome = the_outcome(run.command(core.CommandKind.RESUME))
    assert outcome.outcome is core.OutcomeKind.RECEIVED and outcome.ended_at == T0 + HOUR
    events = [t.event for t in outcome.trace]
    assert events.index("reply_recorded") < events.index("resumed") < events.index("reply_valid")


def test_second_recorded_reply_loses_to_the_first_on_resume_and_is_rejected_late() -> None:
    run = Run()
    run.start()
    run.command(core.CommandKind.SUSPEND)
    run.reply()
    run.reply('{"decision": "rejected"}', reply_id="second")
    effects = run.command(core.CommandKind.RESUME)
    assert the_outcome(effects).response_data == APPROVED
    reject = the_reject(effects)
    assert reject.reason is core.RejectReason.LATE and reject.reply is not None
    assert reject.reply.reply_id == "second"


def test_suspend_twice_and_resume_twice_do_nothing_the_second_time() -> None:
    run = Run()
    run.start()
    for kind, reason in [(core.CommandKind.SUSPEND, core.DiscardReason.ALREADY_SUSPENDED),
                         (core.CommandKind.RESUME, core.DiscardReason.NOT_SUSPENDED)]:
        run.command(kind)
        before = run.slot
        effects = run.command(kind)
        assert run.slot == before
        assert [e.reason for e in effects if isinstance(e, core.Discard)] == [reason]


def test_suspending_a_wait_in_review_returns_it_to_review() -> None:
    run = Run()
    run.start()
    run.reply('{"decision": "maybe"}')
    run.command(core.CommandKind.SUSPEND)
    assert the_reject(run.command(core.CommandKind.REVIEW, review_outcome="Accept")).reason \
        is core.RejectReason.INVALID_COMMAND
    run.command(core.CommandKind.RESUME)
    assert run.wait.status is core.WaitStatus.IN_REVIEW
    assert the_outcome(run.command(core.CommandKind.REVIEW, review_outcome="Accept")).reason \
        is core.OutcomeReason.REVIEW_ACCEPTED


def test_cancel_ends_a_parked_wait_cancelled_with_the_operators_reason_in_the_trace() -> None:
    run = Run()
    run.start()
    outcome = the_outcome(run.command(core.CommandKind.CANCEL, reason="duplicate expense"))
    assert outcome.outcome is core.OutcomeKind.CANCELLED
    assert outcome.reason is core.OutcomeReason.CANCELLED_BY_OPERATOR
    assert any("duplicate expense" in t.detail and "olga" in t.detail for t in outcome.trace)


def test_cancel_works_while_suspended_and_while_in_review() -> None:
    for setup in ("suspended", "in_review"):
        run = Run()
        run.start()
        if setup == "suspended":
            run.command(core.CommandKind.SUSPEND)
        else:
            run.reply("nope")
        outcome = the_outcome(run.command(core.CommandKind.CANCEL))
        assert outcome.outcome is core.OutcomeKind.CANCELLED
        assert run.slot is not None
        assert {t.kind for t in run.slot.armed_timers()} == {core.TimerKind.RETENTION}


def test_cancel_of_a_finished_wait_is_rejected_late() -> None:
    run = Run()
    run.start()
    run.reply()
    assert the_reject(run.command(core.CommandKind.CANCEL)).reason is core.RejectReason.LATE


def test_manual_deliver_ends_the_wait_received_as_delivered() -> None:
    run = Run()
    run.start()
    outcome = the_outcome(run.command(core.CommandKind.DELIVER, response_data=APPROVED,
                                      reason="phoned in"))
    assert outcome.reason is core.OutcomeReason.DELIVERED and outcome.response_valid


def test_manual_deliver_of_invalid_data_still_goes_to_review() -> None:
    run = Run()
    run.start()
    effects = run.command(core.CommandKind.DELIVER, response_data='{"decision": 1}')
    assert not outcomes(effects) and run.wait.status is core.WaitStatus.IN_REVIEW


def test_manual_deliver_while_suspended_is_recorded_and_decided_on_resume() -> None:
    run = Run()
    run.start()
    run.command(core.CommandKind.SUSPEND)
    assert not [e for e in run.command(core.CommandKind.DELIVER, response_data=APPROVED)
                if isinstance(e, core.EmitOutcome | core.EmitAction)]
    assert the_outcome(run.command(core.CommandKind.RESUME)).reason is core.OutcomeReason.DELIVERED


def test_deliver_without_data_is_refused() -> None:
    run = Run()
    run.start()
    reject = the_reject(run.command(core.CommandKind.DELIVER))
    assert reject.reason is core.RejectReason.INVALID_COMMAND
