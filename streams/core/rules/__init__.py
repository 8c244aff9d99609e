"""decide(slot, event, now) -> (slot, effects): every rule of the wait, as one pure function.

The numbered rules are those of docs/rules.md, which names for each the
module that keeps it and the tests that prove it.  One module per kind of
event, as Zeebe keeps one processor per intent:

    __init__.py   decide, catch_up: the dispatch                         rule 2
    requests.py   parking a wait, and the input held for it               rules 1, 2, 7
    replies.py    correlation, tenant, the race, validation, review       rules 1, 2, 4
    early.py      replies and commands that overtook their request        rule 7
    timers.py     reminders, deadlines, polls, escalation levels          rules 2, 3, 6
    commands.py   suspend, resume, cancel, deliver, reschedule, review,   rules 4, 9, 11, 13
                  migrate
    results.py    what became of each send: retries, the declared path    rule 12
    sends.py      which sends a wait remembers and sends again            rule 12
    ending.py     the one outcome, and what a finished wait keeps         rules 5, 10
    context.py    one decision's scratch and the verbs every handler uses rule 8
    ids.py        deterministic outcome and action ids (the contract)

Nothing here reads a clock, a table or the network: the processor loads the
slot, passes the record and the time, stores the returned slot and applies the
effects.  Replaying the same inputs therefore reproduces the same states and
effects, which is what makes a crashed worker's replacement agree with it.

Timer bookkeeping is derived, not hand-written: handlers only change the
timers held in the state, and ``decide`` emits ``DisarmTimer``/``ArmTimer`` by
diffing ``Slot.armed_timers()`` before and after, so effects and state cannot
disagree.
"""

from __future__ import annotations

from collections.abc import Mapping

from streams.core.definition import WaitDefinition
from streams.core.events import ActionResult, Event, Reply, StartWait, TimerFired
from streams.core.rules.commands import _on_command
from streams.core.rules.context import OPERATOR_CHANNEL, Decision, _Ctx, _finish
from streams.core.rules.ending import emitted_trace
from streams.core.rules.ids import action_id, outcome_id
from streams.core.rules.replies import _on_reply_record
from streams.core.rules.requests import _on_start
from streams.core.rules.results import _on_result_record
from streams.core.rules.timers import MAX_CATCH_UP, _catch_up, _on_timer_record
from streams.core.state import Slot

__all__ = ["MAX_CATCH_UP", "OPERATOR_CHANNEL", "Decision", "action_id", "catch_up", "decide",
           "emitted_trace", "outcome_id"]


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
        elif isinstance(event, ActionResult):
            new = _on_result_record(current, event, ctx)
        else:
            new = _on_command(current, event, ctx)

    return _finish(slot, new, ctx)


def catch_up(slot: Slot | None, now_ms: int,
             definitions: Mapping[str, WaitDefinition]) -> Decision:
    """What the passing of time alone does to a slot by ``now_ms``: its due timers fire.

    ``decide`` does this before every request, reply and command; on its own
    it answers "where would this wait be now, with no other input?".
    """
    ctx = _Ctx(now_ms, definitions, slot.next_generation if slot is not None else 1)
    return _finish(slot, _catch_up(slot, now_ms, ctx), ctx)
