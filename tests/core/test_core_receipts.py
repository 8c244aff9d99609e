"""Receipts: what became of each reply and command, derived from its decision alone.

Anchors for each verdict, then properties over the random interleavings of
test_core_properties: every reply and command gets exactly one verdict of its
family, the verdict agrees with the records the decision publishes, and the
effects it is read from are exactly the input's own (the timers fired on the
way belong to time).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from streams import core
from streams.core import catch_up, decide, receipts
from tests.core.core_harness import APPROVED, DAY, DEFINITIONS, HOUR, KEY, MINUTE, T0, Run
from tests.core.test_core_properties import SETTINGS, VALID, program, run_program

pytestmark = [pytest.mark.rule2, pytest.mark.rule5, pytest.mark.rule7, pytest.mark.rule9]

_REFUSALS = frozenset({receipts.Verdict.LATE, receipts.Verdict.DUPLICATE,
                       receipts.Verdict.TENANT_MISMATCH, receipts.Verdict.REJECTED,
                       receipts.Verdict.REFUSED})


class Receipts(Run):
    """The core harness, with the receipt of every reply and command sent."""

    def receipt(self, event: core.Reply | core.Command | core.StartWait) -> receipts.Receipt:
        before = self.slot
        decision = decide(before, event, self.now, self.definitions)
        self.slot = decision.slot
        self.history.append(decision.effects)
        return receipts.receipt_for(before, event, decision, self.now, self.definitions)

    def reply_receipt(self, data: str = APPROVED, **kw: Any) -> receipts.Receipt:
        fields: dict[str, object] = {"correlation_key": KEY, "response_data": data,
                                     "tenant": "acme", "channel": "portal"}
        fields.update(kw)
        return self.receipt(core.Reply(**fields))  # type: ignore[arg-type]

    def command_receipt(self, kind: core.CommandKind, **kw: object) -> receipts.Receipt:
        return self.receipt(core.Command(KEY, kind, reason="r", operator="op",
                                         **kw))  # type: ignore[arg-type]


# -- anchors: one per verdict ------------------------------------------------------


def test_a_valid_reply_to_a_parked_wait_won_and_names_its_outcome() -> None:
    run = Receipts()
    run.start()
    run.advance(HOUR)
    got = run.reply_receipt()
    [outcome] = [e for e in run.history[-1] if isinstance(e, core.EmitOutcome)]
    assert got.verdict is receipts.Verdict.WON
    assert (got.outcome, got.outcome_reason, got.outcome_id) == (
        "RECEIVED", "reply_valid", outcome.outcome_id)
    assert got.ended_at == got.decided_at == T0 + HOUR


def test_a_reply_after_the_last_deadline_is_late_and_says_when_the_wait_ended() -> None:
    run = Receipts()
    run.start()
    ended = T0 + 3 * DAY + 12 * HOUR  # P3D, then the director's PT12H
    run.advance(5 * DAY)  # no timer was fired: the reply's own decision fires them
    got = run.reply_receipt()
    assert got.verdict is receipts.Verdict.LATE and got.reason == "late"
    assert got.ended_at == ended and got.decided_at == T0 + 5 * DAY
    assert got.detail is not None and got.detail.startswith("Expected a wait still waiting")


def test_a_reply_before_its_request_is_held_until_the_early_reply_ttl() -> None:
    run = Receipts()
    got = run.reply_receipt()
    longest = max(d.early_reply_ttl_ms for d in DEFINITIONS.values())
    assert got.verdict is receipts.Verdict.HELD and got.held_until == T0 + longest


def test_a_reply_to_a_suspended_wait_is_held_without_an_expiry() -> None:
    run = Receipts()
    run.start()
    run.command_receipt(core.CommandKind.SUSPEND)
    got = run.reply_receipt()
    assert got.verdict is receipts.Verdict.HELD and got.held_until is None
    assert run.wait.status is core.WaitStatus.SUSPENDED and len(run.wait.held) == 1


def test_an_invalid_reply_goes_to_review_with_its_validation_issue() -> None:
    run = Receipts()
    run.start()
    got = run.reply_receipt('{"decision": "maybe"}')
    [review] = [e for e in run.history[-1] if isinstance(e, core.EmitAction)]
    assert got.verdict is receipts.Verdict.IN_REVIEW and got.action_id == review.action_id
    assert got.validation_issue is not None and "maybe" in got.validation_issue
    assert got.validation_issue == run.wait.validation_issue


def test_an_invalid_probe_result_escalates_where_the_definition_says_so() -> None:
    run = Receipts()
    run.start("probe")
    got = run.reply_receipt('{"resultReady": "x"}', channel="poller")
    assert got.verdict is receipts.Verdict.ESCALATED and got.validation_issue is not None


def test_a_probe_result_not_yet_ready_is_recorded() -> None:
    run = Receipts()
    run.start("probe")
    got = run.reply_receipt('{"resultReady": false}', channel="poller")
    assert got.verdict is receipts.Verdict.RECORDED and got.detail is not None
    assert run.wait.status is core.WaitStatus.PARKED


@pytest.mark.parametrize(("change", "verdict"), [
    ({"tenant": "globex"}, receipts.Verdict.TENANT_MISMATCH),
    ({"correlation_key": f"{KEY}~nobody"}, receipts.Verdict.REJECTED),
])
def test_a_reply_the_wait_refuses_names_the_rejection(change: dict[str, Any],
                                                       verdict: receipts.Verdict) -> None:
    run = Receipts()
    run.start()
    got = run.reply_receipt(**change)
    [reject] = [e for e in run.history[-1] if isinstance(e, core.Reject)]
    assert got.verdict is verdict
    assert (got.reason, got.detail) == (reject.reason.value, reject.detail)


def test_a_reply_id_seen_before_is_a_duplicate() -> None:
    run = Receipts()
    run.start("probe")
    assert run.reply_receipt('{"resultReady": false}', channel="poller",
                             reply_id="r1").verdict is receipts.Verdict.RECORDED
    assert run.reply_receipt('{"resultReady": true}', channel="poller",
                             reply_id="r1").verdict is receipts.Verdict.DUPLICATE


def test_the_winning_party_of_a_first_valid_wait_is_named() -> None:
    run = Receipts()
    run.start("first-valid")
    got = run.reply_receipt('{"price": 5}', correlation_key=f"{KEY}~carrier-b")
    assert got.verdict is receipts.Verdict.WON and got.party == "carrier-b"


def test_a_chained_stage_settled_by_a_reply_won_without_ending_the_wait() -> None:
    run = Receipts()
    run.start("two-stage-approval")
    got = run.reply_receipt('{"decision": "approved"}')
    assert got.verdict is receipts.Verdict.WON and got.outcome is None
    assert got.detail == "stage_completed: manager (reply_valid)" and run.wait.stage == 1


def test_commands_are_applied_unchanged_held_or_refused() -> None:
    run = Receipts()
    early = run.command_receipt(core.CommandKind.SUSPEND)
    assert early.verdict is receipts.Verdict.HELD and early.held_until is not None
    run = Receipts()
    run.start()
    applied = run.command_receipt(core.CommandKind.SUSPEND)
    assert applied.verdict is receipts.Verdict.APPLIED and applied.detail is not None
    assert applied.detail.startswith("suspended")
    again = run.command_receipt(core.CommandKind.SUSPEND)
    assert (again.verdict, again.reason) == (receipts.Verdict.UNCHANGED, "already_suspended")
    moved = run.command_receipt(core.CommandKind.RESCHEDULE, deadline="PT1H")
    assert moved.verdict is receipts.Verdict.APPLIED
    refused = run.command_receipt(core.CommandKind.MIGRATE, version="no-such-version")
    assert (refused.verdict, refused.reason) == (receipts.Verdict.REFUSED, "unknown_definition")
    resumed = run.command_receipt(core.CommandKind.RESUME)
    assert resumed.verdict is receipts.Verdict.APPLIED
    cancelled = run.command_receipt(core.CommandKind.CANCEL)
    assert (cancelled.verdict, cancelled.outcome, cancelled.outcome_reason) == (
        receipts.Verdict.APPLIED, "CANCELLED", "cancelled_by_operator")
    late = run.command_receipt(core.CommandKind.CANCEL)
    assert (late.verdict, late.reason) == (receipts.Verdict.REFUSED, "late")
    assert late.ended_at == cancelled.ended_at


def test_a_delivery_to_a_suspended_wait_is_held() -> None:
    run = Receipts()
    run.start()
    run.command_receipt(core.CommandKind.SUSPEND)
    got = run.command_receipt(core.CommandKind.DELIVER, response_data=APPROVED)
    assert got.verdict is receipts.Verdict.HELD and got.held_until is None


def test_a_record_refused_before_any_decision_is_rejected_or_refused_by_its_kind() -> None:
    assert receipts.refusal(True, "undecodable", "x", 5) == receipts.Receipt(
        receipts.Verdict.REJECTED, 5, "undecodable", "x")
    assert receipts.refusal(False, "too_large", "y", 6).verdict is receipts.Verdict.REFUSED


# -- properties ----------------------------------------------------------------------


@SETTINGS
@given(program)
def test_every_reply_and_command_gets_one_verdict_that_agrees_with_its_records(
    case: tuple[str, list[tuple[object, ...]]]
) -> None:
    definition, ops = case
    world = run_program(definition, ops, via_codec=False)
    for step in world.steps:
        event = step.event
        if not isinstance(event, core.Reply | core.Command):
            continue
        decision = decide(step.before, event, step.now, DEFINITIONS)
        assert decision.effects == step.effects  # decided alike: a pure function
        receipt = receipts.receipt_for(step.before, event, decision, step.now, DEFINITIONS)
        family = (receipts.REPLY_VERDICTS if isinstance(event, core.Reply)
                  else receipts.COMMAND_VERDICTS)
        assert receipt.verdict in family
        assert receipt.decided_at == step.now

        # The input's own effects follow exactly what time alone did by then.
        bookkeeping = (core.ArmTimer, core.DisarmTimer, core.Purge)
        plain = [e for e in step.effects if not isinstance(e, bookkeeping)]
        aged = catch_up(step.before, step.now, DEFINITIONS)
        by_time = [e for e in aged.effects if not isinstance(e, bookkeeping)]
        own, met = receipts.own_effects(step.before, decision, step.now, DEFINITIONS)
        assert plain[:len(by_time)] == by_time and list(own) == plain[len(by_time):]
        assert met == (aged.slot.wait if aged.slot is not None else None)

        mine = [e for e in own if isinstance(e, core.Reject) and e.reply is None
                and e.command is None and e.result is None]
        assert len(mine) <= 1
        if receipt.verdict in _REFUSALS:  # exactly when a Rejected names the input
            assert [(receipt.reason, receipt.detail)] == [(e.reason.value, e.detail)
                                                          for e in mine]
            if receipt.verdict is receipts.Verdict.LATE:
                assert receipt.ended_at is None or receipt.ended_at <= step.now
            continue
        assert mine == []
        after = step.after.wait if step.after is not None else None
        outcomes = [e for e in own if isinstance(e, core.EmitOutcome)]
        if receipt.outcome_id is not None:
            assert receipt.outcome_id in {o.outcome_id for o in outcomes}
            assert after is not None and after.status is core.WaitStatus.DONE
        if receipt.verdict is receipts.Verdict.HELD:
            assert receipt.outcome is None
            if receipt.held_until is not None:  # before its request
                held = core.BufferEarlyReply | core.BufferEarlyCommand
                assert met is None and any(isinstance(e, held) for e in own)
            else:  # kept by a suspended wait
                assert met is not None and met.status is core.WaitStatus.SUSPENDED
                assert after is not None and len(after.held) == len(met.held) + 1
        elif receipt.verdict is receipts.Verdict.WON:
            assert outcomes or (after is not None and met is not None
                                and after.stage == met.stage + 1)
        elif receipt.verdict is receipts.Verdict.IN_REVIEW:
            assert after is not None and after.status is core.WaitStatus.IN_REVIEW
            assert any(isinstance(e, core.EmitAction) and e.action is core.ActionKind.REVIEW_NEEDED
                       and e.action_id == receipt.action_id for e in own)
        elif receipt.verdict is receipts.Verdict.ESCALATED:
            assert receipt.validation_issue is not None
        elif receipt.verdict is receipts.Verdict.RECORDED:
            assert not outcomes and after is not None and after.status is core.WaitStatus.PARKED
        elif receipt.verdict is receipts.Verdict.UNCHANGED:
            assert any(isinstance(e, core.Discard) for e in own)
            assert step.after == aged.slot or step.after == step.before


@SETTINGS
@given(definition=st.sampled_from(sorted(VALID)), delay=st.integers(0, 12 * DAY),
       override=st.sampled_from([None, "PT1M", "PT2H", "P2D"]), data_i=st.integers(0, 3))
def test_a_reply_appended_after_its_wait_ended_is_late_and_one_before_is_never_late(
    definition: str, delay: int, override: str | None, data_i: int
) -> None:
    run = Receipts()
    run.start(definition, deadline=override)
    run.advance(delay)
    d = DEFINITIONS[definition]
    aged = catch_up(run.slot, run.now, DEFINITIONS)
    met = aged.slot.wait if aged.slot is not None else None
    assume(met is not None)
    assert met is not None
    ended = met.ended_at if met.status is core.WaitStatus.DONE else None
    party = d.parties[data_i % len(d.parties)] if d.parties else None
    key = KEY if party is None else f"{KEY}~{party}"
    channel = d.channels[data_i % len(d.channels)] if d.channels else "poller"
    data = VALID[definition][data_i % len(VALID[definition])]
    got = run.reply_receipt(data, correlation_key=key, channel=channel)
    if ended is not None:
        assert got.verdict is receipts.Verdict.LATE
        assert got.ended_at == ended <= run.now
    else:
        assert got.verdict in (receipts.Verdict.WON, receipts.Verdict.RECORDED)


@SETTINGS
@given(kind=st.sampled_from(list(core.CommandKind)), data=st.booleans(),
       at=st.integers(0, 30 * MINUTE))
def test_any_command_before_its_request_is_held_until_the_longest_ttl(
    kind: core.CommandKind, data: bool, at: int
) -> None:
    run = Receipts()
    run.advance(at)
    got = run.command_receipt(kind, response_data=APPROVED if data else None)
    longest = max(d.early_reply_ttl_ms for d in DEFINITIONS.values())
    assert got.verdict is receipts.Verdict.HELD and got.held_until == run.now + longest
