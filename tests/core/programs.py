"""What the property tests share: a wait driven by a random program of operations, each
decision kept as a step, and the invariants every step must keep."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from streams import core
from streams.core import catch_up, decide
from tests.core.core_harness import DEFINITIONS, KEY, T0

Op = tuple[Any, ...]
OBSERVED = (core.EmitAction, core.EmitOutcome, core.Reject)
"""The effects the outside world sees (timers are the worker's own business)."""


@dataclass
class Step:
    event: core.Event
    now: int
    before: core.Slot | None
    after: core.Slot | None
    effects: tuple[core.Effect, ...]


@dataclass
class Program:
    """One wait key, a clock the program moves, and every decision as a `Step`."""

    definition: str
    definitions: Mapping[str, core.WaitDefinition] = field(default_factory=lambda: DEFINITIONS)
    slot: core.Slot | None = None
    now: int = T0
    steps: list[Step] = field(default_factory=list)

    def decide(self, event: core.Event, *, via_codec: bool = False) -> tuple[core.Effect, ...]:
        """decide() on the slot (through the row codec with `via_codec`, as a worker that
        reads it back from RocksDB), the step kept."""
        slot = self.slot
        if via_codec and slot is not None:
            slot = core.decode_slot(core.encode_slot(slot))
        decision = decide(slot, event, self.now, self.definitions)
        self.steps.append(Step(event, self.now, self.slot, decision.slot, decision.effects))
        self.slot = decision.slot
        return decision.effects

    def fire(self, index: int) -> core.TimerFired | None:
        """One of the armed timers (by `index`), the clock moved to its due time as the
        punctuator would; None when none is armed."""
        armed = sorted(self.slot.armed_timers(), key=lambda t: (t.due_at, t.generation)) \
            if self.slot is not None else []
        if not armed:
            return None
        timer = armed[index % len(armed)]
        self.now = max(self.now, timer.due_at)
        return core.TimerFired(KEY, timer.kind, timer.due_at, timer.generation)

    def event_for(self, operation: Op) -> core.Event | None:
        """The event of one operation of the program (None: it only moved the clock).
        ("advance", ms) moves the clock in every program; the rest is `event_of`'s."""
        if operation[0] == "advance":
            self.now += int(operation[1])
            return None
        return self.event_of(operation)

    def event_of(self, operation: Op) -> core.Event | None:
        """The event of an operation other than "advance" (each program has its own)."""
        raise NotImplementedError

    def replay(self, ops: list[Op], *, punctual: bool, end: int
               ) -> tuple[core.Slot | None, list[core.Effect]]:
        """The events of `ops` at their times, and time passing to `end`: with `punctual`,
        each timer record decided the moment it is due, else none at all (a worker far
        behind its timers topic).  The slot at `end`, and what the outside world saw."""
        seen: list[core.Effect] = []
        for operation in ops:
            if punctual and operation[0] != "advance":
                seen += self.deliver_due(self.now)
            event = self.event_for(operation)
            if event is not None:
                seen += observed(self.decide(event))
        if punctual:
            seen += self.deliver_due(end)
        final = catch_up(self.slot, end, self.definitions)
        return final.slot, seen + observed(final.effects)

    def deliver_due(self, until: int) -> list[core.Effect]:
        """Every timer record due by `until`, decided the moment it is due; what they did
        that the outside world sees."""
        seen: list[core.Effect] = []
        while self.slot is not None:
            due = sorted((t for t in self.slot.armed_timers() if t.due_at <= until),
                         key=lambda t: (t.due_at, t.kind.value, t.generation))
            if not due:
                return seen
            t = due[0]
            seen += observed(self.decide(core.TimerFired(KEY, t.kind, t.due_at, t.generation)))
        return seen


def expand_pauses(ops: list[Op], suspend: Op, resume: Op) -> list[Op]:
    """("pause", ms, op or None) becomes suspend, the op, ms of time, resume: a macro, so
    that resumes are not left to luck."""
    out: list[Op] = []
    for o in ops:
        if o[0] != "pause":
            out.append(o)
            continue
        out.append(suspend)
        if o[2] is not None:
            out.append(o[2])
        out += [("advance", o[1]), resume]
    return out


def status(slot: core.Slot | None) -> core.WaitStatus | None:
    return slot.wait.status if slot is not None and slot.wait is not None else None


def observed(effects: tuple[core.Effect, ...]) -> list[core.Effect]:
    return [e for e in effects if isinstance(e, OBSERVED)]


def assert_refusals_say_why(effects: tuple[core.Effect, ...]) -> None:
    """Every rejection says what was expected and what was found instead."""
    for e in effects:
        if isinstance(e, core.Reject | core.Discard):
            assert e.detail.startswith("Expected ") and ", but " in e.detail, e.detail


def assert_nothing_decided_while_suspended(step: Step) -> None:
    """Only RESUME and CANCEL leave suspension; nothing else sends or arms anything."""
    if status(step.before) is not core.WaitStatus.SUSPENDED:
        return
    if isinstance(step.event, core.Command) and step.event.command in (core.CommandKind.RESUME,
                                                                       core.CommandKind.CANCEL):
        return
    assert status(step.after) is core.WaitStatus.SUSPENDED
    assert not [e for e in step.effects if isinstance(e, core.EmitAction | core.ArmTimer)]
