"""Rule 12, the bookkeeping: which sends a wait has made, which are worth sending again.

The sends of a wait's current stage are derived, not stored: its requests,
its reminders (``stage_reminders`` of them) and its escalations (``level`` of
them), to the parties its definition names.  A wait stores a send
(``Wait.sends``) only once a result arrived for it, or it waits to go again:
a million parked waits whose adapters report nothing cost no byte more.

A send is *current* while sending it again can still help the wait: it
belongs to the stage and escalation level the wait is at, and no later send
of the same kind went to the same party since (a newer reminder supersedes an
older one).  Only current sends are retried; the one ``SEND_RETRY`` timer of a
wait is due when the first of them is (`_sync_retry` derives it from the
sends, as ``decide`` derives timer effects from the timers: they cannot
disagree).
"""

from __future__ import annotations

import dataclasses

from streams.core.copying import replace
from streams.core.definition import Variant, WaitDefinition
from streams.core.effects import ActionKind, OutcomeKind
from streams.core.events import TimerKind
from streams.core.rules.context import _act, _Ctx, _trace
from streams.core.state import MAX_SENDS, Send, SendState, Wait, WaitStatus

SendId = tuple[ActionKind, int, int, str | None, int]
"""A send's identity: kind, stage, level, party, attempt (its action id, send attempt 1)."""


def _id(s: Send) -> SendId:
    return s.kind, s.stage, s.level, s.party, s.attempt


def _send(ctx: _Ctx, w: Wait, d: WaitDefinition, kind: ActionKind, *, party: str | None,
          attempt: int, payload: str | None) -> Wait:
    """Emit an action whose result the wait takes (rule 12).

    A newer send of the same kind to the same party supersedes an older one
    still waiting to be sent again: that retry is dropped.
    """
    _act(ctx, w, d, kind, party=party, attempt=attempt, payload=payload)
    # The caller has moved the counters (stage, level, reminders) already: the
    # derived sends include this one.
    if any(s.state is SendState.RETRYING for s in w.sends):
        return _sync_retry(w, d, ctx)
    return w


def _derived(w: Wait, d: WaitDefinition | None) -> list[Send]:
    """The sends of the wait's current stage, as they went out, none of them stored."""
    if d is None or w.stage >= len(d.stages):
        return []
    stage = d.stages[w.stage]
    parties: tuple[str | None, ...] = (
        w.parties if d.variant is Variant.FIRST_VALID and w.parties else (stage.party,))
    levels = stage.escalation
    escalations = [Send(ActionKind.RUN_ESCALATION, w.stage, n,
                        levels[n - 1].target if n <= len(levels) else None, 1)
                   for n in range(1, w.level + 1)]
    if w.status is WaitStatus.DONE:
        # An ended wait still takes the result of its final escalation, if it ended so.
        return escalations[-1:] if w.outcome is OutcomeKind.ESCALATED else []
    sent = [Send(ActionKind.SEND_REQUEST, w.stage, 0, p, 1) for p in parties]
    sent += [Send(ActionKind.SEND_REMINDER, w.stage, 0, p, n)
             for n in range(1, w.stage_reminders + 1) for p in parties]
    return sent + escalations


def _all_sends(w: Wait, d: WaitDefinition | None) -> list[Send]:
    """Every send a result may name: the stored ones, and the current stage's derived ones
    (a stored send stands for the derived one of its identity), in the order they went."""
    stored = {_id(s): s for s in w.sends}
    derived = _derived(w, d)
    seen = {_id(s) for s in derived}
    return [*(s for s in w.sends if _id(s) not in seen),
            *(stored.get(_id(s), s) for s in derived)]


def _what(send: Send) -> str:
    """How a trace names one send: ``SEND_REMINDER #2 to carrier-a``."""
    text = send.kind.value
    if send.kind is ActionKind.SEND_REMINDER:
        text += f" #{send.attempt}"
    if send.kind is ActionKind.RUN_ESCALATION:
        text += f" (level {send.level})"
    if send.party is not None:
        text += f" to {send.party}"
    return text


def _is_current(w: Wait, send: Send, sends: list[Send]) -> bool:
    """Whether sending it again can still help (see the module's docstring)."""
    if (send.stage, send.level) != (w.stage, w.level):
        return False
    if w.status is WaitStatus.DONE and send.kind is not ActionKind.RUN_ESCALATION:
        return False
    ids = [_id(s) for s in sends]
    later = sends[ids.index(_id(send)) + 1:] if _id(send) in ids else []
    return not any(s.kind is send.kind and s.party == send.party
                   and (s.stage, s.level) == (send.stage, send.level) for s in later)


def _stored(w: Wait, send: Send) -> Wait:
    """The wait storing `send` (in place of the one of its identity, if stored)."""
    kept = [s for s in w.sends if _id(s) != _id(send)]
    return replace(w, sends=(*kept, send)[-MAX_SENDS:])


def _sync_retry(w: Wait, d: WaitDefinition | None, ctx: _Ctx) -> Wait:
    """The wait's SEND_RETRY timer, due at the first current send waiting to go again.

    A retrying send of a phase the wait has left, or superseded, is not sent
    again: it failed.
    """
    sends = _all_sends(w, d)
    stored = list(w.sends)
    due: int | None = None
    for i, s in enumerate(stored):
        if s.state is not SendState.RETRYING:
            continue
        if not _is_current(w, s, sends) or s.retry_at is None:
            stored[i] = dataclasses.replace(s, state=SendState.FAILED, retry_at=None)
        elif due is None or s.retry_at < due:
            due = s.retry_at
    if stored != list(w.sends):
        w = replace(w, sends=tuple(stored))
    armed = [t for t in w.timers if t.kind is TimerKind.SEND_RETRY]
    if due is None:
        return replace(w, timers=tuple(t for t in w.timers if t.kind is not TimerKind.SEND_RETRY)
                       ) if armed else w
    if len(armed) == 1 and armed[0].due_at == due:
        return w
    others = tuple(t for t in w.timers if t.kind is not TimerKind.SEND_RETRY)
    return replace(w, timers=(*others, ctx.arm(TimerKind.SEND_RETRY, due)))


def _retry_sends(w: Wait, d: WaitDefinition, ctx: _Ctx) -> Wait:
    """The SEND_RETRY timer is due: every current send whose backoff has passed goes again,
    with its next send attempt (a new action id)."""
    sends = _all_sends(w, d)
    for s in list(w.sends):
        if s.state is not SendState.RETRYING or s.retry_at is None or s.retry_at > ctx.now:
            continue
        if not _is_current(w, s, sends):
            continue  # _sync_retry below marks it failed
        tries = s.tries + 1
        _act(ctx, w, d, s.kind, party=s.party, attempt=s.attempt, payload=w.payload,
             send_attempt=tries)
        w = _stored(w, dataclasses.replace(s, tries=tries, state=SendState.PENDING,
                                           retry_at=None))
        w = _trace(w, ctx.now, "send_retried", f"{_what(s)}, send attempt {tries}")
    return _sync_retry(w, d, ctx)


def _shift_retries(w: Wait, by: int) -> Wait:
    """Suspended time does not count against a backoff either (rule 9): move each retry."""
    if not by or not any(s.retry_at is not None for s in w.sends):
        return w
    return replace(w, sends=tuple(
        dataclasses.replace(s, retry_at=s.retry_at + by) if s.retry_at is not None else s
        for s in w.sends))
