"""Rule 12: channel adapters report what became of each send; failures are retried, then
take the path the definition declares (``on_send_failure``).

A result is decided at its append time like a reply (rule 2): the timers due
before it fire first, so a failure reported after the deadline passed finds
the wait at its next level, and its send no longer worth sending again.
"""

from __future__ import annotations

import dataclasses
import json

from streams.core.copying import replace
from streams.core.definition import SendFailureRoute, Variant, WaitDefinition
from streams.core.durations import format_utc_ms
from streams.core.effects import (
    ActionKind,
    Discard,
    DiscardReason,
    OutcomeReason,
    RejectReason,
)
from streams.core.events import ActionResult, ResultStatus, split_correlation_key
from streams.core.rules.context import _act, _Ctx, _ended, _trace
from streams.core.rules.ids import action_id
from streams.core.rules.sends import _all_sends, _is_current, _stored, _sync_retry, _what
from streams.core.rules.timers import _escalate
from streams.core.state import (
    MAX_HELD_REPLIES,
    HeldResult,
    Send,
    SendState,
    Slot,
    Wait,
    WaitStatus,
)


def _on_result_record(slot: Slot | None, res: ActionResult, ctx: _Ctx) -> Slot | None:
    if slot is None or slot.wait is None:
        key = split_correlation_key(res.correlation_key)[0]
        ctx.reject(RejectReason.UNMATCHED,
                   f"Expected a wait under key {key!r} for the result of action "
                   f"{res.action_id!r}, but there is none")
        return slot
    new = _on_result(slot.wait, res, ctx)
    return slot if new is slot.wait else replace(slot, wait=new)


def _on_result(w: Wait, res: ActionResult, ctx: _Ctx) -> Wait:
    key, _party = split_correlation_key(res.correlation_key)
    if key != w.key:
        ctx.reject(RejectReason.UNMATCHED,
                   f"Expected correlation key {w.key!r}, but the result carries {key!r}")
        return w
    if w.status is WaitStatus.SUSPENDED:
        # Rule 9: nothing is decided while suspended; resume decides it.
        if len(w.held_results) >= MAX_HELD_REPLIES:
            ctx.reject(RejectReason.OVERFLOW,
                       f"Expected at most {MAX_HELD_REPLIES} results recorded while suspended, "
                       f"but {len(w.held_results)} are already recorded")
            return w
        w = replace(w, held_results=(*w.held_results, HeldResult(res, ctx.now)))
        return _trace(w, ctx.now, "result_recorded", f"{res.status.value} {res.action_id}")
    d = ctx.definition_of(w)
    sends = _all_sends(w, d)
    found = _find_send(w, sends, res.action_id)
    if found is None:
        if w.status is WaitStatus.DONE:
            ctx.reject(RejectReason.LATE,
                       f"{_ended(w)}; the result of action {res.action_id!r} changes nothing")
        else:
            ctx.reject(RejectReason.UNMATCHED,
                       "Expected the id of an action this wait sent and takes results for "
                       "(SEND_REQUEST, SEND_REMINDER, RUN_ESCALATION), but "
                       f"{res.action_id!r} is none of them")
        return w
    send, tries = found
    if w.status is WaitStatus.IN_REVIEW:
        ctx.reject(RejectReason.LATE,
                   "Expected the wait to be waiting for a reply, but an earlier reply won "
                   f"and is in review; the result of {_what(send)} changes nothing")
        return w
    if tries < send.tries:
        ctx.effects.append(Discard(
            DiscardReason.STALE_RESULT,
            f"Expected a result of send attempt {send.tries} of {_what(send)}, but this is "
            f"one of attempt {tries}"))
        return w
    if res.status is ResultStatus.DELIVERED:
        return _delivered(w, d, send, ctx)
    return _failed(w, d, sends, send, res, ctx)


def _find_send(w: Wait, sends: list[Send], wanted: str) -> tuple[Send, int] | None:
    """The send (and its send attempt) whose action id is `wanted`; ids are derived."""
    for s in sends:
        for tries in range(1, s.tries + 1):
            if action_id(w.key, w.parked_at, s.kind, s.stage, s.level, s.party, s.attempt,
                         tries) == wanted:
                return s, tries
    return None


def _delivered(w: Wait, d: WaitDefinition | None, send: Send, ctx: _Ctx) -> Wait:
    if send.state is SendState.DELIVERED:
        ctx.effects.append(Discard(DiscardReason.DUPLICATE_RESULT,
                                   f"Expected one result of {_what(send)}, but it was "
                                   "already reported delivered"))
        return w
    if send.state is SendState.FAILED:
        ctx.reject(RejectReason.DUPLICATE,
                   f"Expected one result of {_what(send)}, but it already failed for good "
                   f"({send.error})")
        return w
    w = _stored(w, dataclasses.replace(send, state=SendState.DELIVERED, retry_at=None))
    w = _trace(w, ctx.now, "send_delivered", f"{_what(send)}, send attempt {send.tries}")
    return _sync_retry(w, d, ctx)


def _failed(w: Wait, d: WaitDefinition | None, sends: list[Send], send: Send,
            res: ActionResult, ctx: _Ctx) -> Wait:
    if send.state is SendState.DELIVERED:
        ctx.reject(RejectReason.DUPLICATE,
                   f"Expected one result of {_what(send)}, but it was already reported "
                   "delivered")
        return w
    if send.state in (SendState.RETRYING, SendState.FAILED):
        ctx.effects.append(Discard(DiscardReason.DUPLICATE_RESULT,
                                   f"Expected one result of {_what(send)}, but its failure "
                                   "was already reported"))
        return w
    error = res.error or "no error given"
    what = f"{_what(send)}, send attempt {send.tries}"
    policy = d.on_send_failure if d is not None else None
    if d is None or policy is None or not _is_current(w, send, sends):
        note = ("the wait has moved on: not sent again" if policy is not None
                else "the definition declares no on_send_failure")
        w = _stored(w, dataclasses.replace(send, state=SendState.FAILED, error=error))
        w = _trace(w, ctx.now, "send_failed", f"{what}: {error} ({note})")
        return _sync_retry(w, d, ctx)
    if not res.permanent and send.tries <= policy.retries:
        at = ctx.now + policy.backoff_ms
        w = _stored(w, dataclasses.replace(send, state=SendState.RETRYING, retry_at=at,
                                           error=error))
        w = _trace(w, ctx.now, "send_failed",
                   f"{what}: {error}; retry {send.tries} of {policy.retries} at "
                   f"{format_utc_ms(at)}")
        return _sync_retry(w, d, ctx)
    why = "permanent" if res.permanent else f"no retry left of {policy.retries}"
    failed = dataclasses.replace(send, state=SendState.FAILED, error=error)
    w = replace(_stored(w, failed), send_error=f"{_what(send)}: {error}")
    w = _trace(w, ctx.now, "send_failed", f"{what}: {error} ({why})")
    w = _sync_retry(w, d, ctx)
    return _take_path(w, d, failed, ctx, policy.then)


def _take_path(w: Wait, d: WaitDefinition, send: Send, ctx: _Ctx,
               then: SendFailureRoute) -> Wait:
    """A send failed for good: the declared path, or a person when nothing else is left."""
    if w.status is WaitStatus.DONE:
        # The escalation of a wait that has ended: only a person can still act.
        return _review_send(w, d, send, ctx)
    if d.variant is Variant.FIRST_VALID and send.kind is not ActionKind.RUN_ESCALATION:
        reachable = _reachable_parties(w, d)
        if reachable:
            return _trace(w, ctx.now, "send_failed_path",
                          f"not taken: parties {sorted(reachable)} may still answer")
    if then is SendFailureRoute.ESCALATE:
        return _escalate(replace(w, timers=()), d, ctx, OutcomeReason.SEND_FAILED)
    return _review_send(w, d, send, ctx)


def _reachable_parties(w: Wait, d: WaitDefinition) -> set[str]:
    """First-valid: the parties whose latest request or reminder has not failed for good."""
    latest: dict[str, SendState] = {}
    for s in _all_sends(w, d):
        if (s.kind is not ActionKind.RUN_ESCALATION and s.party is not None
                and (s.stage, s.level) == (w.stage, w.level)):
            latest[s.party] = s.state
    return {p for p in w.parties if latest.get(p) is not SendState.FAILED}


def _review_send(w: Wait, d: WaitDefinition, send: Send, ctx: _Ctx) -> Wait:
    """``then: review``: a person is asked; the wait goes on waiting (its deadline runs)."""
    reviews = w.reviews + 1
    w = replace(w, reviews=reviews)
    issue = f"send_failed: {_what(send)}: {send.error}"
    failed_id = action_id(w.key, w.parked_at, send.kind, send.stage, send.level, send.party,
                          send.attempt, send.tries)
    payload = json.dumps({
        "sendFailed": {"actionId": failed_id, "action": send.kind.value, "party": send.party,
                       "level": send.level, "attempt": send.attempt,
                       "sendAttempts": send.tries, "error": send.error},
        "validationIssue": issue,
    }, separators=(",", ":"))
    _act(ctx, w, d, ActionKind.REVIEW_NEEDED, party=None, attempt=reviews, payload=payload)
    return _trace(w, ctx.now, "review_needed", issue)
