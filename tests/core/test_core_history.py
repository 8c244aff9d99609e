"""Rule 10 and 5: a finished wait shows its history until purged; the operator's words
reach the outcome as fields."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from streams import core
from streams.core import catch_up, decide
from streams.core.rules import emitted_trace
from tests.core.core_harness import APPROVED, DAY, DEFINITIONS, HOUR, KEY, MINUTE, Run
from tests.core.picking import the_outcome
from tests.core.programs import Op
from tests.core.test_core_properties import DATA, program, run_program

pytestmark = [pytest.mark.rule5, pytest.mark.rule10]


def test_a_finished_wait_keeps_its_outcome_response_and_trace_until_purged() -> None:
    run = Run()
    run.start(payload='{"expense": 42}')
    run.advance(HOUR)
    outcome = the_outcome(run.reply())
    w = run.wait
    assert w.status is core.WaitStatus.DONE
    assert (w.outcome, w.reason, w.ended_at) == (outcome.outcome, outcome.reason,
                                                  outcome.ended_at)
    assert w.response_data == outcome.response_data == APPROVED
    assert w.response_valid is True
    assert emitted_trace(w) == outcome.trace
    assert w.payload == '{"expense": 42}'
    assert [t.kind for t in w.timers] == [core.TimerKind.RETENTION]
    assert core.decode_slot(core.encode_slot(run.slot)) == run.slot  # type: ignore[arg-type]
    run.fire(core.TimerKind.RETENTION)
    assert run.slot is None


def _accepted_in_review() -> Run:
    """A wait whose invalid reply rita accepted in review, with a note and a reason."""
    run = Run()
    run.start()
    run.reply('{"decision": "maybe"}')
    run.send(core.Command(KEY, core.CommandKind.REVIEW, review_outcome="Accept",
                          review_note="ok by me", operator="rita", reason="checked by phone"))
    return run


def test_a_review_is_kept_with_its_issue_note_and_reviewer() -> None:
    run = _accepted_in_review()
    w = run.wait
    assert (w.review_outcome, w.review_note, w.response_valid) == ("Accept", "ok by me", False)
    assert w.validation_issue
    assert (w.operator, w.operator_reason) == ("rita", "checked by phone")


def test_a_large_payload_is_not_kept_once_the_wait_is_done() -> None:
    big = '"' + "x" * core.KEPT_PAYLOAD_BYTES + '"'
    run = Run()
    run.start(payload=big)
    assert run.wait.payload == big
    run.reply()
    assert run.wait.payload is None and run.wait.payload_dropped


def test_a_cancel_names_the_operator_and_their_reason_in_the_outcome() -> None:
    run = Run()
    run.start()
    outcome = the_outcome(run.command(core.CommandKind.CANCEL, reason="duplicate expense"))
    assert outcome.reason is core.OutcomeReason.CANCELLED_BY_OPERATOR
    assert (outcome.operator, outcome.operator_reason) == ("olga", "duplicate expense")
    assert (run.wait.operator, run.wait.operator_reason) == ("olga", "duplicate expense")


def test_a_delivered_reply_names_who_delivered_it() -> None:
    run = Run()
    run.start()
    outcome = the_outcome(run.command(core.CommandKind.DELIVER, response_data=APPROVED,
                                      reason="phoned in"))
    assert outcome.outcome is core.OutcomeKind.RECEIVED
    assert outcome.reason is core.OutcomeReason.DELIVERED
    assert (outcome.operator, outcome.operator_reason) == ("olga", "phoned in")


def test_a_delivery_recorded_while_suspended_names_the_deliverer_not_who_resumed() -> None:
    run = Run()
    run.start()
    run.send(core.Command(KEY, core.CommandKind.SUSPEND, reason="audit", operator="ann"))
    run.send(core.Command(KEY, core.CommandKind.DELIVER, response_data=APPROVED, reason="by mail",
                          operator="ben"))
    assert core.decode_slot(core.encode_slot(run.slot)) == run.slot  # type: ignore[arg-type]
    outcome = the_outcome(run.send(core.Command(KEY, core.CommandKind.RESUME, operator="cid")))
    assert (outcome.operator, outcome.operator_reason) == ("ben", "by mail")


def test_a_reply_or_a_deadline_ends_a_wait_without_an_operator() -> None:
    run = Run()
    run.start()
    run.send(core.Command(KEY, core.CommandKind.SUSPEND, reason="audit", operator="ann"))
    run.reply()
    replied = the_outcome(run.send(core.Command(KEY, core.CommandKind.RESUME, operator="cid")))
    assert (replied.operator, replied.operator_reason) == (None, None)
    late = Run()
    late.start()
    late.advance(5 * DAY)
    escalated = the_outcome(late.send(core.Command(KEY, core.CommandKind.CANCEL, operator="x")))
    # The deadlines passed before the cancel: they ended it, not the operator.
    assert escalated.outcome is core.OutcomeKind.ESCALATED
    assert escalated.operator is None


def _added(before: core.Wait, after: core.Wait) -> tuple[core.TraceEntry, ...]:
    """The trace entries `after` has that `before` had not (the trace drops from its middle)."""
    count = (len(after.trace) + after.trace_dropped) - (len(before.trace) + before.trace_dropped)
    return after.trace[len(after.trace) - count:] if count > 0 else ()


def _signed(entry: core.TraceEntry, reason: str | None, operator: str | None) -> bool:
    return (f"(by {operator or 'unknown operator'})" in entry.detail
            and (reason or "no reason given") in entry.detail)


def test_a_resume_records_who_resumed_and_why_in_the_trace() -> None:
    run = Run()
    run.start()
    run.command(core.CommandKind.SUSPEND, reason="audit")
    run.advance(2 * MINUTE)
    run.send(core.Command(KEY, core.CommandKind.RESUME, reason="audit closed", operator="cid"))
    entry = run.wait.trace[-1]
    assert entry.event == "resumed"
    assert entry.detail == "after 2 min suspended: audit closed (by cid)"


def test_a_resume_without_reason_or_operator_says_so_in_the_trace() -> None:
    run = Run()
    run.start()
    run.command(core.CommandKind.SUSPEND, reason="audit")
    run.send(core.Command(KEY, core.CommandKind.RESUME))
    assert run.wait.trace[-1].detail.endswith(": no reason given (by unknown operator)")


def test_a_review_records_the_reviewer_their_note_and_reason_in_the_trace() -> None:
    run = _accepted_in_review()
    (reviewed,) = [e for e in run.wait.trace if e.event == "reviewed"]
    assert reviewed.detail == "Accept: ok by me; checked by phone (by rita)"


COMMANDS = [*core.CommandKind, *[core.CommandKind.RESUME] * 2, *[core.CommandKind.REVIEW] * 4]
words = st.none() | st.text(st.characters(codec="utf-8"),
                            min_size=1, max_size=12)
NEWER = core.DefinitionSet({n: dataclasses.replace(d, version=f"{d.version}-next")
                            for n, d in DEFINITIONS.items()}, tuple(DEFINITIONS.values()))
"""Each definition with a newer version loaded beside it: a MIGRATE has somewhere to go."""


def _prelude(world_slot: core.Slot | None, now: int, how: str | None) -> core.Slot | None:
    """Put the wait where RESUME or REVIEW applies (suspended; a reply under review)."""
    if how is None or world_slot is None or world_slot.wait is None:
        return world_slot
    event = (core.Command(KEY, core.CommandKind.SUSPEND, reason="audit", operator="ann")
             if how == "suspend" else core.Reply(KEY, "{broken", tenant="acme", channel=(
                 *DEFINITIONS[world_slot.wait.definition].channels, "portal")[0]))
    return decide(world_slot, event, now, NEWER).slot


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program, st.sampled_from([None, "suspend", "review"]), st.sampled_from(COMMANDS),
       words, words, st.sampled_from(["Accept", "Submit Correction"]), st.sampled_from(DATA),
       st.sampled_from([None, "PT1H", "-PT30M"]), st.integers(0, 2 * DAY))
def test_every_command_that_changes_a_wait_records_its_operator_and_reason_in_the_trace(
    case: tuple[str, list[Op]], prelude: str | None, kind: core.CommandKind, reason: str | None,
    operator: str | None, review: str, data: str, shift: str | None, later: int,
) -> None:
    """Whatever the wait went through, a command it takes (not refused, not a no-op) adds a
    trace entry that names the operator and carries the reason, as the operator typed them."""
    definition, ops = case
    world = run_program(definition, ops, via_codec=False)
    slot = _prelude(world.slot, world.now, prelude)
    now = world.now + later
    aged = catch_up(slot, now, NEWER)
    if aged.slot is None or aged.slot.wait is None or aged.slot.wait.status is core.WaitStatus.DONE:
        return
    rescheduling = kind is core.CommandKind.RESCHEDULE
    cmd = core.Command(KEY, kind, reason=reason, operator=operator, review_outcome=review,
                       review_note=None, response_data=data,
                       deadline="PT1H" if rescheduling and shift is None else None,
                       move_by=shift if rescheduling else None)
    decision = decide(slot, cmd, now, NEWER)
    timers = (core.ArmTimer, core.DisarmTimer, core.Purge)
    by_time = [e for e in aged.effects if not isinstance(e, timers)]
    own = [e for e in decision.effects if not isinstance(e, timers)][len(by_time):]
    if any(isinstance(e, core.Reject | core.Discard) for e in own):
        return  # refused or a no-op: the Rejected record (or the discard) says why
    assert decision.slot is not None and decision.slot.wait is not None
    added = _added(aged.slot.wait, decision.slot.wait)
    assert any(_signed(e, reason, operator) for e in added), (kind, added)
    event(f"took {kind.value}")
