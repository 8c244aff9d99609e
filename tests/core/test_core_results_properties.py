"""Rule 12 over random interleavings: retries never exceed the policy, a reply still wins
against a pending retry, nothing is decided while suspended, and results are decided by
the broker's clock (rule 2) like every other input."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams import core
from streams.core import catch_up
from tests.core.core_harness import DAY, DEFINITIONS, HOUR, KEY, MINUTE, T0
from tests.core.programs import (
    Op,
    Program,
    assert_nothing_decided_while_suspended,
    assert_refusals_say_why,
    expand_pauses,
    observed,
    status,
)

pytestmark = [pytest.mark.rule12]

VALID = {
    "expense-approval": '{"decision": "approved"}',
    "vendor-quote": '{"amount": 3, "currency": "EUR"}',
    "first-valid": '{"price": 5}',
    "probe": '{"resultReady": true}',
    "two-stage-approval": '{"decision": "rejected"}',
}
TRACKED = (core.ActionKind.SEND_REQUEST, core.ActionKind.SEND_REMINDER,
           core.ActionKind.RUN_ESCALATION)

advance = st.tuples(st.just("advance"), st.integers(0, 2 * HOUR) | st.integers(0, 2 * DAY))
reply = st.tuples(st.just("reply"), st.booleans(), st.integers(0, 5))
fire = st.tuples(st.just("fire"), st.integers(0, 5))
result = st.tuples(st.just("result"), st.integers(0, 40), st.sampled_from(list(core.ResultStatus)),
                   st.booleans(), st.sampled_from([False, False, False, True]))
"""A result of one of the latest actions sent (or, one time in four, of none)."""
pause = st.tuples(st.just("pause"), st.integers(0, DAY), st.none() | result)
cancel = st.tuples(st.just("cancel"))
op = st.one_of(*[advance] * 4, reply, *[fire] * 3, *[result] * 6, pause, pause) | \
    st.one_of(*[advance] * 12, cancel)
"""Results often, replies and cancels seldom: most waits live long enough to retry."""
policy = st.tuples(st.sampled_from([None, core.SendFailureRoute.ESCALATE,
                                    core.SendFailureRoute.REVIEW]),
                   st.integers(0, 3), st.sampled_from([MINUTE, HOUR, DAY]))


def _expand(ops: list[Op]) -> list[Op]:
    return expand_pauses(ops, ("suspend",), ("resume",))


FAIL_FIRST: Op = ("result", 0, core.ResultStatus.FAILED, False, False)
"""The request's delivery fails at once: most programs then have a retry pending."""
program = st.tuples(st.sampled_from(sorted(VALID)), policy,
                    st.tuples(st.booleans(), st.lists(op, min_size=1, max_size=40)).map(
                        lambda p: _expand([FAIL_FIRST, *p[1]] if p[0] else p[1])))


def _definitions(route: core.SendFailureRoute | None, retries: int,
                 backoff: int) -> dict[str, core.WaitDefinition]:
    p = None if route is None else core.SendFailurePolicy(retries, backoff, route)
    return {n: dataclasses.replace(d, on_send_failure=p) for n, d in DEFINITIONS.items()}


@dataclass
class World(Program):
    sent: list[core.EmitAction] = field(default_factory=list)

    def decide(self, event: core.Event, *, via_codec: bool = False) -> tuple[core.Effect, ...]:
        """Program.decide, and every request, reminder and escalation sent kept."""
        effects = super().decide(event, via_codec=via_codec)
        self.sent += [e for e in effects if isinstance(e, core.EmitAction) and e.action in TRACKED]
        return effects

    def event_of(self, o: Op) -> core.Event | None:
        kind = o[0]
        if kind == "reply":
            d = self.definitions[self.definition]
            data = VALID[self.definition] if o[1] else "{broken"
            party = d.parties[int(o[2]) % len(d.parties)] if d.parties else None
            key = KEY if party is None else f"{KEY}~{party}"
            return core.Reply(key, data, tenant="acme", channel=(d.channels or ("portal",))[0])
        if kind == "fire":
            return self.fire(int(o[1]))
        if kind == "result":
            _, index, status, permanent, unknown = o
            # What was sent by now, including what time alone sends by now (rule 2: a
            # result picks from the same actions however late timer records come).
            aged = catch_up(self.slot, self.now, self.definitions)
            candidates = self.sent + [e for e in aged.effects
                                      if isinstance(e, core.EmitAction) and e.action in TRACKED]
            if unknown or not candidates:
                return core.ActionResult(KEY, f"unknown-{index}", status, error="e")
            a = candidates[-1 - int(index) % min(3, len(candidates))]
            return core.ActionResult(a.correlation_key, a.action_id, status,
                                     error=f"error {index}", permanent=bool(permanent))
        if kind == "cancel":
            return core.Command(KEY, core.CommandKind.CANCEL, reason="r", operator="op")
        command = core.CommandKind.SUSPEND if kind == "suspend" else core.CommandKind.RESUME
        return core.Command(KEY, command, reason="r", operator="op")


def run_program(definition: str, definitions: dict[str, core.WaitDefinition], ops: list[Op], *,
                via_codec: bool = False) -> World:
    world = World(definition, definitions)
    world.decide(core.StartWait(KEY, definition, requested_at=T0, tenant="acme"))
    for o in ops:
        event = world.event_for(o)
        if event is not None:
            world.decide(event, via_codec=via_codec)
    return world


SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(program)
def test_results_keep_the_invariants(case: tuple[str, Any, list[Op]]) -> None:
    definition, (route, retries, backoff), ops = case
    definitions = _definitions(route, retries, backoff)
    world = run_program(definition, definitions, ops)
    allowed = retries + 1 if route is not None else 1
    attempts: dict[tuple[Any, ...], list[int]] = {}
    failed_at: dict[str, int] = {}  # action id -> when its failure was decided
    outcome: core.EmitOutcome | None = None
    for step in world.steps:
        assert_refusals_say_why(step.effects)
        assert_nothing_decided_while_suspended(step)
        emitted = [e for e in step.effects if isinstance(e, core.EmitOutcome)]
        if emitted:
            assert outcome is None and len(emitted) == 1  # one outcome, ever
            outcome = emitted[0]
        event = step.event
        if isinstance(event, core.ActionResult) and event.status is core.ResultStatus.FAILED:
            failed_at.setdefault(event.action_id, step.now)
        for a in (e for e in step.effects
                  if isinstance(e, core.EmitAction) and e.action in TRACKED):
            identity = (a.action, a.correlation_key, a.level, a.party, a.attempt)
            tries = attempts.setdefault(identity, [])
            tries.append(a.send_attempt)
            # Send attempts count 1, 2, ... and never past the policy's retries.
            assert tries == list(range(1, len(tries) + 1)) and len(tries) <= allowed
            if a.send_attempt > 1:
                # A retry goes after the backoff from the failure of the attempt before...
                previous = [x for x in world.sent if x.action is a.action
                            and x.correlation_key == a.correlation_key and x.level == a.level
                            and x.party == a.party and x.attempt == a.attempt
                            and x.send_attempt == a.send_attempt - 1]
                assert previous and a.at >= failed_at[previous[0].action_id] + backoff
                # ... and a reply (or an operator) that ended the wait wins against it:
                # only an escalation of a wait that ended ESCALATED still goes out.
                if outcome is not None and outcome.ended_at <= a.at:
                    assert outcome.outcome is core.OutcomeKind.ESCALATED
                    assert a.action is core.ActionKind.RUN_ESCALATION
        # A wait whose reply is in review sends nothing again.
        if status(step.after) is core.WaitStatus.IN_REVIEW:
            assert not [e for e in step.effects if isinstance(e, core.EmitAction)
                        and e.send_attempt > 1 and e.at >= step.now]


@SETTINGS
@given(program)
def test_replaying_results_gives_the_same_states_and_effects(
        case: tuple[str, Any, list[Op]]) -> None:
    definition, (route, retries, backoff), ops = case
    definitions = _definitions(route, retries, backoff)
    first = run_program(definition, definitions, ops)
    again = run_program(definition, definitions, ops, via_codec=True)
    assert [(s.after, s.effects) for s in first.steps] == \
        [(s.after, s.effects) for s in again.steps]


visible = st.one_of(*[advance] * 3, reply, *[result] * 4, pause) | st.one_of(*[advance] * 8,
                                                                          cancel)
timeless = st.tuples(st.sampled_from(sorted(VALID)), policy,
                     st.tuples(st.booleans(), st.lists(visible, min_size=1, max_size=30)).map(
                         lambda p: _expand([FAIL_FIRST, *p[1]] if p[0] else p[1])))
def _run_with_timer_records(definition: str, definitions: dict[str, core.WaitDefinition],
                            ops: list[Op], *, punctual: bool,
                            end: int) -> tuple[core.Slot | None, list[core.Effect]]:
    world = World(definition, definitions)
    start = core.StartWait(KEY, definition, requested_at=T0, tenant="acme")
    started = observed(world.decide(start))
    slot, seen = world.replay(ops, punctual=punctual, end=end)
    return slot, started + seen


@SETTINGS
@given(timeless, st.integers(0, 5 * DAY))
def test_results_are_decided_by_when_they_were_appended_not_when_timers_arrive(
        case: tuple[str, Any, list[Op]], tail: int) -> None:
    """The same results at the same times end the same way whether each timer record
    (retries included) is processed the moment it is due, or never."""
    definition, (route, retries, backoff), ops = case
    definitions = _definitions(route, retries, backoff)
    end = T0 + sum(int(o[1]) for o in ops if o[0] == "advance") + tail
    punctual = _run_with_timer_records(definition, definitions, ops, punctual=True, end=end)
    late = _run_with_timer_records(definition, definitions, ops, punctual=False, end=end)
    assert punctual == late


def test_a_retry_storm_is_bounded_by_the_policy_even_if_every_send_fails() -> None:
    definitions = _definitions(core.SendFailureRoute.ESCALATE, 3, MINUTE)
    world = World("expense-approval", definitions)
    world.decide(core.StartWait(KEY, "expense-approval", requested_at=T0, tenant="acme"))
    for _ in range(200):
        pending = [a for a in world.sent if a.at <= world.now]
        if not pending:
            break
        a = pending[-1]
        world.decide(core.ActionResult(a.correlation_key, a.action_id, core.ResultStatus.FAILED,
                                       error="down"))
        world.now += HOUR
        armed = sorted(world.slot.armed_timers(), key=lambda t: t.due_at) \
            if world.slot is not None else []
        if armed:
            t = armed[0]
            world.now = max(world.now, t.due_at)
            world.decide(core.TimerFired(KEY, t.kind, t.due_at, t.generation))
    assert max(a.send_attempt for a in world.sent) == 4
    assert len(world.sent) <= 2 * 4 + 4  # request and escalation, reminders: each 4 at most
