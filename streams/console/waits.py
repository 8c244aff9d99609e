"""What the console shows of a wait, read from the waits table of this worker.

Reads only: nothing here writes the table (operators change waits through
Command records).  A wait is listed while it is not done (parked, in_review,
suspended); its *next due time* is the earliest of its armed timers, and a
suspended wait (its timers are paused) has none and is listed last.

Cost: a list walks the table rows of the owned partitions but reads only
each row's head (state, definition, tenant, timers: `RowHead`), keeps the
`limit` first by next due time, and decodes only those slots.
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from streams.core import HeldCommand, HeldReply, Slot, Wait, WaitStatus, decode_slot
from streams.processor.envelope import RowDecodeError, decode_row, read_head
from streams.processor.model import RowHead

# Rows read between two yields to the event loop while scanning: a scan of a
# large table must not stall the agent and the punctuator for its duration.
SCAN_YIELD_EVERY = 2000

STATES = tuple(s.value for s in WaitStatus)


@dataclass(frozen=True)
class Filters:
    state: str | None = None
    definition: str | None = None
    tenant: str | None = None

    def match(self, head: RowHead) -> bool:
        """A wait in this state (any but done when no state is asked), definition, tenant."""
        if head.state is None:
            return False
        return ((head.state.value == self.state if self.state is not None
                 else head.state is not WaitStatus.DONE)
                and (self.definition is None or head.definition == self.definition)
                and (self.tenant is None or head.tenant == self.tenant))


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


SortKey = tuple[int, int, str]


class _Latest:
    """Heap entry ordered backwards, so the heap's head is the last of the first `limit`."""

    __slots__ = ("key", "partition", "sort")

    def __init__(self, sort: SortKey, key: bytes, partition: int) -> None:
        self.sort, self.key, self.partition = sort, key, partition

    def __lt__(self, other: _Latest) -> bool:
        return self.sort > other.sort


async def first_waits(rows: Iterable[tuple[int, bytes, bytes]], filters: Filters,
                      limit: int) -> list[tuple[bytes, int]]:
    """The keys (and partitions) of the `limit` matching waits due first, in that order.

    Reads row heads only and holds at most `limit` entries, whatever the
    table's size; yields to the event loop every `SCAN_YIELD_EVERY` rows.
    """
    heap: list[_Latest] = []
    seen = 0
    for partition, key, value in rows:
        seen += 1
        if seen % SCAN_YIELD_EVERY == 0:
            await asyncio.sleep(0)
        try:
            head = read_head(value)
        except RowDecodeError:  # a row this version cannot read: the processor reports it
            continue
        if not filters.match(head):
            continue
        due = head.next_due
        entry = _Latest((0 if due is not None else 1, due if due is not None else head.parked_at,
                         key.decode(errors="replace")), key, partition)
        if len(heap) < limit:
            heapq.heappush(heap, entry)
        elif entry.sort < heap[0].sort:
            heapq.heapreplace(heap, entry)
    return [(e.key, e.partition) for e in sorted(heap, key=lambda e: e.sort)]


def sort_key(item: dict[str, Any]) -> tuple[int, int, str]:
    """Next due first; waits without a due time (suspended) last, by park time."""
    due = item.get("nextDueAt")
    return (0 if due is not None else 1, due if due is not None else item["parkedAt"],
            item["key"])
