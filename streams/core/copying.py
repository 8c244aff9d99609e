"""A fast, type-checked ``replace`` for the two records decisions copy most: Wait and Slot.

``dataclasses.replace`` costs about 26 us a call on Python 3.11 (it walks the
fields, checks init-only ones and goes through ``__init__``); a decision
makes three to six copies, which was the largest single cost of deciding a
reply (measured with cProfile, 24,000 calls in 0.63 s of 4.5 s).  Building
the copy slot by slot costs a few microseconds.

The overloads keep mypy's checking of the field names and types that it gives
``dataclasses.replace``: the changes are typed by a TypedDict per class, and
a test keeps each TypedDict equal to the class's fields.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, TypedDict, Unpack, overload

from streams.core.effects import OutcomeKind, OutcomeReason, TraceEntry
from streams.core.state import (
    ArmedTimer,
    HeldCommand,
    HeldReply,
    Slot,
    Suspension,
    Wait,
    WaitStatus,
)

__all__ = ["SlotChanges", "WaitChanges", "replace"]


class WaitChanges(TypedDict, total=False):
    key: str
    definition: str
    tenant: str | None
    parked_at: int
    status: WaitStatus
    payload: str | None
    parties: tuple[str, ...]
    deadline_override_ms: int | None
    stage: int
    level: int
    stage_reminders: int
    reminders_sent: int
    polls: int
    reviews: int
    timers: tuple[ArmedTimer, ...]
    suspension: Suspension | None
    held: tuple[HeldReply, ...]
    response_data: str | None
    response_valid: bool
    validation_issue: str | None
    review_outcome: str | None
    review_note: str | None
    stage_results: tuple[str, ...]
    outcome: OutcomeKind | None
    reason: OutcomeReason | None
    ended_at: int | None
    reply_ids: tuple[str, ...]
    trace: tuple[TraceEntry, ...]
    trace_dropped: int
    operator: str | None
    operator_reason: str | None
    payload_dropped: bool


class SlotChanges(TypedDict, total=False):
    wait: Wait | None
    early_replies: tuple[HeldReply, ...]
    early_timer: ArmedTimer | None
    next_generation: int
    early_commands: tuple[HeldCommand, ...]


_FIELDS: dict[type, tuple[str, ...]] = {
    cls: tuple(f.name for f in fields(cls)) for cls in (Wait, Slot)
}


@overload
def replace(obj: Wait, /, **changes: Unpack[WaitChanges]) -> Wait: ...


@overload
def replace(obj: Slot, /, **changes: Unpack[SlotChanges]) -> Slot: ...


def replace(obj: Any, /, **changes: Any) -> Any:
    """A copy of `obj` with `changes`, as ``dataclasses.replace`` makes it, faster."""
    cls = type(obj)
    names = _FIELDS[cls]
    for name in changes:
        if name not in names:
            raise TypeError(f"{cls.__name__} has no field {name!r}")
    new = object.__new__(cls)
    set_field = object.__setattr__
    for name in names:
        set_field(new, name, changes[name] if name in changes else getattr(obj, name))
    return new
