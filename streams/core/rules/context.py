"""One decision's scratch (`_Ctx`), how its effects are finished (`_finish`), and the
small verbs every handler uses: act, trace, remember a reply id, explain.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from streams.core import operations
from streams.core.copying import replace
from streams.core.definition import (
    Variant,
    WaitDefinition,
    definition_for,
)
from streams.core.durations import (
    format_utc_ms,
)
from streams.core.effects import (
    ActionKind,
    ArmTimer,
    DisarmTimer,
    Effect,
    EmitAction,
    Purge,
    Reject,
    RejectReason,
    TraceEntry,
)
from streams.core.events import (
    PARTY_SEPARATOR,
    ActionResult,
    Command,
    Reply,
    TimerKind,
)
from streams.core.frozen import fast_init
from streams.core.rules.ids import action_id
from streams.core.state import (
    MAX_REPLY_IDS,
    TRACE_HEAD,
    TRACE_TAIL,
    ArmedTimer,
    Slot,
    Wait,
)

OPERATOR_CHANNEL = "operator"
"""The channel recorded for replies delivered by hand (DELIVER command)."""

TRACKED_SENDS = frozenset({ActionKind.SEND_REQUEST, ActionKind.SEND_REMINDER,
                           ActionKind.RUN_ESCALATION})
"""The actions whose results a wait takes (rule 12): what reaches the party or
the escalation's target.  Results of others (POLL, REVIEW_NEEDED, CLOSE_OUT)
are ``unmatched``."""


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


class _Ctx:
    """Per-decision scratch: the clock, effects gathered so far, the generation counter."""

    __slots__ = ("by", "definitions", "effects", "generation", "held_command", "held_result",
                 "now")

    def __init__(self, now: int, definitions: Mapping[str, WaitDefinition], generation: int):
        self.now = now
        self.definitions = definitions
        self.generation = generation
        self.effects: list[Effect] = []
        # The early command being applied, if any: what a rejection concerns.
        self.held_command: Command | None = None
        # The result held while suspended being decided, if any (as held_command).
        self.held_result: ActionResult | None = None
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
        result = self.held_result if reply is None else None
        self.effects.append(Reject(reason=reason, detail=detail, reply=reply, command=command,
                                   result=result))

    def definition_of(self, w: Wait) -> WaitDefinition | None:
        """The definition (and version, rule 13) the wait follows, if loaded."""
        return definition_for(self.definitions, w.definition, w.definition_version)


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


def _timer_order(t: ArmedTimer) -> tuple[int, str, int]:
    return (t.due_at, t.kind, t.generation)  # a StrEnum orders as its value


def _act(
    ctx: _Ctx,
    w: Wait,
    d: WaitDefinition,
    kind: ActionKind,
    *,
    party: str | None,
    attempt: int,
    payload: str | None,
    send_attempt: int = 1,
) -> None:
    per_party = d.variant is Variant.FIRST_VALID and party is not None and party in w.parties
    key = f"{w.key}{PARTY_SEPARATOR}{party}" if per_party else w.key
    first = action_id(w.key, w.parked_at, kind, w.stage, w.level, party, attempt)
    ctx.effects.append(EmitAction(
        # A retry is sent only while its stage and level are the wait's (rules/sends.py,
        # _is_current): the first attempt's id comes from the same fields.
        action_id=first if send_attempt == 1 else action_id(
            w.key, w.parked_at, kind, w.stage, w.level, party, attempt, send_attempt),
        correlation_key=key,
        definition=w.definition,
        tenant=w.tenant,
        action=kind,
        party=party,
        level=w.level,
        attempt=attempt,
        payload=payload,
        at=ctx.now,
        idempotency_key=first,
        send_attempt=send_attempt,
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
    which = (f"definition {w.definition!r}" if w.definition_version is None
             else f"version {w.definition_version!r} of definition {w.definition!r}")
    return (f"Expected {which} of wait {w.key!r} to be loaded, "
            "but it is not; restore it to let the wait finish")


def _who(channel: str, party: str | None) -> str:
    return f"channel {channel!r}" + (f", party {party!r}" if party is not None else "")


def _by(reason: str | None, operator: str | None, operation_id: str | None = None) -> str:
    return operations.by(reason, operator, operation_id)
