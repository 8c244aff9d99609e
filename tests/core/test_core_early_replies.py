"""Rule 7: a reply processed before its request is held for a TTL, then unmatched."""

from __future__ import annotations

import pytest

from streams import core
from tests.core.core_harness import APPROVED, MINUTE, T0, Run
from tests.core.picking import outcomes, the_outcome, the_reject

pytestmark = [pytest.mark.rule7, pytest.mark.rule8]


def test_reply_before_its_request_is_buffered_with_an_expiry_timer() -> None:
    run = Run()
    effects = run.reply()
    (buffered,) = [e for e in effects if isinstance(e, core.BufferEarlyReply)]
    assert buffered.expires_at == T0 + 10 * MINUTE
    assert run.slot is not None and run.slot.wait is None
    assert run.due(core.TimerKind.EARLY_REPLY) == T0 + 10 * MINUTE


def test_buffered_reply_is_correlated_when_the_request_arrives() -> None:
    run = Run()
    run.reply()
    run.advance(MINUTE)
    effects = run.start(requested_at=T0)
    outcome = the_outcome(effects)
    assert outcome.outcome is core.OutcomeKind.RECEIVED and outcome.response_data == APPROVED
    assert run.slot is not None and run.slot.early_replies == ()
    assert core.TimerKind.EARLY_REPLY not in {t.kind for t in run.slot.armed_timers()}


def test_buffered_reply_past_its_ttl_becomes_unmatched_and_the_key_is_purged() -> None:
    run = Run()
    run.reply(reply_id="r-early")
    effects = run.fire(core.TimerKind.EARLY_REPLY)
    reject = the_reject(effects)
    assert reject.reason is core.RejectReason.UNMATCHED
    assert reject.reply is not None and reject.reply.reply_id == "r-early"
    assert run.slot is None and isinstance(effects[-1], core.Purge)


def test_request_after_the_ttl_rejects_the_old_buffered_reply_and_parks() -> None:
    run = Run()
    run.reply()
    run.advance(11 * MINUTE)
    effects = run.start()
    assert the_reject(effects).reason is core.RejectReason.UNMATCHED
    assert not outcomes(effects) and run.wait.status is core.WaitStatus.PARKED


def test_buffered_reply_from_another_tenant_does_not_end_the_wait_when_it_arrives() -> None:
    run = Run()
    run.reply(tenant="globex")
    effects = run.start()
    assert the_reject(effects).reason is core.RejectReason.TENANT_MISMATCH
    assert run.wait.status is core.WaitStatus.PARKED


def test_duplicate_early_reply_is_rejected_not_buffered_twice() -> None:
    run = Run()
    run.reply(reply_id="same")
    assert the_reject(run.reply(reply_id="same")).reason is core.RejectReason.DUPLICATE
    assert run.slot is not None and len(run.slot.early_replies) == 1


def test_early_reply_buffer_refuses_a_flood_for_one_key() -> None:
    run = Run()
    for i in range(16):
        run.reply(reply_id=f"r{i}")
    assert the_reject(run.reply(reply_id="r16")).reason is core.RejectReason.OVERFLOW


def test_second_early_reply_expires_on_its_own_schedule() -> None:
    run = Run()
    run.reply(reply_id="a")
    run.advance(5 * MINUTE)
    run.reply(reply_id="b")
    the_reject(run.fire(core.TimerKind.EARLY_REPLY))
    assert run.slot is not None and [h.reply.reply_id for h in run.slot.early_replies] == ["b"]
    assert run.due(core.TimerKind.EARLY_REPLY) == T0 + 15 * MINUTE
