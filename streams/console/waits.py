"""What the console shows of a wait, read from the waits table of this worker.

Reads only: nothing here writes the table (operators change waits through
Command records).  A wait is listed while it is not done (parked, in_review,
suspended); its *next due time* is the earliest of its armed timers, and a
suspended wait (its timers are paused) has none and is listed last.

Cost: `scan` walks the table rows of the owned partitions and decodes each
slot, O(rows) per call; the console calls it once per list request and the
metrics once per cache period (see `streams.console.metrics`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any

from streams.core import HeldCommand, HeldReply, Slot, Wait, WaitStatus, decode_slot
from streams.partitioning import partition_for
from streams.processor.envelope import decode_row

# Rows decoded between two yields to the event loop while scanning: a scan of
# a large table must not stall the agent and the punctuator for its duration.
SCAN_YIELD_EVERY = 500

STATES = tuple(s.value for s in WaitStatus)


@dataclass(frozen=True)
class Filters:
    state: str | None = None
    definition: str | None = None
    tenant: str | None = None

    def match(self, wait: Wait) -> bool:
        return ((self.state is None or wait.status.value == self.state)
                and (self.definition is None or wait.definition == self.definition)
                and (self.tenant is None or wait.tenant == self.tenant))


def read_slot(value: Any) -> Slot | None:
    """The slot stored in a table value, or None (no row, no slot)."""
    if not isinstance(value, bytes):
        return None
    slot = decode_row(value).slot
    return decode_slot(slot) if slot is not None else None


def next_due(wait: Wait) -> int | None:
    return min((t.due_at for t in wait.timers), default=None)


def _held(h: HeldReply) -> dict[str, Any]:
    r = h.reply
    return {"correlationKey": r.correlation_key, "channel": r.channel, "tenant": r.tenant,
            "responseData": r.response_data, "replyId": r.reply_id, "sentAt": r.sent_at,
            "receivedAt": h.received_at, "byOperator": h.by_operator}


def _held_command(h: HeldCommand) -> dict[str, Any]:
    c = h.command
    return {"command": c.command.value, "reason": c.reason, "operator": c.operator,
            "receivedAt": h.received_at}


def summary(wait: Wait, partition: int) -> dict[str, Any]:
    """One line of the list."""
    return {
        "key": wait.key, "state": wait.status.value, "definition": wait.definition,
        "tenant": wait.tenant, "parkedAt": wait.parked_at, "nextDueAt": next_due(wait),
        "timers": [{"kind": t.kind.value, "dueAt": t.due_at}
                   for t in sorted(wait.timers, key=lambda t: t.due_at)],
        "partition": partition,
    }


def status(key: str, slot: Slot, partition: int) -> dict[str, Any]:
    """Everything the table knows of one key (a done wait is trimmed: see `Wait`)."""
    wait = slot.wait
    out: dict[str, Any] = {"key": key, "partition": partition,
                           "earlyReplies": [_held(h) for h in slot.early_replies],
                           "earlyCommands": [_held_command(h) for h in slot.early_commands]}
    if wait is None:
        out["state"] = None
        return out
    s = wait.suspension
    out.update({
        "state": wait.status.value, "definition": wait.definition, "tenant": wait.tenant,
        "parkedAt": wait.parked_at, "nextDueAt": next_due(wait),
        "timers": [{"kind": t.kind.value, "dueAt": t.due_at, "generation": t.generation}
                   for t in sorted(wait.timers, key=lambda t: t.due_at)],
        "suspension": None if s is None else {
            "reason": s.reason, "at": s.at, "resumeTo": s.resume_to.value,
            "operator": s.operator,
            "remaining": [{"kind": k.value, "ms": ms} for k, ms in s.remaining]},
        "stage": wait.stage, "escalationLevel": wait.level,
        "remindersSent": wait.reminders_sent, "polls": wait.polls, "reviews": wait.reviews,
        "parties": list(wait.parties), "payload": wait.payload,
        "held": [_held(h) for h in wait.held],
        "responseData": wait.response_data, "responseValid": wait.response_valid,
        "validationIssue": wait.validation_issue, "reviewOutcome": wait.review_outcome,
        "reviewNote": wait.review_note,
        "outcome": None if wait.outcome is None else wait.outcome.value,
        "reason": None if wait.reason is None else wait.reason.value,
        "endedAt": wait.ended_at,
        "trace": [{"at": e.at, "event": e.event, "detail": e.detail} for e in wait.trace],
        "traceDropped": wait.trace_dropped,
    })
    return out


async def scan(items: Iterable[tuple[Any, Any]], owned: set[int],
               partitions: int) -> AsyncIterator[tuple[Wait, int]]:
    """The waits stored in the owned partitions (any state), yielding to the loop now and then."""
    seen = 0
    for key, value in items:
        seen += 1
        if seen % SCAN_YIELD_EVERY == 0:
            await asyncio.sleep(0)
        if not isinstance(key, bytes):
            continue
        partition = partition_for(key, partitions)
        if partition not in owned:
            continue
        try:
            slot = read_slot(value)
        except ValueError:  # a row this version cannot read: the processor reports it
            continue
        if slot is not None and slot.wait is not None:
            yield slot.wait, partition


def sort_key(item: dict[str, Any]) -> tuple[int, int, str]:
    """Next due first; waits without a due time (suspended) last, by park time."""
    due = item.get("nextDueAt")
    return (0 if due is not None else 1, due if due is not None else item["parkedAt"],
            item["key"])
