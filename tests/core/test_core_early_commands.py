"""Rule 7 for commands: an operator's command can overtake its request too.

Commands and requests travel on different topics, so a SUSPEND or CANCEL sent
right after a request (or while the requests topic has a backlog) may be
processed first.  It is held like an early reply, for the early-reply TTL,
and applied, in append order and each at its own append time, when the request parks the wait.
"""

from __future__ import annotations

import pytest

from streams import core
from streams.core import decide
from tests.core.core_harness import APPROVED, MINUTE, T0, Run
from tests.core.picking import outcomes, rejects, the_outcome, the_reject

pytestmark = [pytest.mark.rule7]


def test_a_command_before_its_request_is_held_not_rejected() -> None:
    run = Run()
    effects = run.command(core.CommandKind.SUSPEND, reason="audit")
    (held,) = [e for e in effects if isinstance(e, core.BufferEarlyCommand)]
    assert held.expires_at == T0 + 10 * MINUTE
    assert not rejects(effects)
    assert run.slot is not None and run.slot.wait is None
    assert run.due(core.TimerKind.EARLY_REPLY) == T0 + 10 * MINUTE


def test_an_early_suspend_suspends_the_wait_as_its_request_parks_it() -> None:
    run = Run()
    run.command(core.CommandKind.SUSPEND, reason="audit")
    run.advance(MINUTE)
    run.start()
    assert run.wait.status is core.WaitStatus.SUSPENDED
    assert run.wait.suspension is not None and run.wait.suspension.reason == "audit"
    assert run.slot is not None and run.slot.early_commands == ()
    # Suspended from the start: no timer runs, and resume restores the full deadline.
    assert not run.wait.timers
    run.advance(5 * MINUTE)
    run.command(core.CommandKind.RESUME)
    resumed = run.wait
    assert resumed.status is core.WaitStatus.PARKED and resumed.timers


def test_an_early_cancel_ends_the_wait_cancelled_when_its_request_arrives() -> None:
    run = Run()
    run.command(core.CommandKind.CANCEL, reason="order withdrawn")
    effects = run.start()
    outcome = the_outcome(effects)
    assert outcome.outcome is core.OutcomeKind.CANCELLED
    assert outcome.reason is core.OutcomeReason.CANCELLED_BY_OPERATOR


def test_early_replies_and_commands_are_applied_in_the_order_they_arrived() -> None:
    # cancel first, then a reply: the cancel wins and the reply is late
    run = Run()
    run.command(core.CommandKind.CANCEL)
    run.advance(1000).reply()
    effects = run.start()
    assert the_outcome(effects).outcome is core.OutcomeKind.CANCELLED
    assert the_reject(effects).reason is core.RejectReason.LATE
    # a reply first, then a cancel: the reply wins and the cancel is late
    run = Run()
    run.reply()
    run.advance(1000).command(core.CommandKind.CANCEL)
    effects = run.start()
    assert the_outcome(effects).outcome is core.OutcomeKind.RECEIVED
    assert the_outcome(effects).response_data == APPROVED
    assert the_reject(effects).reason is core.RejectReason.LATE


def test_arrival_order_holds_within_one_millisecond() -> None:
    # A backlog is processed many records per millisecond: order is by arrival, not by clock.
    run = Run()
    run.command(core.CommandKind.CANCEL)
    run.reply()
    effects = run.start()
    assert the_outcome(effects).outcome is core.OutcomeKind.CANCELLED
    assert the_reject(effects).reason is core.RejectReason.LATE
    run = Run()
    run.reply()
    run.command(core.CommandKind.CANCEL)
    assert the_outcome(run.start()).outcome is core.OutcomeKind.RECEIVED


def test_an_early_command_past_its_ttl_becomes_unmatched_and_the_key_is_purged() -> None:
    run = Run()
    run.command(core.CommandKind.CANCEL, reason="oops")
    effects = run.fire(core.TimerKind.EARLY_REPLY)
    reject = the_reject(effects)
    assert reject.reason is core.RejectReason.UNMATCHED
    assert reject.command is not None and reject.command.command is core.CommandKind.CANCEL
    assert reject.command.reason == "oops"
    assert run.slot is None and isinstance(effects[-1], core.Purge)


def test_a_request_after_the_ttl_rejects_the_old_command_and_parks() -> None:
    run = Run()
    run.command(core.CommandKind.CANCEL)
    run.advance(11 * MINUTE)
    effects = run.start()
    reject = the_reject(effects)
    assert reject.reason is core.RejectReason.UNMATCHED and reject.command is not None
    assert not outcomes(effects) and run.wait.status is core.WaitStatus.PARKED


def test_held_commands_are_bounded_per_key() -> None:
    run = Run()
    for _ in range(16):
        run.command(core.CommandKind.SUSPEND)
    assert the_reject(run.command(core.CommandKind.SUSPEND)).reason is core.RejectReason.OVERFLOW
    assert run.slot is not None and len(run.slot.early_commands) == 16


def test_a_slot_holding_commands_survives_the_state_codec() -> None:
    run = Run()
    run.reply()
    run.command(core.CommandKind.DELIVER, response_data=APPROVED, reason="by phone")
    assert run.slot is not None
    assert core.decode_slot(core.encode_slot(run.slot)) == run.slot
    # and the decoded slot decides exactly as the original
    a = decide(run.slot, run.start_event(), run.now, run.definitions)
    decoded = core.decode_slot(core.encode_slot(run.slot))
    b = decide(decoded, run.start_event(), run.now, run.definitions)
    assert a == b
