"""Rules 2, 3 and 6: time passing - reminders, deadlines, polls, escalation levels.

A timer is decided at its due time, and every timer due before an event is
decided before it (`_catch_up`), so an outcome depends on when things
happened, never on when a timer record arrived.
"""

from __future__ import annotations

from streams.core.copying import replace
from streams.core.definition import (
    Variant,
    WaitDefinition,
)
from streams.core.effects import (
    ActionKind,
    Discard,
    DiscardReason,
    OutcomeKind,
    OutcomeReason,
    RejectReason,
)
from streams.core.events import (
    TimerFired,
    TimerKind,
)
from streams.core.rules.context import (
    _act,
    _Ctx,
    _missing_definition,
    _timer_order,
    _trace,
)
from streams.core.rules.early import _expire_early
from streams.core.rules.ending import _end
from streams.core.rules.sends import _retry_sends, _send
from streams.core.state import (
    ArmedTimer,
    Slot,
    Wait,
    WaitStatus,
)


def _open_stage(w: Wait, d: WaitDefinition, ctx: _Ctx, *, start: int) -> Wait:
    stage = d.stages[w.stage]
    if d.variant is Variant.FIRST_VALID:
        for p in w.parties:
            w = _send(ctx, w, d, ActionKind.SEND_REQUEST, party=p, attempt=1, payload=w.payload)
    else:
        w = _send(ctx, w, d, ActionKind.SEND_REQUEST, party=stage.party, attempt=1,
                  payload=w.payload)
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
        w = _send(ctx, w, d, ActionKind.RUN_ESCALATION, party=target.target, attempt=1,
                  payload=w.payload)
        because = " (send_failed)" if exhausted is OutcomeReason.SEND_FAILED else ""
        w = _trace(w, ctx.now, "escalated", f"level {w.level} to {target.target}{because}")
        return _arm_phase(w, d, ctx, start=ctx.now)
    if not levels:
        w = replace(w, level=1)
        w = _send(ctx, w, d, ActionKind.RUN_ESCALATION, party=None, attempt=1,
                  payload=w.payload)
        w = _trace(w, ctx.now, "escalated", "level 1 (no further level defined)")
    return _end(w, d, ctx, OutcomeKind.ESCALATED, exhausted)


MAX_CATCH_UP = 10_000
"""Most timers one decision fires while catching up (a probe polling every
second, decided after a day without any record, would fire 86,400 polls).
What is left stays armed and overdue, and the worker fires it next."""


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
    d = ctx.definition_of(w)
    if d is None and w.status is WaitStatus.DONE:
        # An ended wait's escalation cannot be sent again without its definition; its
        # retention must still come (a timer left armed would hold it back).
        w = replace(w, timers=tuple(t for t in w.timers if t != armed))
        return replace(slot, wait=_trace(w, ctx.now, "send_retry_dropped",
                                         _missing_definition(w)))
    if d is None:
        ctx.reject(RejectReason.UNKNOWN_DEFINITION, _missing_definition(w))
        return slot
    w = replace(w, timers=tuple(t for t in w.timers if t != armed))
    if armed.kind is TimerKind.SEND_RETRY:
        return replace(slot, wait=_retry_sends(w, d, ctx))
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
            w = _send(ctx, w, d, ActionKind.SEND_REMINDER, party=p, attempt=n,
                      payload=w.payload)
    else:
        w = _send(ctx, w, d, ActionKind.SEND_REMINDER, party=stage.party, attempt=n,
                  payload=w.payload)
    w = _trace(w, ctx.now, "reminder", f"#{n}")
    if stage.reminder is not None and n < stage.reminder.limit:
        w = replace(w, timers=(*w.timers, ctx.arm(TimerKind.REMINDER,
                                                  ctx.now + stage.reminder.interval_ms)))
    return w
