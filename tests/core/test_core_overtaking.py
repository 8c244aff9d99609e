"""Rules 2 and 7 together: input that overtook its request still races by the broker's clock.

A reply (or command) can reach Kafka before its request: the request is
stamped ``requestedAt`` when the business event happened and sent later, or
the ``requests`` and ``replies`` partitions have different leaders.  The wait
parks at ``requestedAt``, so its deadline may have been due before the held
reply was appended.  Each held record is decided at its own append time, in
append order, after the timers due before it - exactly as if the request had
been there first.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams import core
from streams.core import catch_up, decide
from streams.definitions import load_definitions
from tests.core.core_harness import APPROVED, KEY, MINUTE, REPO, SECOND, T0, Run
from tests.core.picking import actions, the_outcome, the_reject

pytestmark = [pytest.mark.rule2, pytest.mark.rule7]

RACE = load_definitions(REPO / "tests" / "e2e" / "waits")
"""``race``: deadline PT2S, no reminder, no escalation level: the deadline ends the wait."""


def test_a_held_reply_appended_after_the_deadline_loses_to_it() -> None:
    # The case: reply appended at r, request appended at r + 1 s and
    # stamped r - 5 s with a PT3S deadline, due at r - 2 s.
    run = Run(RACE)
    r = run.now
    run.reply(reply_id="overtook")
    run.advance(SECOND)
    effects = run.start("race", requested_at=r - 5 * SECOND, deadline="PT3S")
    outcome = the_outcome(effects)
    assert (outcome.outcome, outcome.reason) == (core.OutcomeKind.ESCALATED,
                                                  core.OutcomeReason.DEADLINE_EXHAUSTED)
    assert outcome.ended_at == r - 2 * SECOND
    late = the_reject(effects)
    assert late.reason is core.RejectReason.LATE
    assert late.reply is not None and late.reply.reply_id == "overtook"
    assert run.wait.status is core.WaitStatus.DONE


def test_a_held_reply_appended_before_the_deadline_still_wins() -> None:
    run = Run(RACE)
    r = run.now
    run.reply()
    run.advance(SECOND)
    effects = run.start("race", requested_at=r - 2 * SECOND, deadline="PT3S")
    outcome = the_outcome(effects)
    assert outcome.outcome is core.OutcomeKind.RECEIVED
    assert outcome.reason is core.OutcomeReason.REPLY_VALID
    assert outcome.ended_at == r
    assert not [e for e in effects if isinstance(e, core.Reject)]


def test_a_held_reply_is_decided_at_its_append_time_in_the_trace() -> None:
    run = Run()
    run.reply()
    run.advance(30 * SECOND)
    run.start(requested_at=T0 - MINUTE)
    assert run.wait.status is core.WaitStatus.DONE
    assert run.wait.ended_at == T0
    assert [(e.at, e.event) for e in run.wait.trace] == [
        (T0 - MINUTE, "requested"), (T0, "reply_valid"), (T0, "ended")]


def test_a_held_reply_after_the_managers_deadline_is_answered_at_the_directors_level() -> None:
    # expense-approval: P3D for the manager, then PT12H for the director.  A reply
    # appended 3 days 6 hours after requestedAt comes after the manager's deadline:
    # the escalation ran first, and the reply settles the director's level.
    run = Run()
    day = 24 * 60 * MINUTE
    ago = 3 * day + 6 * 60 * MINUTE
    run.reply()
    run.advance(MINUTE)
    effects = run.start(requested_at=T0 - ago)
    escalations = actions(effects, core.ActionKind.RUN_ESCALATION)
    assert [(a.level, a.at) for a in escalations] == [(1, T0 - ago + 3 * day)]
    reminders = actions(effects, core.ActionKind.SEND_REMINDER)
    assert len(reminders) == 2
    outcome = the_outcome(effects)
    assert (outcome.outcome, outcome.escalation_level, outcome.reminders_sent) == (
        core.OutcomeKind.RECEIVED, 1, 2)
    assert outcome.ended_at == T0


def test_a_held_command_after_the_deadline_finds_the_wait_escalated() -> None:
    run = Run(RACE)
    r = run.now
    run.command(core.CommandKind.CANCEL, reason="too late")
    run.advance(SECOND)
    effects = run.start("race", requested_at=r - 5 * SECOND, deadline="PT3S")
    assert the_outcome(effects).outcome is core.OutcomeKind.ESCALATED
    late = the_reject(effects)
    assert late.reason is core.RejectReason.LATE
    assert late.command is not None and late.command.command is core.CommandKind.CANCEL


def test_a_held_suspend_keeps_what_was_left_at_its_own_append_time() -> None:
    run = Run(RACE)
    r = run.now
    run.command(core.CommandKind.SUSPEND, reason="audit")
    run.advance(SECOND)
    run.start("race", requested_at=r - 2 * SECOND, deadline="PT3S")
    s = run.wait.suspension
    assert run.wait.status is core.WaitStatus.SUSPENDED and s is not None
    assert s.at == r
    assert s.remaining == ((core.TimerKind.DEADLINE, SECOND),)


def test_held_records_are_decided_in_append_order_whatever_their_arrival_numbers() -> None:
    # A reply appended first but numbered later (several inputs read out of
    # order across topics) still comes first: append time decides.
    run = Run()
    run.command(core.CommandKind.CANCEL)
    slot = run.slot
    assert slot is not None
    run.now = T0 - SECOND
    run.reply()
    run.now = T0 + SECOND
    effects = run.start(requested_at=T0 - MINUTE)
    assert the_outcome(effects).outcome is core.OutcomeKind.RECEIVED
    assert the_reject(effects).reason is core.RejectReason.LATE


def test_a_held_reply_older_than_the_wait_is_decided_as_it_parks() -> None:
    run = Run()
    run.reply()
    run.advance(MINUTE)
    effects = run.start()  # requestedAt: now, after the reply
    outcome = the_outcome(effects)
    assert outcome.outcome is core.OutcomeKind.RECEIVED and outcome.ended_at == T0 + MINUTE


# ---------------------------------------------------------------- the property

_DEFINITIONS = {**RACE, **Run().definitions}
_NAMES = ["race", "fast-approval", "expense-approval", "fast-probe"]
_DATA = [APPROVED, '{"decision": "maybe"}', "{broken", '{"resultReady": true}']

held_input = st.one_of(
    st.tuples(st.just("reply"), st.sampled_from(_DATA), st.sampled_from(["portal", "fax"])),
    st.tuples(st.just("command"),
              st.sampled_from([core.CommandKind.SUSPEND, core.CommandKind.RESUME,
                               core.CommandKind.CANCEL, core.CommandKind.DELIVER]),
              st.sampled_from(_DATA)),
)


def _event(item: tuple[object, ...]) -> core.Event:
    if item[0] == "reply":
        return core.Reply(KEY, str(item[1]), tenant="acme", channel=str(item[2]))
    kind = item[1]
    assert isinstance(kind, core.CommandKind)
    return core.Command(KEY, kind, reason="r", operator="op", response_data=str(item[2]))


def _observed(effects: tuple[object, ...]) -> list[object]:
    """What the outside world sees: actions, the outcome and rejections (by reason)."""
    seen: list[object] = []
    for e in effects:
        if isinstance(e, core.EmitAction):
            # SEND_REQUEST goes out when the request is read, whenever that is.
            at = None if e.action is core.ActionKind.SEND_REQUEST else e.at
            seen.append((e.action, e.level, e.attempt, at))
        elif isinstance(e, core.EmitOutcome):
            seen.append((e.outcome, e.reason, e.ended_at, e.response_data))
        elif isinstance(e, core.Reject):
            seen.append(e.reason)
    return seen


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    definition=st.sampled_from(_NAMES),
    lead=st.integers(0, 20 * SECOND),
    items=st.lists(st.tuples(st.integers(0, 15 * SECOND), held_input), min_size=1, max_size=6),
    request_after=st.integers(0, 2 * SECOND),
)
def test_input_held_for_its_request_ends_the_wait_as_if_the_request_came_first(
    definition: str, lead: int, items: list[tuple[int, tuple[object, ...]]],
    request_after: int,
) -> None:
    """For any replies and commands appended before their request, at any times after
    ``requestedAt``: what the world sees equals deciding the request first (at its
    ``requestedAt``) and then every record at its own append time, timers firing
    on time in between."""
    requested_at = T0 - lead
    appended = sorted(((requested_at + at, _event(item)) for at, item in items),
                      key=lambda pair: pair[0])
    request_at = appended[-1][0] + request_after
    start = core.StartWait(KEY, definition, requested_at=requested_at, tenant="acme")

    # Held: every record decided before its request, which comes last.
    held: core.Slot | None = None
    for at, ev in appended:
        held = decide(held, ev, at, _DEFINITIONS).slot
    decision = decide(held, start, request_at, _DEFINITIONS)
    final_held = catch_up(decision.slot, request_at, _DEFINITIONS)
    seen_held = _observed(decision.effects) + _observed(final_held.effects)

    # In order: the request first, at requestedAt, then each record at its append time.
    decision = decide(None, start, requested_at, _DEFINITIONS)
    slot, seen_order = decision.slot, _observed(decision.effects)
    for at, ev in appended:
        decision = decide(slot, ev, at, _DEFINITIONS)
        slot = decision.slot
        seen_order += _observed(decision.effects)
    final_order = catch_up(slot, request_at, _DEFINITIONS)
    seen_order += _observed(final_order.effects)

    assert seen_held == seen_order
    assert _ending(final_held.slot) == _ending(final_order.slot)


def _ending(slot: core.Slot | None) -> tuple[object, ...] | None:
    w = slot.wait if slot is not None else None
    return None if w is None else (w.status, w.outcome, w.reason, w.ended_at, w.response_data)
