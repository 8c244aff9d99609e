"""Rule 11: an operator moves the current deadline of a parked or suspended wait."""

from __future__ import annotations

import pytest

from streams import core
from tests.core.core_harness import DAY, HOUR, KEY, MINUTE, T0, Run
from tests.core.picking import actions, the_reject

pytestmark = [pytest.mark.rule11]


def reschedule(run: Run, *, deadline: str | None = None, move_by: str | None = None,
               reason: str | None = "customer asked for more time",
               operator: str | None = "olga") -> tuple[core.Effect, ...]:
    return run.send(core.Command(KEY, core.CommandKind.RESCHEDULE, reason=reason, operator=operator,
                                 deadline=deadline, move_by=move_by))


def test_a_new_deadline_counts_from_the_commands_time_and_rearms_only_the_deadline() -> None:
    run = Run()
    run.start()  # expense-approval: deadline P3D, a reminder every 24 h
    reminder = run.due(core.TimerKind.REMINDER)
    run.advance(5 * HOUR)
    effects = reschedule(run, deadline="PT2H")
    assert run.due(core.TimerKind.DEADLINE) == T0 + 5 * HOUR + 2 * HOUR
    assert run.due(core.TimerKind.REMINDER) == reminder
    assert [e.kind for e in effects if isinstance(e, core.DisarmTimer)] == [core.TimerKind.DEADLINE]
    assert [e.kind for e in effects if isinstance(e, core.ArmTimer)] == [core.TimerKind.DEADLINE]
    assert not [e for e in effects if isinstance(e, core.EmitAction | core.EmitOutcome)]
    assert run.wait.status is core.WaitStatus.PARKED


def test_move_by_shifts_the_current_deadline_later_or_earlier() -> None:
    run = Run()
    run.start()
    first = run.due(core.TimerKind.DEADLINE)
    reschedule(run, move_by="PT30M")
    assert run.due(core.TimerKind.DEADLINE) == first + 30 * MINUTE
    reschedule(run, move_by="-PT2H")
    assert run.due(core.TimerKind.DEADLINE) == first + 30 * MINUTE - 2 * HOUR


def test_the_trace_says_who_moved_the_deadline_from_when_to_when_and_why() -> None:
    run = Run()
    run.start()
    reschedule(run, move_by="PT30M", reason="vendor on holiday", operator="sam")
    entry = run.wait.trace[-1]
    assert entry.event == "rescheduled"
    assert "vendor on holiday" in entry.detail and "by sam" in entry.detail
    assert "+30 min" in entry.detail
    assert "2023-11-17 22:13:20Z -> 2023-11-17 22:43:20Z" in entry.detail


def test_the_moved_deadline_is_the_one_that_escalates() -> None:
    run = Run()
    run.start()
    reschedule(run, deadline="PT1H")
    run.fire(core.TimerKind.DEADLINE)
    assert run.now == T0 + HOUR
    assert run.wait.level == 1
    assert actions(run.history[-1], core.ActionKind.RUN_ESCALATION)


def test_rescheduling_acts_on_the_wait_as_it_is_at_the_commands_time() -> None:
    # The manager's deadline (3 d) passed before the command: it fired first, and the
    # command moves the director's deadline (level 1, 12 h from the escalation).
    run = Run()
    run.start()
    run.advance(3 * DAY + HOUR)
    effects = reschedule(run, move_by="PT1H")
    assert actions(effects, core.ActionKind.RUN_ESCALATION)
    assert run.wait.level == 1
    assert run.due(core.TimerKind.DEADLINE) == T0 + 3 * DAY + 12 * HOUR + HOUR


def test_a_suspended_wait_gets_the_new_time_left_when_it_resumes() -> None:
    run = Run()
    run.start()
    run.advance(DAY)
    run.command(core.CommandKind.SUSPEND, reason="audit")
    run.advance(10 * DAY)
    effects = reschedule(run, deadline="PT4H")
    assert not [e for e in effects if isinstance(e, core.ArmTimer | core.EmitAction)]
    assert run.wait.status is core.WaitStatus.SUSPENDED
    assert run.wait.trace[-1].event == "rescheduled"
    reschedule(run, move_by="PT1H")
    run.advance(HOUR)
    run.command(core.CommandKind.RESUME)
    assert run.due(core.TimerKind.DEADLINE) == run.now + 5 * HOUR


def test_a_done_wait_is_refused_late_and_keeps_its_state() -> None:
    run = Run()
    run.start()
    run.reply()
    before = run.slot
    reject = the_reject(reschedule(run, deadline="PT2H"))
    assert reject.reason is core.RejectReason.LATE
    assert run.slot == before


@pytest.mark.parametrize("suspended", [False, True])
def test_a_deadline_moved_into_the_past_is_refused_deadline_passed(suspended: bool) -> None:
    run = Run()
    run.start()
    run.advance(20 * HOUR)  # before the first reminder: nothing fires on the way
    if suspended:
        run.command(core.CommandKind.SUSPEND)
    before = run.slot
    reject = the_reject(reschedule(run, move_by="-P3D"))
    assert reject.reason is core.RejectReason.DEADLINE_PASSED
    assert run.slot == before


@pytest.mark.parametrize(("deadline", "move_by", "found"), [
    (None, None, "neither"),
    ("PT1H", "PT1H", "deadline and moveBy"),
    ("soon", None, "'soon'"),
    (None, "P1M", "calendar"),
    ("PT0S", None, "positive"),
])
def test_a_malformed_reschedule_is_an_invalid_command_that_changes_nothing(
        deadline: str | None, move_by: str | None, found: str) -> None:
    run = Run()
    run.start()
    before = run.slot
    reject = the_reject(reschedule(run, deadline=deadline, move_by=move_by))
    assert reject.reason is core.RejectReason.INVALID_COMMAND
    assert found in reject.detail
    assert run.slot == before


def test_a_wait_in_review_has_no_deadline_to_move() -> None:
    run = Run()
    run.start()
    run.reply('{"decision": "maybe"}')
    reject = the_reject(reschedule(run, deadline="PT2H"))
    assert reject.reason is core.RejectReason.INVALID_COMMAND
    assert "in review" in reject.detail


def test_a_reschedule_that_overtook_its_request_is_applied_when_the_wait_parks() -> None:
    run = Run()
    reschedule(run, deadline="PT6H")
    assert run.slot is not None and run.slot.wait is None
    run.advance(MINUTE)
    run.start()
    assert run.due(core.TimerKind.DEADLINE) == T0 + MINUTE + 6 * HOUR
    assert run.wait.trace[-1].event == "rescheduled"


def test_a_held_reschedule_survives_the_stored_form() -> None:
    run = Run()
    reschedule(run, move_by="-PT5M", reason="r", operator="o")
    assert run.slot is not None
    assert core.decode_slot(core.encode_slot(run.slot)) == run.slot
    (held,) = run.slot.early_commands
    assert (held.command.deadline, held.command.move_by) == (None, "-PT5M")


def test_a_chained_waits_current_stage_deadline_is_the_one_moved() -> None:
    run = Run()
    run.start("two-stage-approval")
    run.reply('{"decision": "approved"}', channel="portal")
    assert run.wait.stage == 1
    reschedule(run, deadline="PT3H")
    assert run.due(core.TimerKind.DEADLINE) == run.now + 3 * HOUR
    run.fire(core.TimerKind.DEADLINE)
    assert (run.wait.stage, run.wait.level, run.wait.status) == (1, 1, core.WaitStatus.PARKED)
