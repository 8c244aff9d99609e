"""Rule 9 (seed 001 wins): suspend keeps the place, pauses deadlines, records replies."""

from __future__ import annotations

import pytest

from streams.core import (
    ActionKind,
    ArmTimer,
    CommandKind,
    DisarmTimer,
    Discard,
    DiscardReason,
    EmitAction,
    EmitOutcome,
    OutcomeKind,
    OutcomeReason,
    RejectReason,
    TimerFired,
    TimerKind,
    WaitStatus,
)
from tests.core.core_harness import (
    APPROVED,
    DAY,
    HOUR,
    KEY,
    T0,
    Run,
    actions,
    outcomes,
    the_outcome,
    the_reject,
)

pytestmark = [pytest.mark.rule9]


def test_suspend_disarms_every_timer_and_reports_reason_time_and_what_it_goes_back_to() -> None:
    run = Run()
    run.start()
    run.advance(HOUR)
    effects = run.command(CommandKind.SUSPEND, reason="downstream maintenance")
    assert {e.kind for e in effects if isinstance(e, DisarmTimer)} == {
        TimerKind.REMINDER, TimerKind.DEADLINE}
    assert run.slot is not None and not run.slot.armed_timers()
    s = run.wait.suspension
    assert s is not None
    assert (s.reason, s.at, s.resume_to) == ("downstream maintenance", T0 + HOUR,
                                             WaitStatus.PARKED)


def test_resume_restores_what_was_left_of_the_deadline_so_suspension_never_counts() -> None:
    run = Run()
    run.start()
    run.advance(2 * DAY)
    run.command(CommandKind.SUSPEND, reason="incident")
    run.advance(10 * DAY)
    run.command(CommandKind.RESUME)
    assert run.due(TimerKind.DEADLINE) == run.now + 1 * DAY


def test_resume_after_a_long_suspension_sends_one_reminder_not_a_burst() -> None:
    run = Run()
    run.start()
    run.advance(23 * HOUR)
    run.command(CommandKind.SUSPEND)
    run.advance(30 * DAY)
    effects = run.command(CommandKind.RESUME)
    assert not actions(effects, ActionKind.SEND_REMINDER)
    assert [e.kind for e in effects if isinstance(e, ArmTimer)].count(TimerKind.REMINDER) == 1
    assert run.due(TimerKind.REMINDER) == run.now + HOUR


def test_timer_that_was_due_before_suspension_is_stale_after_it() -> None:
    run = Run()
    run.start()
    deadline = [t for t in run.slot.armed_timers() if t.kind is TimerKind.DEADLINE][0]  # type: ignore[union-attr]
    run.command(CommandKind.SUSPEND)
    run.now = deadline.due_at
    effects = run.send(TimerFired(KEY, deadline.kind, deadline.due_at, deadline.generation))
    assert isinstance(effects[0], Discard) and effects[0].reason is DiscardReason.STALE_TIMER
    assert run.wait.status is WaitStatus.SUSPENDED


def test_reply_while_suspended_is_recorded_and_decided_only_on_resume() -> None:
    run = Run()
    run.start()
    run.command(CommandKind.SUSPEND)
    effects = run.reply()
    assert effects == () and run.wait.status is WaitStatus.SUSPENDED
    run.advance(HOUR)
    outcome = the_outcome(run.command(CommandKind.RESUME))
    assert outcome.outcome is OutcomeKind.RECEIVED and outcome.ended_at == T0 + HOUR
    events = [t.event for t in outcome.trace]
    assert events.index("reply_recorded") < events.index("resumed") < events.index("reply_valid")


def test_second_recorded_reply_loses_to_the_first_on_resume_and_is_rejected_late() -> None:
    run = Run()
    run.start()
    run.command(CommandKind.SUSPEND)
    run.reply()
    run.reply('{"decision": "rejected"}', reply_id="second")
    effects = run.command(CommandKind.RESUME)
    assert the_outcome(effects).response_data == APPROVED
    reject = the_reject(effects)
    assert reject.reason is RejectReason.LATE and reject.reply is not None
    assert reject.reply.reply_id == "second"


def test_suspend_twice_and_resume_twice_do_nothing_the_second_time() -> None:
    run = Run()
    run.start()
    run.command(CommandKind.SUSPEND)
    before = run.slot
    effects = run.command(CommandKind.SUSPEND)
    assert run.slot == before
    reasons = [e.reason for e in effects if isinstance(e, Discard)]
    assert reasons == [DiscardReason.ALREADY_SUSPENDED]
    run.command(CommandKind.RESUME)
    before = run.slot
    effects = run.command(CommandKind.RESUME)
    assert run.slot == before
    assert [e.reason for e in effects if isinstance(e, Discard)] == [DiscardReason.NOT_SUSPENDED]


def test_suspending_a_wait_in_review_returns_it_to_review() -> None:
    run = Run()
    run.start()
    run.reply('{"decision": "maybe"}')
    run.command(CommandKind.SUSPEND)
    assert the_reject(run.command(CommandKind.REVIEW, review_outcome="Accept")).reason \
        is RejectReason.INVALID_COMMAND
    run.command(CommandKind.RESUME)
    assert run.wait.status is WaitStatus.IN_REVIEW
    assert the_outcome(run.command(CommandKind.REVIEW, review_outcome="Accept")).reason \
        is OutcomeReason.REVIEW_ACCEPTED


def test_cancel_ends_a_parked_wait_cancelled_with_the_operators_reason_in_the_trace() -> None:
    run = Run()
    run.start()
    outcome = the_outcome(run.command(CommandKind.CANCEL, reason="duplicate expense"))
    assert outcome.outcome is OutcomeKind.CANCELLED
    assert outcome.reason is OutcomeReason.CANCELLED_BY_OPERATOR
    assert any("duplicate expense" in t.detail and "olga" in t.detail for t in outcome.trace)


def test_cancel_works_while_suspended_and_while_in_review() -> None:
    for setup in ("suspended", "in_review"):
        run = Run()
        run.start()
        if setup == "suspended":
            run.command(CommandKind.SUSPEND)
        else:
            run.reply("nope")
        assert the_outcome(run.command(CommandKind.CANCEL)).outcome is OutcomeKind.CANCELLED
        assert run.slot is not None
        assert {t.kind for t in run.slot.armed_timers()} == {TimerKind.RETENTION}


def test_cancel_of_a_finished_wait_is_rejected_late() -> None:
    run = Run()
    run.start()
    run.reply()
    assert the_reject(run.command(CommandKind.CANCEL)).reason is RejectReason.LATE


def test_manual_deliver_ends_the_wait_received_as_delivered() -> None:
    run = Run()
    run.start()
    outcome = the_outcome(run.command(CommandKind.DELIVER, response_data=APPROVED,
                                      reason="phoned in"))
    assert outcome.reason is OutcomeReason.DELIVERED and outcome.response_valid


def test_manual_deliver_of_invalid_data_still_goes_to_review() -> None:
    run = Run()
    run.start()
    effects = run.command(CommandKind.DELIVER, response_data='{"decision": 1}')
    assert not outcomes(effects) and run.wait.status is WaitStatus.IN_REVIEW


def test_manual_deliver_while_suspended_is_recorded_and_decided_on_resume() -> None:
    run = Run()
    run.start()
    run.command(CommandKind.SUSPEND)
    assert not [e for e in run.command(CommandKind.DELIVER, response_data=APPROVED)
                if isinstance(e, EmitOutcome | EmitAction)]
    assert the_outcome(run.command(CommandKind.RESUME)).reason is OutcomeReason.DELIVERED


def test_deliver_without_data_is_refused() -> None:
    run = Run()
    run.start()
    assert the_reject(run.command(CommandKind.DELIVER)).reason is RejectReason.INVALID_COMMAND
