"""decide(slot, event, now) -> (slot, effects): every rule of the wait, in one pure function.

The numbered rules are those of DESIGN.md "The wait, as a state machine".
Nothing here reads a clock, a table or the network: the processor loads the
slot, passes the record and the time, stores the returned slot and applies the
effects. Replaying the same inputs therefore reproduces the same states and
effects, which is what makes a crashed worker's replacement agree with it.

Timer bookkeeping is derived, not hand-written: handlers only change the
timers held in the state, and ``decide`` emits ``DisarmTimer``/``ArmTimer`` by
diffing ``Slot.armed_timers()`` before and after, so effects and state cannot
disagree.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from streams.core.copying import replace
from streams.core.definition import (
    DEFAULT_EARLY_REPLY_TTL_MS,
    DEFAULT_RETENTION_MS,
    InvalidReplyRoute,
    Variant,
    WaitDefinition,
)
from streams.core.durations import (
    format_span_ms,
    format_utc_ms,
    parse_duration_ms,
    parse_signed_duration_ms,
)
from streams.core.effects import (
    ActionKind,
    ArmTimer,
    BufferEarlyCommand,
    BufferEarlyReply,
    DisarmTimer,
    Discard,
    DiscardReason,
    Effect,
    EmitAction,
    EmitOutcome,
    OutcomeKind,
    OutcomeReason,
    Purge,
    Reject,
    RejectReason,
    TraceEntry,
)
from streams.core.events import (
    PARTY_SEPARATOR,
    Command,
    CommandKind,
    Event,
    Reply,
    ReviewOutcome,
    StartWait,
    TimerFired,
    TimerKind,
    split_correlation_key,
)
from streams.core.frozen import fast_init
from streams.core.state import (
    KEPT_PAYLOAD_BYTES,
    MAX_HELD_REPLIES,
    MAX_REPLY_IDS,
    TRACE_HEAD,
    TRACE_TAIL,
    ArmedTimer,
    HeldCommand,
    HeldReply,
    Slot,
    Suspension,
    Wait,
    WaitStatus,
)
from streams.core.validation import parse_json, schema_issue, text_issue

__all__ = ["MAX_CATCH_UP", "OPERATOR_CHANNEL", "Decision", "action_id", "catch_up", "decide",
           "outcome_id"]

OPERATOR_CHANNEL = "operator"
"""The channel recorded for replies delivered by hand (DELIVER command)."""

_ID_NAMESPACE = uuid.UUID("5f0c1d2e-8a57-4c1b-9a7e-3b6d2f0e9c41")
"""Fixed forever: changing it changes every outcome and action id."""
_ID_PREFIX = _ID_NAMESPACE.bytes
# The variant digit of an id: the hex digit with its two high bits set to 10.
_VARIANT_DIGIT = {d: "89ab"[int(d, 16) & 0x3] for d in "0123456789abcdef"}


def _uuid5(name: str) -> str:
    """``str(uuid.uuid5(_ID_NAMESPACE, name))``, from the hex digest: no UUID object, no bytes copy.

    Ids are part of the contract (consumers de-duplicate by them): a test
    checks this against ``uuid.uuid5`` for any name.
    """
    h = hashlib.sha1(_ID_PREFIX + name.encode(), usedforsecurity=False).hexdigest()
    return f"{h[:8]}-{h[8:12]}-5{h[13:16]}-{_VARIANT_DIGIT[h[16]]}{h[17:20]}-{h[20:32]}"


@fast_init
@dataclass(frozen=True, slots=True)
class Decision:
    """The new slot (None: delete the key) and the effects, in the order to apply them."""

    slot: Slot | None
    effects: tuple[Effect, ...]
    armed_before: frozenset[ArmedTimer] = frozenset()
    """The timers armed in the slot decided on, and in the new one: the processor
    moves its timer index by them (worked out here once, not again there)."""
    armed_after: frozenset[ArmedTimer] = frozenset()


def outcome_id(wait_key: str, parked_at: int) -> str:
    """Same wait, same id (re-processing is idempotent); a key re-used after purge
    parks at another time and so gets a new id."""
    return _uuid5(f"outcome\x1f{wait_key}\x1f{parked_at}")


def action_id(
    wait_key: str,
    parked_at: int,
    action: ActionKind,
    stage: int,
    level: int,
    party: str | None,
    attempt: int,
) -> str:
    """Deterministic, so a consumer can de-duplicate actions re-sent after a crash."""
    name = "\x1f".join(
        ("action", wait_key, str(parked_at), action.value, str(stage), str(level),
         party or "", str(attempt))
    )
    return _uuid5(name)


class _Ctx:
    """Per-decision scratch: the clock, effects gathered so far, the generation counter."""

    __slots__ = ("by", "definitions", "effects", "generation", "held_command", "now")

    def __init__(self, now: int, definitions: Mapping[str, WaitDefinition], generation: int):
        self.now = now
        self.definitions = definitions
        self.generation = generation
        self.effects: list[Effect] = []
        # The early command being applied, if any: what a rejection concerns.
        self.held_command: Command | None = None
        # (operator, reason) of the command being applied: should it end the
        # wait, the outcome names them.  None while replies and timers decide.
        self.by: tuple[str | None, str | None] | None = None

    def stamp(self) -> int:
        """A number that orders this key's early input by arrival (shares the counter)."""
        seq = self.generation
        self.generation += 1
        return seq

    def arm(self, kind: TimerKind, due_at: int) -> ArmedTimer:
        timer = ArmedTimer(kind=kind, due_at=due_at, generation=self.generation)
        self.generation += 1
        return timer

    def reject(self, reason: RejectReason, detail: str, reply: Reply | None = None) -> None:
        command = self.held_command if reply is None else None
        self.effects.append(Reject(reason=reason, detail=detail, reply=reply, command=command))


def decide(
    slot: Slot | None,
    event: Event,
    now_ms: int,
    definitions: Mapping[str, WaitDefinition],
) -> Decision:
    """Decide what ``event`` does to the wait stored under its key at time ``now_ms``."""
    ctx = _Ctx(now_ms, definitions, slot.next_generation if slot is not None else 1)
    new: Slot | None
    if isinstance(event, TimerFired):
        new = _on_timer_record(slot, event, ctx)
    else:
        # Rule 2: timers due by the event's time were decided before it.
        current = _catch_up(slot, now_ms, ctx)
        ctx.now = now_ms
        if isinstance(event, StartWait):
            new = _on_start(current, event, ctx)
        elif isinstance(event, Reply):
            new = _on_reply_record(current, event, ctx)
        else:
            new = _on_command(current, event, ctx)

    return _finish(slot, new, ctx)


def _finish(slot: Slot | None, new: Slot | None, ctx: _Ctx) -> Decision:
    """The decision's slot and effects, timer (dis)arming derived from the slots' timers."""
    if new is not None and new.wait is None and not new.early_replies and not new.early_commands:
        new = None
    if new is not None and new is not slot and new.next_generation != ctx.generation:
        new = replace(new, next_generation=ctx.generation)

    before = slot.armed_timers() if slot is not None else frozenset()
    after = new.armed_timers() if new is not None else frozenset()
    effects = ctx.effects
    for t in sorted(before - after, key=_timer_order):
        effects.append(DisarmTimer(kind=t.kind, due_at=t.due_at, generation=t.generation))
    for t in sorted(after - before, key=_timer_order):
        effects.append(ArmTimer(kind=t.kind, due_at=t.due_at, generation=t.generation))
    if slot is not None and new is None:
        effects.append(Purge())
    return Decision(slot=new, effects=tuple(effects), armed_before=before, armed_after=after)


def catch_up(slot: Slot | None, now_ms: int,
             definitions: Mapping[str, WaitDefinition]) -> Decision:
    """What the passing of time alone does to a slot by ``now_ms``: its due timers fire.

    ``decide`` does this before every request, reply and command; on its own
    it answers "where would this wait be now, with no other input?".
    """
    ctx = _Ctx(now_ms, definitions, slot.next_generation if slot is not None else 1)
    return _finish(slot, _catch_up(slot, now_ms, ctx), ctx)


def _timer_order(t: ArmedTimer) -> tuple[int, str, int]:
    return (t.due_at, t.kind, t.generation)  # a StrEnum orders as its value


# ---------------------------------------------------------------- requests


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
    )
    wait = _open_stage(wait, d, ctx, start=parked_at)
    if slot is None or not (slot.early_replies or slot.early_commands):
        return Slot(wait=wait, next_generation=ctx.generation)
    return _apply_early(wait, d, slot, ctx)


def _apply_early(wait: Wait, d: WaitDefinition, held_by: Slot, ctx: _Ctx) -> Slot | None:
    """Rules 2 and 7: replies and commands that overtook the request, each decided at its
    own append time, in append order, after the timers due before it.

    The request parks the wait at ``parked_at``, which may be well before the
    request itself reached Kafka (``requestedAt``); a reply held meanwhile
    that was appended after the deadline lost the race like any other reply,
    and is rejected ``late``.  A held item older than the wait is decided as
    the wait parks.  Timers due after the last of them and before the request
    stay armed, overdue, as for a request without held input: the punctuator
    emits them at once.
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


def _held_what(held: HeldReply | HeldCommand) -> str:
    return "reply" if isinstance(held, HeldReply) else "command"


def _refuse_held(held: HeldReply | HeldCommand, ctx: _Ctx, detail: str, *,
                 late: bool = False) -> None:
    reason = RejectReason.LATE if late else RejectReason.UNMATCHED
    if isinstance(held, HeldReply):
        ctx.reject(reason, detail, held.reply)
    else:
        ctx.effects.append(Reject(reason, detail, command=held.command))


# ---------------------------------------------------------------- replies


def _on_reply_record(slot: Slot | None, reply: Reply, ctx: _Ctx) -> Slot | None:
    if slot is None or slot.wait is None:
        return _buffer_early(slot, reply, ctx)
    w = slot.wait
    d = ctx.definitions.get(w.definition)
    if d is None:
        ctx.reject(RejectReason.UNKNOWN_DEFINITION, _missing_definition(w))
        return slot
    new = _on_reply(w, reply, d, ctx, held=False)
    return slot if new is w else replace(slot, wait=new)


def _arrival(held: HeldReply | HeldCommand) -> tuple[int, int]:
    """Append order: by append time, then arrival number (several in one millisecond)."""
    return held.received_at, held.seq


def _buffer_early(slot: Slot | None, reply: Reply, ctx: _Ctx) -> Slot | None:
    """Rule 7: hold a reply that beat its request, for the longest TTL any definition allows.

    The reply does not say which definition it belongs to, so it is held for the
    longest TTL; when the request arrives its own definition's TTL is applied.
    """
    early = slot.early_replies if slot is not None else ()
    if reply.reply_id is not None and any(h.reply.reply_id == reply.reply_id for h in early):
        ctx.reject(
            RejectReason.DUPLICATE,
            f"Expected a new reply id, but {reply.reply_id!r} is already held for this key",
        )
        return slot
    if len(early) >= MAX_HELD_REPLIES:
        ctx.reject(
            RejectReason.OVERFLOW,
            f"Expected at most {MAX_HELD_REPLIES} early replies for key "
            f"{reply.correlation_key!r}, but {len(early)} are already held",
        )
        return slot
    expires_at = ctx.now + _longest_early_ttl(ctx.definitions)
    ctx.effects.append(BufferEarlyReply(reply=reply, received_at=ctx.now, expires_at=expires_at))
    return replace(
        slot or Slot(),
        early_replies=(*early, HeldReply(reply=reply, received_at=ctx.now, seq=ctx.stamp())),
        early_timer=_early_timer(slot, expires_at, ctx),
        next_generation=ctx.generation,
    )


def _buffer_early_command(slot: Slot | None, cmd: Command, ctx: _Ctx) -> Slot | None:
    """Rule 7 for commands: a command that beat its request is held like an early reply.

    Commands travel on their own topic, so a SUSPEND sent just after a request
    (or while the requests topic has a backlog) can be processed first.
    """
    held = slot.early_commands if slot is not None else ()
    if len(held) >= MAX_HELD_REPLIES:
        ctx.reject(
            RejectReason.OVERFLOW,
            f"Expected at most {MAX_HELD_REPLIES} commands held for key "
            f"{cmd.correlation_key!r} before its request, but {len(held)} are already held",
        )
        return slot
    expires_at = ctx.now + _longest_early_ttl(ctx.definitions)
    ctx.effects.append(BufferEarlyCommand(command=cmd, received_at=ctx.now,
                                          expires_at=expires_at))
    return replace(
        slot or Slot(),
        early_commands=(*held, HeldCommand(command=cmd, received_at=ctx.now, seq=ctx.stamp())),
        early_timer=_early_timer(slot, expires_at, ctx),
        next_generation=ctx.generation,
    )


def _early_timer(slot: Slot | None, expires_at: int, ctx: _Ctx) -> ArmedTimer:
    """The one timer that expires a key's early input: the first held item's, kept if armed."""
    if slot is not None and slot.early_timer is not None:
        return slot.early_timer
    return ctx.arm(TimerKind.EARLY_REPLY, expires_at)


def _longest_early_ttl(definitions: Mapping[str, WaitDefinition]) -> int:
    return max((d.early_reply_ttl_ms for d in definitions.values()),
               default=DEFAULT_EARLY_REPLY_TTL_MS)


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
            return _trace(w, ctx.now, "poll_result", "not ready; polling goes on")
        if ready is not True:
            issue = f"Expected responseData.resultReady to be true or false, but got {ready!r}"
    if issue is None:
        issue = text_issue(d.response_schema, data, value)
    who = _who(channel, party)
    if d.variant is Variant.FIRST_VALID:
        if issue is None and isinstance(value, dict) and value.get("replyAcceptable") is False:
            issue = "Expected an acceptable reply, but the party declined (replyAcceptable: false)"
        if issue is not None:
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


def _combine_stages(d: WaitDefinition, results: tuple[str, ...]) -> str:
    """Chained outcome: ``{"stage name": responseData, ...}`` so no stage's answer is lost."""
    combined: dict[str, object] = {}
    for stage, text in zip(d.stages, results, strict=False):
        parsed = parse_json(text)
        combined[stage.name] = parsed.value if parsed.issue is None else text
    return json.dumps(combined, separators=(",", ":"))


# ---------------------------------------------------------------- stages, timers, escalation


def _open_stage(w: Wait, d: WaitDefinition, ctx: _Ctx, *, start: int) -> Wait:
    stage = d.stages[w.stage]
    if d.variant is Variant.FIRST_VALID:
        for p in w.parties:
            _act(ctx, w, d, ActionKind.SEND_REQUEST, party=p, attempt=1, payload=w.payload)
    else:
        _act(ctx, w, d, ActionKind.SEND_REQUEST, party=stage.party, attempt=1, payload=w.payload)
    return _arm_phase(w, d, ctx, start=start)


def _arm_phase(w: Wait, d: WaitDefinition, ctx: _Ctx, *, start: int) -> Wait:
    """Arm the timers of the current stage and escalation level, counted from ``start``."""
    stage = d.stages[w.stage]
    if w.level == 0:
        deadline = w.deadline_override_ms or stage.deadline_ms
    else:
        deadline = stage.escalation[w.level - 1].deadline_ms
    timers = [ctx.arm(TimerKind.DEADLINE, start + deadline)]
    if w.level == 0 and stage.reminder is not None and w.stage_reminders < stage.reminder.limit:
        timers.append(ctx.arm(TimerKind.REMINDER, start + stage.reminder.interval_ms))
    if d.variant is Variant.PROBE and d.poll_interval_ms is not None:
        timers.append(ctx.arm(TimerKind.POLL, start + d.poll_interval_ms))
    return replace(w, timers=tuple(timers))


def _escalate(w: Wait, d: WaitDefinition, ctx: _Ctx, exhausted: OutcomeReason) -> Wait:
    """Rule 6: the next level waits again with its own deadline; after the last, escalated."""
    levels = d.stages[w.stage].escalation
    if w.level < len(levels):
        target = levels[w.level]
        w = replace(w, level=w.level + 1, status=WaitStatus.PARKED, timers=())
        _act(ctx, w, d, ActionKind.RUN_ESCALATION, party=target.target, attempt=1,
             payload=w.payload)
        w = _trace(w, ctx.now, "escalated", f"level {w.level} to {target.target}")
        return _arm_phase(w, d, ctx, start=ctx.now)
    if not levels:
        w = replace(w, level=1)
        _act(ctx, w, d, ActionKind.RUN_ESCALATION, party=None, attempt=1, payload=w.payload)
        w = _trace(w, ctx.now, "escalated", "level 1 (no further level defined)")
    return _end(w, d, ctx, OutcomeKind.ESCALATED, exhausted)


MAX_CATCH_UP = 10_000
"""Most timers one decision fires while catching up (a probe polling every
second, decided after a day without any record, would fire 86,400 polls).
What is left stays armed and overdue, and the punctuator emits it next."""


def _catch_up(slot: Slot | None, until: int, ctx: _Ctx) -> Slot | None:
    """Fire, in due order and each at its own due time, every timer armed by ``until``.

    Rule 2 by the broker's clock: an event appended at ``until`` comes after
    every timer due before it, whether or not that timer's record was
    processed yet.  So the outcome depends on when things happened, never on
    how fast the worker is or in which order the topics were read.
    """
    fired = 0
    while slot is not None and fired < MAX_CATCH_UP:
        timers = slot.armed_in_any_order()
        if not timers:
            break
        first = min(timers, key=_timer_order)
        if first.due_at > until:
            break
        ctx.now = first.due_at
        slot = _fire(slot, first, ctx)
        fired += 1
        if slot is None:
            ctx.generation = 1  # a purged key starts afresh, as if decided after the purge
        if slot is not None and first in slot.armed_in_any_order():
            break  # it could not fire (its definition is gone): rejected, left armed
    return slot


def _on_timer_record(slot: Slot | None, ev: TimerFired, ctx: _Ctx) -> Slot | None:
    """A timer record: decided at its due time, with every timer due before it.

    A record whose timer is no longer armed (superseded by a reply, a suspend,
    a re-arm, or already fired while catching up) changes nothing.  Whether a
    record's timer is due at all is the processor's check (stream time).
    """
    ctx.now = ev.due_at
    armed = _find_armed(slot, ev)
    if slot is None or armed is None:
        ctx.effects.append(Discard(
            DiscardReason.STALE_TIMER,
            f"Expected an armed {ev.kind.value} timer with generation {ev.generation} due at "
            f"{ev.due_at} under key {ev.wait_key!r}, but there is none",
        ))
        return slot
    return _catch_up(slot, ev.due_at, ctx)


def _fire(slot: Slot, armed: ArmedTimer, ctx: _Ctx) -> Slot | None:
    """Rules 2, 3, 6, 10 and the probe loop: one armed timer is due at ``ctx.now``."""
    if armed.kind is TimerKind.EARLY_REPLY:
        return _expire_early(slot, armed, ctx)
    w = slot.wait
    if w is None:  # unreachable: _find_armed matches wait timers only when a wait exists
        return slot
    if armed.kind is TimerKind.RETENTION:
        return None
    d = ctx.definitions.get(w.definition)
    if d is None:
        ctx.reject(RejectReason.UNKNOWN_DEFINITION, _missing_definition(w))
        return slot
    w = replace(w, timers=tuple(t for t in w.timers if t != armed))
    if armed.kind is TimerKind.REMINDER:
        w = _remind(w, d, ctx)
    elif armed.kind is TimerKind.POLL:
        polls = w.polls + 1
        w = replace(w, polls=polls)
        _act(ctx, w, d, ActionKind.POLL, party=None, attempt=polls, payload=w.payload)
        w = _trace(w, ctx.now, "poll", f"#{polls}")
        if d.poll_interval_ms is not None:
            w = replace(w, timers=(*w.timers, ctx.arm(TimerKind.POLL,
                                                      ctx.now + d.poll_interval_ms)))
    else:
        w = _trace(replace(w, timers=()), ctx.now, "deadline_passed", f"level {w.level}")
        w = _escalate(w, d, ctx, OutcomeReason.DEADLINE_EXHAUSTED)
    return replace(slot, wait=w)


def _find_armed(slot: Slot | None, ev: TimerFired) -> ArmedTimer | None:
    if slot is None:
        return None
    if ev.kind is TimerKind.EARLY_REPLY:
        candidates: tuple[ArmedTimer, ...] = (
            (slot.early_timer,) if slot.early_timer is not None else ()
        )
    else:
        candidates = slot.wait.timers if slot.wait is not None else ()
    for t in candidates:
        if t.kind is ev.kind and t.generation == ev.generation and t.due_at == ev.due_at:
            return t
    return None


def _remind(w: Wait, d: WaitDefinition, ctx: _Ctx) -> Wait:
    """Rule 3: nudge, then wait on the same wait; the next reminder until the limit."""
    stage = d.stages[w.stage]
    n = w.stage_reminders + 1
    w = replace(w, stage_reminders=n, reminders_sent=w.reminders_sent + 1)
    if d.variant is Variant.FIRST_VALID:
        for p in w.parties:
            _act(ctx, w, d, ActionKind.SEND_REMINDER, party=p, attempt=n, payload=w.payload)
    else:
        _act(ctx, w, d, ActionKind.SEND_REMINDER, party=stage.party, attempt=n,
             payload=w.payload)
    w = _trace(w, ctx.now, "reminder", f"#{n}")
    if stage.reminder is not None and n < stage.reminder.limit:
        w = replace(w, timers=(*w.timers, ctx.arm(TimerKind.REMINDER,
                                                  ctx.now + stage.reminder.interval_ms)))
    return w


def _expire_early(slot: Slot, armed: ArmedTimer, ctx: _Ctx) -> Slot | None:
    """Rule 7: early replies and commands whose TTL passed without a request become
    ``unmatched``."""
    ttl = _longest_early_ttl(ctx.definitions)
    cutoff = max(ctx.now, armed.due_at)
    kept: list[HeldReply] = []
    for held in slot.early_replies:
        if held.received_at + ttl <= cutoff:
            ctx.reject(
                RejectReason.UNMATCHED,
                f"Expected a request for key {_held_key(held)!r} within {format_span_ms(ttl)} "
                "of its reply, but none arrived",
                held.reply,
            )
        else:
            kept.append(held)
    kept_commands: list[HeldCommand] = []
    for hc in slot.early_commands:
        if hc.received_at + ttl <= cutoff:
            ctx.effects.append(Reject(
                RejectReason.UNMATCHED,
                f"Expected a request for key {hc.command.correlation_key!r} within "
                f"{format_span_ms(ttl)} of its {hc.command.command.value} command, but none "
                "arrived",
                command=hc.command,
            ))
        else:
            kept_commands.append(hc)
    if not kept and not kept_commands:
        return None
    first = min([h.received_at for h in kept] + [h.received_at for h in kept_commands])
    timer = ctx.arm(TimerKind.EARLY_REPLY, first + ttl)
    return replace(slot, early_replies=tuple(kept), early_commands=tuple(kept_commands),
                   early_timer=timer)


def _held_key(held: HeldReply) -> str:
    return split_correlation_key(held.reply.correlation_key)[0]


# ---------------------------------------------------------------- commands


def _on_command(slot: Slot | None, cmd: Command, ctx: _Ctx) -> Slot | None:
    if slot is None or slot.wait is None:
        return _buffer_early_command(slot, cmd, ctx)
    w = slot.wait
    new = _command_on_wait(w, cmd, ctx)
    return slot if new is w else replace(slot, wait=new)


def _command_on_wait(w: Wait, cmd: Command, ctx: _Ctx) -> Wait:
    outer = ctx.by
    ctx.by = (cmd.operator, cmd.reason)
    try:
        return _apply_command(w, cmd, ctx)
    finally:
        ctx.by = outer


def _apply_command(w: Wait, cmd: Command, ctx: _Ctx) -> Wait:
    if w.status is WaitStatus.DONE:
        ctx.reject(RejectReason.LATE, f"{_ended(w)}; {cmd.command.value} does nothing")
        return w
    d = ctx.definitions.get(w.definition)
    if cmd.command is CommandKind.CANCEL:
        return _cancel(w, d, ctx, cmd)
    if d is None:
        ctx.reject(RejectReason.UNKNOWN_DEFINITION, _missing_definition(w))
        return w
    if cmd.command is CommandKind.SUSPEND:
        return _suspend(w, ctx, cmd)
    if cmd.command is CommandKind.RESUME:
        return _resume(w, d, ctx)
    if cmd.command is CommandKind.DELIVER:
        return _deliver(w, d, ctx, cmd)
    if cmd.command is CommandKind.RESCHEDULE:
        return _reschedule(w, ctx, cmd)
    return _review(w, d, ctx, cmd)


def _suspend(w: Wait, ctx: _Ctx, cmd: Command) -> Wait:
    """Rule 9: keep the wait's place and what is left of each timer; decide nothing."""
    if w.status is WaitStatus.SUSPENDED:
        ctx.effects.append(Discard(DiscardReason.ALREADY_SUSPENDED,
                                   "Expected a wait to suspend, but it is already suspended"))
        return w
    # Negative when a timer was already due but not yet fired: it stays overdue on resume
    # and fires at once, but only once (each kind is armed once).
    remaining = tuple((t.kind, t.due_at - ctx.now) for t in sorted(w.timers, key=_timer_order))
    suspension = Suspension(reason=cmd.reason, at=ctx.now, resume_to=w.status,
                            remaining=remaining, operator=cmd.operator)
    w = replace(w, status=WaitStatus.SUSPENDED, suspension=suspension, timers=())
    return _trace(w, ctx.now, "suspended", _by(cmd.reason, cmd.operator))


def _resume(w: Wait, d: WaitDefinition, ctx: _Ctx) -> Wait:
    """Rule 9: restore each timer with what was left, then decide the recorded replies."""
    if w.status is not WaitStatus.SUSPENDED or w.suspension is None:
        ctx.effects.append(Discard(DiscardReason.NOT_SUSPENDED,
                                   f"Expected a suspended wait, but it is {w.status.value}"))
        return w
    s = w.suspension
    timers = tuple(ctx.arm(kind, ctx.now + left) for kind, left in s.remaining)
    held = w.held
    w = replace(w, status=s.resume_to, suspension=None, timers=timers, held=())
    w = _trace(w, ctx.now, "resumed", f"after {format_span_ms(ctx.now - s.at)} suspended")
    resumed_by = ctx.by
    for h in held:
        if w.status is not WaitStatus.PARKED:
            ctx.reject(
                RejectReason.LATE,
                "Expected the wait to be waiting for a reply, but "
                + ("it ended before this recorded reply was decided"
                   if w.status is WaitStatus.DONE
                   else "an earlier reply won and is in review"),
                h.reply,
            )
            continue
        _, party = split_correlation_key(h.reply.correlation_key)
        # Whoever sent the recorded reply settles the wait, not whoever resumed it.
        ctx.by = (h.operator, h.reason) if h.by_operator else None
        w = _judge(w, d, ctx, h.reply.response_data, h.reply.channel, party, h.reply,
                   by_operator=h.by_operator)
    ctx.by = resumed_by
    return w


def _cancel(w: Wait, d: WaitDefinition | None, ctx: _Ctx, cmd: Command) -> Wait:
    w = _trace(w, ctx.now, "cancelled", _by(cmd.reason, cmd.operator))
    if w.held:
        w = _trace(w, ctx.now, "undecided",
                   f"{len(w.held)} replies recorded while suspended were not decided")
    return _end(w, d, ctx, OutcomeKind.CANCELLED, OutcomeReason.CANCELLED_BY_OPERATOR)


def _deliver(w: Wait, d: WaitDefinition, ctx: _Ctx, cmd: Command) -> Wait:
    """Manual delivery by an operator: still validated, never channel- or tenant-checked."""
    if cmd.response_data is None:
        ctx.reject(RejectReason.INVALID_COMMAND,
                   "Expected responseData with DELIVER, but none was given")
        return w
    reply = Reply(correlation_key=w.key, response_data=cmd.response_data, tenant=w.tenant,
                  channel=OPERATOR_CHANNEL)
    if w.status is WaitStatus.SUSPENDED:
        if len(w.held) >= MAX_HELD_REPLIES:
            ctx.reject(RejectReason.OVERFLOW,
                       f"Expected at most {MAX_HELD_REPLIES} replies recorded while suspended, "
                       f"but {len(w.held)} are already recorded")
            return w
        w = replace(w, held=(*w.held, HeldReply(reply, ctx.now, by_operator=True,
                                                operator=cmd.operator, reason=cmd.reason)))
        return _trace(w, ctx.now, "delivery_recorded", _by(cmd.reason, cmd.operator))
    if w.status is WaitStatus.IN_REVIEW:
        ctx.reject(RejectReason.INVALID_COMMAND,
                   "Expected a parked wait for DELIVER, but it is in review: answer with REVIEW")
        return w
    w = _trace(w, ctx.now, "delivered", _by(cmd.reason, cmd.operator))
    return _judge(w, d, ctx, cmd.response_data, OPERATOR_CHANNEL, None, None, by_operator=True)


def _reschedule(w: Wait, ctx: _Ctx, cmd: Command) -> Wait:
    """Rule 11: move the current stage and level's deadline, to ``deadline`` from now or by
    ``move_by``; the wait is as the command's time left it (``_catch_up`` ran first).

    Only the deadline moves: reminders and polls keep their schedule (a
    deadline moved before a reminder simply ends the reminders when it
    passes).  A suspended wait's deadline is paused, so what moves is the
    time it will have left on resume.  A new deadline that is not in the
    future is refused, never applied as an instant escalation: the operator
    who wants that can say so with CANCEL.
    """
    given = [name for name, v in (("deadline", cmd.deadline), ("moveBy", cmd.move_by))
             if v is not None]
    if len(given) != 1:
        ctx.reject(RejectReason.INVALID_COMMAND,
                   "Expected exactly one of deadline and moveBy with RESCHEDULE, but got "
                   + (" and ".join(given) if given else "neither"))
        return w
    try:
        if cmd.deadline is not None:
            to, shift = parse_duration_ms(cmd.deadline), None
        else:
            to, shift = None, parse_signed_duration_ms(cmd.move_by or "")
    except ValueError as exc:
        ctx.reject(RejectReason.INVALID_COMMAND, f"{exc} (the RESCHEDULE's {given[0]})")
        return w
    if w.status is WaitStatus.IN_REVIEW:
        ctx.reject(RejectReason.INVALID_COMMAND,
                   "Expected a parked or suspended wait to reschedule, but it is in review: "
                   "the reply under review stopped its deadline")
        return w
    why = _by(cmd.reason, cmd.operator)
    if w.status is WaitStatus.SUSPENDED and w.suspension is not None:
        s = w.suspension
        left = next((ms for kind, ms in s.remaining if kind is TimerKind.DEADLINE), None)
        if left is None:
            ctx.reject(RejectReason.INVALID_COMMAND,
                       "Expected a paused deadline to move, but the suspended wait has none")
            return w
        new_left = to if to is not None else left + (shift or 0)
        if new_left <= 0:
            ctx.reject(RejectReason.DEADLINE_PASSED,
                       f"Expected the moved deadline to leave time when the wait resumes, but "
                       f"it would be {format_span_ms(-new_left)} past")
            return w
        remaining = tuple((kind, new_left if kind is TimerKind.DEADLINE else ms)
                          for kind, ms in s.remaining)
        w = replace(w, suspension=Suspension(s.reason, s.at, s.resume_to, remaining, s.operator))
        return _trace(w, ctx.now, "rescheduled",
                      f"deadline left on resume {format_span_ms(left)} -> "
                      f"{format_span_ms(new_left)}: {why}")
    deadline = next((t for t in w.timers if t.kind is TimerKind.DEADLINE), None)
    if deadline is None:
        ctx.reject(RejectReason.INVALID_COMMAND,
                   f"Expected an armed deadline to move, but the {w.status.value} wait has none")
        return w
    due = ctx.now + to if to is not None else deadline.due_at + (shift or 0)
    if due <= ctx.now:
        ctx.reject(RejectReason.DEADLINE_PASSED,
                   f"Expected a new deadline after the command's time {format_utc_ms(ctx.now)}, "
                   f"but {format_utc_ms(due)} has passed")
        return w
    timers = tuple(t for t in w.timers if t is not deadline)
    w = replace(w, timers=(*timers, ctx.arm(TimerKind.DEADLINE, due)))
    moved = due - deadline.due_at
    return _trace(w, ctx.now, "rescheduled",
                  f"deadline {format_utc_ms(deadline.due_at)} -> {format_utc_ms(due)} "
                  f"({'+' if moved >= 0 else ''}{format_span_ms(moved)}): {why}")


def _review(w: Wait, d: WaitDefinition, ctx: _Ctx, cmd: Command) -> Wait:
    """Rule 4: a person's decision on an invalid reply ends the wait (or stage) received."""
    if w.status is not WaitStatus.IN_REVIEW:
        ctx.reject(RejectReason.INVALID_COMMAND,
                   f"Expected the wait to be in review, but it is {w.status.value}")
        return w
    if cmd.review_outcome == ReviewOutcome.ACCEPT.value:
        data, valid, reason = w.response_data, False, OutcomeReason.REVIEW_ACCEPTED
    elif cmd.review_outcome == ReviewOutcome.SUBMIT_CORRECTION.value:
        parsed = parse_json(cmd.response_data)
        issue = parsed.issue or schema_issue(d.response_schema, parsed.value)
        if issue is not None:
            ctx.reject(RejectReason.INVALID_COMMAND, f"{issue} (in the submitted correction)")
            return w
        data, valid, reason = cmd.response_data, True, OutcomeReason.REVIEW_CORRECTED
    else:
        ctx.reject(
            RejectReason.INVALID_COMMAND,
            f"Expected reviewOutcome {ReviewOutcome.ACCEPT.value!r} or "
            f"{ReviewOutcome.SUBMIT_CORRECTION.value!r}, but got {cmd.review_outcome!r}",
        )
        return w
    w = replace(w, review_outcome=cmd.review_outcome, review_note=cmd.review_note,
                status=WaitStatus.PARKED)
    w = _trace(w, ctx.now, "reviewed", f"{cmd.review_outcome}: {cmd.review_note or ''}")
    return _accept(w, d, ctx, data, valid=valid, reason=reason, winner=None)


# ---------------------------------------------------------------- the end


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
    return Wait(
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
    )


def emitted_trace(w: Wait) -> tuple[TraceEntry, ...]:
    """The stored trace, with a marker where entries were dropped to bound the state."""
    if not w.trace_dropped:
        return w.trace
    head, tail = w.trace[:TRACE_HEAD], w.trace[TRACE_HEAD:]
    marker = TraceEntry(tail[0].at if tail else head[-1].at, "trace_truncated",
                        f"{w.trace_dropped} entries omitted")
    return (*head, marker, *tail)


# ---------------------------------------------------------------- helpers


def _act(
    ctx: _Ctx,
    w: Wait,
    d: WaitDefinition,
    kind: ActionKind,
    *,
    party: str | None,
    attempt: int,
    payload: str | None,
) -> None:
    per_party = d.variant is Variant.FIRST_VALID and party is not None and party in w.parties
    key = f"{w.key}{PARTY_SEPARATOR}{party}" if per_party else w.key
    ctx.effects.append(EmitAction(
        action_id=action_id(w.key, w.parked_at, kind, w.stage, w.level, party, attempt),
        correlation_key=key,
        definition=w.definition,
        tenant=w.tenant,
        action=kind,
        party=party,
        level=w.level,
        attempt=attempt,
        payload=payload,
        at=ctx.now,
    ))


def _trace(w: Wait, at: int, event: str, detail: str) -> Wait:
    trace = (*w.trace, TraceEntry(at, event, detail))
    dropped = w.trace_dropped
    if len(trace) > TRACE_HEAD + TRACE_TAIL:
        trace = trace[:TRACE_HEAD] + trace[TRACE_HEAD + 1:]
        dropped += 1
    return replace(w, trace=trace, trace_dropped=dropped)


def _remember_reply_id(w: Wait, reply: Reply) -> Wait:
    if reply.reply_id is None:
        return w
    return replace(w, reply_ids=(*w.reply_ids, reply.reply_id)[-MAX_REPLY_IDS:])


def _ended(w: Wait) -> str:
    outcome = w.outcome.value if w.outcome is not None else "?"
    ended = format_utc_ms(w.ended_at) if w.ended_at is not None else "?"
    return f"Expected a wait still waiting, but it ended {outcome} at {ended}"


def _missing_definition(w: Wait) -> str:
    return (f"Expected definition {w.definition!r} of wait {w.key!r} to be loaded, "
            "but it is not; restore it to let the wait finish")


def _who(channel: str, party: str | None) -> str:
    return f"channel {channel!r}" + (f", party {party!r}" if party is not None else "")


def _by(reason: str | None, operator: str | None) -> str:
    return f"{reason or 'no reason given'} (by {operator or 'unknown operator'})"
