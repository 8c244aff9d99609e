"""Rules 1, 2 and 4 for replies: correlation, tenant, the race, validation, review."""

from __future__ import annotations

import json

from streams.core.copying import replace
from streams.core.definition import (
    InvalidReplyRoute,
    Variant,
    WaitDefinition,
)
from streams.core.effects import (
    ActionKind,
    OutcomeKind,
    OutcomeReason,
    RejectReason,
)
from streams.core.events import (
    PARTY_SEPARATOR,
    Reply,
    split_correlation_key,
)
from streams.core.rules.context import (
    _act,
    _Ctx,
    _ended,
    _missing_definition,
    _remember_reply_id,
    _trace,
    _who,
)
from streams.core.rules.early import _buffer_early
from streams.core.rules.ending import _end
from streams.core.rules.timers import _escalate, _open_stage
from streams.core.state import (
    MAX_HELD_REPLIES,
    HeldReply,
    Slot,
    Wait,
    WaitStatus,
)
from streams.core.validation import parse_json, text_issue


# Alike in shape with commands.py's and results.py's entries (duplicates lists the pairs),
# deliberately: each kind of record its own rule, as native/src/rules/ mirrors them.
def _on_reply_record(slot: Slot | None, reply: Reply, ctx: _Ctx) -> Slot | None:
    if slot is None or slot.wait is None:
        return _buffer_early(slot, reply, ctx)
    w = slot.wait
    d = ctx.definition_of(w)
    if d is None:
        ctx.reject(RejectReason.UNKNOWN_DEFINITION, _missing_definition(w))
        return slot
    new = _on_reply(w, reply, d, ctx, held=False)
    return slot if new is w else replace(slot, wait=new)


def _on_reply(w: Wait, reply: Reply, d: WaitDefinition, ctx: _Ctx, *, held: bool) -> Wait:
    """Rules 1, 2, 4 and 9 for one reply: correlation, tenant, race, validation."""
    about = reply if held else None
    key, party = split_correlation_key(reply.correlation_key)
    if key != w.key:
        ctx.reject(
            RejectReason.UNMATCHED,
            f"Expected correlation key {w.key!r}, but the reply carries {key!r}",
            about,
        )
        return w
    if party is not None and party not in w.parties:
        ctx.reject(
            RejectReason.UNMATCHED,
            f"Expected a party of this wait {list(w.parties)}, but the reply names {party!r}",
            about,
        )
        return w
    if party is None and d.variant is Variant.FIRST_VALID:
        ctx.reject(
            RejectReason.UNMATCHED,
            f"Expected a per-party key {w.key}{PARTY_SEPARATOR}PARTY, "
            f"but the reply carries {reply.correlation_key!r}",
            about,
        )
        return w
    if reply.tenant != w.tenant:
        ctx.reject(
            RejectReason.TENANT_MISMATCH,
            f"Expected tenant {w.tenant!r}, but the reply is from {reply.tenant!r}",
            about,
        )
        return w
    if reply.reply_id is not None and reply.reply_id in w.reply_ids:
        ctx.reject(
            RejectReason.DUPLICATE,
            f"Expected a new reply id, but {reply.reply_id!r} was already seen by this wait",
            about,
        )
        return w
    if w.status is WaitStatus.DONE:
        ctx.reject(RejectReason.LATE, _ended(w), about)
        return w
    if w.status is WaitStatus.IN_REVIEW:
        ctx.reject(
            RejectReason.LATE,
            "Expected the wait to be waiting for a reply, but an earlier reply won "
            "and is in review",
            about,
        )
        return w
    if w.status is WaitStatus.SUSPENDED:
        if len(w.held) >= MAX_HELD_REPLIES:
            ctx.reject(
                RejectReason.OVERFLOW,
                f"Expected at most {MAX_HELD_REPLIES} replies recorded while suspended, "
                f"but {len(w.held)} are already recorded",
                about,
            )
            return w
        w = _remember_reply_id(w, reply)
        w = replace(w, held=(*w.held, HeldReply(reply=reply, received_at=ctx.now)))
        return _trace(w, ctx.now, "reply_recorded", _who(reply.channel, party))
    w = _remember_reply_id(w, reply)
    return _judge(w, d, ctx, reply.response_data, reply.channel, party, about, by_operator=False)


def reply_verdict(d: WaitDefinition, data: str, channel: str, *,
                  by_operator: bool) -> tuple[str | None, bool]:
    """What validation says of a reply's data (rule 4): (the issue or None, not_ready).

    `not_ready`: a probe's poll result said ``resultReady: false`` (polling
    goes on).  A pure function of the definition and the text; the native
    rules (`streams.core.native`) ask this very function, so the issues users
    read are the same whichever implementation decided.
    """
    issue: str | None = None
    if not by_operator and d.channels and channel not in d.channels:
        issue = (
            f"Expected a reply on one of the channels {list(d.channels)}, "
            f"but it came on {channel!r}"
        )
    value: object = None
    if issue is None:
        parsed = parse_json(data)
        issue, value = parsed.issue, parsed.value
    if d.variant is Variant.PROBE and issue is None:
        ready = value.get("resultReady") if isinstance(value, dict) else None
        if ready is False:
            return None, True
        if ready is not True:
            issue = f"Expected responseData.resultReady to be true or false, but got {ready!r}"
    if issue is None:
        issue = text_issue(d.response_schema, data, value)
    if (d.variant is Variant.FIRST_VALID and issue is None and isinstance(value, dict)
            and value.get("replyAcceptable") is False):
        issue = "Expected an acceptable reply, but the party declined (replyAcceptable: false)"
    return issue, False


def _judge(
    w: Wait,
    d: WaitDefinition,
    ctx: _Ctx,
    data: str,
    channel: str,
    party: str | None,
    about: Reply | None,
    *,
    by_operator: bool,
) -> Wait:
    """Validate before believing (rule 4), then the variant decides what a verdict means."""
    issue, not_ready = reply_verdict(d, data, channel, by_operator=by_operator)
    if not_ready:
        return _trace(w, ctx.now, "poll_result", "not ready; polling goes on")
    who = _who(channel, party)
    if d.variant is Variant.FIRST_VALID and issue is not None:
        ctx.reject(RejectReason.UNACCEPTABLE, f"{issue}; the wait goes on", about)
        return _trace(w, ctx.now, "reply_unacceptable", f"{who}: {issue}")
    if issue is not None:
        w = replace(w, response_data=data, response_valid=False, validation_issue=issue)
        w = _trace(w, ctx.now, "reply_invalid", f"{who}: {issue}")
        if d.invalid_reply is InvalidReplyRoute.ESCALATE:
            return _escalate(replace(w, timers=()), d, ctx, OutcomeReason.INVALID_REPLY_ESCALATED)
        return _to_review(w, d, ctx, channel)
    if by_operator:
        reason = OutcomeReason.DELIVERED
    elif d.variant is Variant.PROBE:
        reason = OutcomeReason.RESULT_READY
    else:
        reason = OutcomeReason.REPLY_VALID
    w = _trace(w, ctx.now, "reply_valid", who)
    return _accept(w, d, ctx, data, valid=True, reason=reason, winner=party)


def _to_review(w: Wait, d: WaitDefinition, ctx: _Ctx, channel: str) -> Wait:
    """The reply won the race, so reminders and deadline stop; a person decides now."""
    reviews = w.reviews + 1
    w = replace(w, status=WaitStatus.IN_REVIEW, timers=(), reviews=reviews)
    payload = json.dumps(
        {"responseData": w.response_data, "validationIssue": w.validation_issue,
         "channel": channel},
        separators=(",", ":"),
    )
    _act(ctx, w, d, ActionKind.REVIEW_NEEDED, party=None, attempt=reviews, payload=payload)
    return _trace(w, ctx.now, "review_needed", w.validation_issue or "")


def _accept(
    w: Wait,
    d: WaitDefinition,
    ctx: _Ctx,
    data: str | None,
    *,
    valid: bool,
    reason: OutcomeReason,
    winner: str | None,
) -> Wait:
    """A stage's answer is settled: the next stage opens, or the wait ends received."""
    w = replace(w, response_data=data, response_valid=valid)
    if d.variant is Variant.CHAINED and w.stage + 1 < len(d.stages):
        done_stage = d.stages[w.stage].name
        w = replace(
            w,
            stage=w.stage + 1,
            level=0,
            stage_reminders=0,
            status=WaitStatus.PARKED,
            stage_results=(*w.stage_results, data or ""),
            timers=(),
        )
        w = _trace(w, ctx.now, "stage_completed", f"{done_stage} ({reason.value})")
        return _open_stage(w, d, ctx, start=ctx.now)
    if d.variant is Variant.CHAINED:
        w = replace(w, response_data=_combine_stages(d, (*w.stage_results, data or "")))
    return _end(w, d, ctx, OutcomeKind.RECEIVED, reason, winner=winner)


def _combine_stages(d: WaitDefinition, results: tuple[str, ...] | list[str]) -> str:
    """Chained outcome: ``{"stage name": responseData, ...}`` so no stage's answer is lost."""
    combined: dict[str, object] = {}
    for stage, text in zip(d.stages, results, strict=False):
        parsed = parse_json(text)
        combined[stage.name] = parsed.value if parsed.issue is None else text
    return json.dumps(combined, separators=(",", ":"))
