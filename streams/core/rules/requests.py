"""Rules 1, 2 and 7 for requests: parking a wait, and the input held for it."""

from __future__ import annotations

from streams.core.copying import replace
from streams.core.definition import (
    Variant,
    WaitDefinition,
)
from streams.core.durations import (
    format_span_ms,
    format_utc_ms,
    parse_duration_ms,
)
from streams.core.effects import (
    RejectReason,
    TraceEntry,
)
from streams.core.events import (
    PARTY_SEPARATOR,
    StartWait,
)
from streams.core.rules.commands import _command_on_wait
from streams.core.rules.context import _Ctx
from streams.core.rules.early import _arrival, _held_what, _refuse_held
from streams.core.rules.replies import _on_reply
from streams.core.rules.timers import _catch_up, _open_stage
from streams.core.state import (
    HeldCommand,
    HeldReply,
    Slot,
    Wait,
)


def _on_start(slot: Slot | None, ev: StartWait, ctx: _Ctx) -> Slot | None:
    key = ev.correlation_key
    if not key or PARTY_SEPARATOR in key:
        ctx.reject(
            RejectReason.INVALID_REQUEST,
            f"Expected a correlation key without '{PARTY_SEPARATOR}', but got {key!r}",
        )
        return slot
    if slot is not None and slot.wait is not None:
        w = slot.wait
        ctx.reject(
            RejectReason.DUPLICATE,
            f"Expected no wait under key {key!r}, but one parked at "
            f"{format_utc_ms(w.parked_at)} "
            f"is {w.status.value}",
        )
        return slot
    d = ctx.definitions.get(ev.definition)
    if d is None:
        ctx.reject(
            RejectReason.UNKNOWN_DEFINITION,
            f"Expected one of the definitions {sorted(ctx.definitions)}, "
            f"but the request names {ev.definition!r}",
        )
        return slot
    override: int | None = None
    if ev.deadline is not None:
        try:
            override = parse_duration_ms(ev.deadline)
        except ValueError as exc:
            ctx.reject(RejectReason.INVALID_REQUEST, f"{exc} (the request's deadline)")
            return slot
    parties = ev.parties or d.parties
    if d.variant is Variant.FIRST_VALID and not parties:
        ctx.reject(
            RejectReason.INVALID_REQUEST,
            f"Expected parties for the first-valid definition {d.name!r}, "
            "but neither the request nor the definition names any",
        )
        return slot
    if len(set(parties)) != len(parties) or any(
        not p or PARTY_SEPARATOR in p for p in parties
    ):
        ctx.reject(
            RejectReason.INVALID_REQUEST,
            f"Expected distinct, non-empty party names without '{PARTY_SEPARATOR}', "
            f"but got {list(parties)}",
        )
        return slot

    parked_at = min(ev.requested_at, ctx.now)
    wait = Wait(
        key=key,
        definition=d.name,
        tenant=ev.tenant,
        parked_at=parked_at,
        payload=ev.payload,
        parties=tuple(parties),
        deadline_override_ms=override,
        trace=(TraceEntry(parked_at, "requested", f"definition {d.name}"),),
        definition_version=d.version or None,
    )
    wait = _open_stage(wait, d, ctx, start=parked_at)
    if slot is None or not (slot.early_replies or slot.early_commands):
        return Slot(wait=wait, next_generation=ctx.generation, traceparent=ev.traceparent)
    parked = _apply_early(wait, d, slot, ctx)
    if parked is None or ev.traceparent is None:
        return parked
    return replace(parked, traceparent=ev.traceparent)


def _apply_early(wait: Wait, d: WaitDefinition, held_by: Slot, ctx: _Ctx) -> Slot | None:
    """Rules 2 and 7: replies and commands that overtook the request, each decided at its
    own append time, in append order, after the timers due before it.

    The request parks the wait at ``parked_at``, which may be well before the
    request itself reached Kafka (``requestedAt``); a reply held meanwhile
    that was appended after the deadline lost the race like any other reply,
    and is rejected ``late``.  A held item older than the wait is decided as
    the wait parks.  Timers due after the last of them and before the request
    stay armed, overdue, as for a request without held input: the worker
    fires them at once.
    """
    request_at = ctx.now
    slot: Slot | None = Slot(wait=wait)
    early: list[HeldReply | HeldCommand] = [*held_by.early_replies, *held_by.early_commands]
    for held in sorted(early, key=_arrival):
        waited = request_at - held.received_at
        if waited > d.early_reply_ttl_ms:
            _refuse_held(held, ctx, f"Expected the request within the early-reply TTL of "
                                    f"{format_span_ms(d.early_reply_ttl_ms)} of the "
                                    f"{_held_what(held)}, but it came "
                                    f"{format_span_ms(waited)} later")
            continue
        at = max(held.received_at, wait.parked_at)
        slot = _catch_up(slot, at, ctx)
        ctx.now = at
        if slot is None or slot.wait is None:
            # requestedAt so old that the wait ended and its retention passed before
            # this reply or command was appended: nothing is left for it to decide.
            _refuse_held(held, ctx, f"Expected the wait {wait.key!r} to be kept when the "
                                    f"{_held_what(held)} was appended, but it had ended and "
                                    "its retention had passed", late=True)
            continue
        if isinstance(held, HeldReply):
            decided = _on_reply(slot.wait, held.reply, d, ctx, held=True)
        else:
            ctx.held_command = held.command
            decided = _command_on_wait(slot.wait, held.command, ctx)
            ctx.held_command = None
        slot = replace(slot, wait=decided)
    return slot
