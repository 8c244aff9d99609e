"""Rule 12, the bookkeeping: which sends a wait remembers, which are worth sending again.

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
from streams.core.decide.context import _act, _Ctx, _trace
from streams.core.definition import WaitDefinition
from streams.core.effects import ActionKind
from streams.core.events import TimerKind
from streams.core.state import MAX_SENDS, Send, SendState, Wait, WaitStatus


def _send(ctx: _Ctx, w: Wait, d: WaitDefinition, kind: ActionKind, *, party: str | None,
          attempt: int, payload: str | None) -> Wait:
    """Emit an action whose result the wait takes (rule 12), and remember it.

    A newer send of the same kind to the same party supersedes an older one
    still waiting to be sent again: the retry is dropped.
    """
    _act(ctx, w, d, kind, party=party, attempt=attempt, payload=payload)
    send = Send(kind=kind, stage=w.stage, level=w.level, party=party, attempt=attempt)
    superseded = any(s.state is SendState.RETRYING for s in w.sends)
    w = replace(w, sends=(*w.sends, send)[-MAX_SENDS:])
    return _sync_retry(w, ctx) if superseded else w


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


def _is_current(w: Wait, index: int, send: Send) -> bool:
    """Whether sending it again can still help (see the module's docstring)."""
    if (send.stage, send.level) != (w.stage, w.level):
        return False
    if w.status is WaitStatus.DONE and send.kind is not ActionKind.RUN_ESCALATION:
        return False
    return not any(later.kind is send.kind and later.party == send.party
                   and (later.stage, later.level) == (send.stage, send.level)
                   for later in w.sends[index + 1:])


def _with_send(w: Wait, index: int, send: Send) -> Wait:
    return replace(w, sends=(*w.sends[:index], send, *w.sends[index + 1:]))


def _sync_retry(w: Wait, ctx: _Ctx) -> Wait:
    """The wait's SEND_RETRY timer, due at the first current send waiting to go again.

    A retrying send of a phase the wait has left is not sent again: it failed.
    """
    sends = list(w.sends)
    due: int | None = None
    for i, s in enumerate(sends):
        if s.state is not SendState.RETRYING:
            continue
        if not _is_current(w, i, s) or s.retry_at is None:
            sends[i] = dataclasses.replace(s, state=SendState.FAILED, retry_at=None)
        elif due is None or s.retry_at < due:
            due = s.retry_at
    if sends != list(w.sends):
        w = replace(w, sends=tuple(sends))
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
    for i, s in enumerate(w.sends):
        if s.state is not SendState.RETRYING or s.retry_at is None or s.retry_at > ctx.now:
            continue
        if not _is_current(w, i, s):
            continue  # _sync_retry below marks it failed
        tries = s.tries + 1
        _act(ctx, w, d, s.kind, party=s.party, attempt=s.attempt, payload=w.payload,
             send_attempt=tries)
        w = _with_send(w, i, dataclasses.replace(s, tries=tries, state=SendState.PENDING,
                                                 retry_at=None))
        w = _trace(w, ctx.now, "send_retried", f"{_what(s)}, send attempt {tries}")
    return _sync_retry(w, ctx)


def _shift_retries(w: Wait, by: int) -> Wait:
    """Suspended time does not count against a backoff either (rule 9): move each retry."""
    if not by or not any(s.retry_at is not None for s in w.sends):
        return w
    return replace(w, sends=tuple(
        dataclasses.replace(s, retry_at=s.retry_at + by) if s.retry_at is not None else s
        for s in w.sends))
