"""Rules 5 and 10: the one outcome a wait ends with, and what a finished wait keeps."""

from __future__ import annotations

from streams.core.definition import (
    DEFAULT_RETENTION_MS,
    Variant,
    WaitDefinition,
)
from streams.core.effects import (
    ActionKind,
    EmitOutcome,
    OutcomeKind,
    OutcomeReason,
    TraceEntry,
)
from streams.core.events import (
    TimerKind,
)
from streams.core.rules.context import _act, _Ctx, _trace
from streams.core.rules.ids import outcome_id
from streams.core.rules.sends import _sync_retry
from streams.core.state import (
    KEPT_PAYLOAD_BYTES,
    TRACE_HEAD,
    SendState,
    Wait,
    WaitStatus,
)


def _end(
    w: Wait,
    d: WaitDefinition | None,
    ctx: _Ctx,
    kind: OutcomeKind,
    reason: OutcomeReason,
    *,
    winner: str | None = None,
) -> Wait:
    """Rule 5 and 10: one outcome with its reason, then the finished wait kept for retention."""
    w = _trace(w, ctx.now, "ended", f"{kind.value} ({reason.value})")
    operator, operator_reason = ctx.by if ctx.by is not None else (None, None)
    # The outcome and the finished wait below copy the same fields of `w` (duplicates
    # lists the pair), deliberately: each names what it carries, so a field added to Wait
    # is carried by neither until someone decides it should be.
    ctx.effects.append(EmitOutcome(
        outcome_id=outcome_id(w.key, w.parked_at),
        correlation_key=w.key,
        definition=w.definition,
        tenant=w.tenant,
        outcome=kind,
        reason=reason,
        response_data=w.response_data,
        response_valid=w.response_valid,
        validation_issue=w.validation_issue,
        review_outcome=w.review_outcome,
        review_note=w.review_note,
        reminders_sent=w.reminders_sent,
        escalation_level=w.level,
        parked_at=w.parked_at,
        ended_at=ctx.now,
        trace=emitted_trace(w),
        operator=operator,
        operator_reason=operator_reason,
        send_error=w.send_error,
        definition_version=w.definition_version,
    ))
    if d is not None and d.variant is Variant.FIRST_VALID:
        for p in w.parties:
            if p != winner:
                _act(ctx, w, d, ActionKind.CLOSE_OUT, party=p, attempt=1, payload=None)
    retention = d.retention_ms if d is not None else DEFAULT_RETENTION_MS
    # A finished wait recognises late replies and duplicate requests (identity,
    # reply ids) and shows operators its history until it is purged: what its
    # Outcome said, and the payload unless it is large.  Timers, held replies
    # and stage results go; the trace is bounded already (TRACE_HEAD/TAIL).
    keep_payload = w.payload is None or len(w.payload.encode()) <= KEPT_PAYLOAD_BYTES
    # Rule 12: an escalation still on its way must reach its target after the
    # wait ended ESCALATED; its result is still taken, and a failure retried.
    sends = tuple(s for s in w.sends
                  if kind is OutcomeKind.ESCALATED and s.kind is ActionKind.RUN_ESCALATION
                  and (s.stage, s.level) == (w.stage, w.level)
                  and s.state in (SendState.PENDING, SendState.RETRYING))
    done = Wait(
        key=w.key,
        definition=w.definition,
        tenant=w.tenant,
        parked_at=w.parked_at,
        status=WaitStatus.DONE,
        payload=w.payload if keep_payload else None,
        payload_dropped=not keep_payload,
        parties=w.parties,
        deadline_override_ms=w.deadline_override_ms,
        stage=w.stage,
        level=w.level,
        reminders_sent=w.reminders_sent,
        polls=w.polls,
        reviews=w.reviews,
        response_data=w.response_data,
        response_valid=w.response_valid,
        validation_issue=w.validation_issue,
        review_outcome=w.review_outcome,
        review_note=w.review_note,
        outcome=kind,
        reason=reason,
        ended_at=ctx.now,
        reply_ids=w.reply_ids,
        trace=w.trace,
        trace_dropped=w.trace_dropped,
        operator=operator,
        operator_reason=operator_reason,
        timers=(ctx.arm(TimerKind.RETENTION, ctx.now + retention),),
        sends=sends,
        send_error=w.send_error,
        definition_version=w.definition_version,
    )
    return _sync_retry(done, d, ctx) if sends else done


def emitted_trace(w: Wait) -> tuple[TraceEntry, ...]:
    """The stored trace, with a marker where entries were dropped to bound the state."""
    if not w.trace_dropped:
        return w.trace
    head, tail = w.trace[:TRACE_HEAD], w.trace[TRACE_HEAD:]
    marker = TraceEntry(tail[0].at if tail else head[-1].at, "trace_truncated",
                        f"{w.trace_dropped} entries omitted")
    return (*head, marker, *tail)
