"""What the console shows of a wait, read from the waits table of this worker.

Reads only: nothing here writes the table (operators change waits through
Command records).  By default a list shows waits not done (parked,
in_review, suspended); `state=done` (or an `outcome`) shows finished waits,
which are kept with their outcome, response and trace until retention purges
them, and `state=all` both.  A wait's *next due time* is the earliest of its
armed timers; a finished wait's only timer is its purge, shown as `purgeAt`
rather than as something due.

Order and pages: waits are listed by (has a due time, due time or park time,
key); a suspended wait (timers paused) comes after every wait with a due
time.  Each listed wait carries that sort position as an opaque `cursor`;
`after=<cursor>` asks for the waits after it, so pages merged from several
workers never skip or repeat a wait.

Cost: a list walks the table rows of the owned partitions but reads only
each row's head (state, definition, tenant, park time, timers: `RowHead`),
keeps the `limit` first by sort position, and decodes only those slots -
except with an `outcome`, `reason` or end-time filter, which decodes the
finished waits that match the other filters (the head holds none of them).
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from streams.core import (
    HeldCommand,
    HeldReply,
    OutcomeReason,
    Send,
    Slot,
    TimerKind,
    Wait,
    WaitDefinition,
    WaitStatus,
    decode_slot,
    definition_for,
)
from streams.core.rules import emitted_trace
from streams.processor.envelope import RowDecodeError, decode_row, read_head
from streams.processor.model import RowHead

# Rows read between two yields to the event loop while scanning: a scan of a
# large table must not stall the applier and the stream clock for its duration.
SCAN_YIELD_EVERY = 2000
# Most index entries a page reads before the list falls back to a scan of the table.
INDEX_BUDGET = 20_000

STATES = tuple(s.value for s in WaitStatus)
ALL = "all"
OUTCOMES = ("RECEIVED", "ESCALATED", "CANCELLED")
REASONS = tuple(r.value for r in OutcomeReason)

SortKey = tuple[int, int, str]


def cursor_of(sort: SortKey) -> str:
    """The opaque page position of a sort key: `group.time.key` (the key last: it may hold dots)."""
    return f"{sort[0]}.{sort[1]}.{sort[2]}"


def parse_cursor(text: str) -> SortKey:
    """The sort key of a cursor; ValueError with an "Expected …, but …" text."""
    group, _, rest = text.partition(".")
    time, _, key = rest.partition(".")
    try:
        parsed = (int(group), int(time), key)
    except ValueError:
        parsed = (-1, 0, "")
    if parsed[0] not in (0, 1) or not key:
        raise ValueError(f"Expected a cursor from a previous page, but got {text!r}")
    return parsed


@dataclass(frozen=True)
class Filters:
    """What an operator searches by; None is "any".

    `state` None means every state but done; `ALL` means every state.  An
    `outcome`, a `reason` or an end time implies done.  `parked_from`/`parked_to`
    bound the park time, `ended_from`/`ended_to` the end time (epoch ms, both
    included): the diagram's counts over the last hour list their waits by it.
    `due_from`/`due_to` bound the next due time (the earliest armed timer) of a
    wait not done; a wait with none armed (suspended) never matches them.
    `version` is the definition's version the wait follows.
    """

    state: str | None = None
    definition: str | None = None
    tenant: str | None = None
    key_prefix: str | None = None
    outcome: str | None = None
    parked_from: int | None = None
    parked_to: int | None = None
    reason: str | None = None
    ended_from: int | None = None
    ended_to: int | None = None
    version: str | None = None
    due_from: int | None = None
    due_to: int | None = None

    @property
    def of_ended(self) -> bool:
        """Whether a filter only the decoded wait can tell is set (outcome, reason, end)."""
        return (self.outcome is not None or self.reason is not None
                or self.ended_from is not None or self.ended_to is not None)

    def match(self, key: bytes, head: RowHead) -> bool:
        """What the row head can tell (everything but the outcome, reason and end time)."""
        if head.state is None:
            return False
        if self.of_ended or self.state == WaitStatus.DONE.value:
            state_ok = head.state is WaitStatus.DONE
        elif self.state == ALL:
            state_ok = True
        elif self.state is not None:
            state_ok = head.state.value == self.state
        else:
            state_ok = head.state is not WaitStatus.DONE
        return (state_ok
                and (self.definition is None or head.definition == self.definition)
                and (self.tenant is None or head.tenant == self.tenant)
                and (self.key_prefix is None or key.startswith(self.key_prefix.encode()))
                and (self.parked_from is None or head.parked_at >= self.parked_from)
                and (self.parked_to is None or head.parked_at <= self.parked_to)
                and (self.version is None or head.version == self.version)
                and self._due_ok(head))

    @property
    def of_due(self) -> bool:
        """Whether the next due time is bounded."""
        return self.due_from is not None or self.due_to is not None

    def _due_ok(self, head: RowHead) -> bool:
        if not self.of_due:
            return True
        due = head.next_due  # a finished wait's only timer is its purge, not a due time
        return (head.state is not WaitStatus.DONE and due is not None
                and (self.due_from is None or due >= self.due_from)
                and (self.due_to is None or due <= self.due_to))

    def match_wait(self, wait: Wait) -> bool:
        """What only the decoded wait can tell."""
        ended = wait.ended_at
        return ((self.outcome is None
                 or (wait.outcome is not None and wait.outcome.value == self.outcome))
                and (self.reason is None
                     or (wait.reason is not None and wait.reason.value == self.reason))
                and (self.ended_from is None or (ended is not None and ended >= self.ended_from))
                and (self.ended_to is None or (ended is not None and ended <= self.ended_to)))


def read_slot(value: Any) -> Slot | None:
    """The slot stored in a table value, or None (no row, no slot)."""
    if not isinstance(value, bytes):
        return None
    slot = decode_row(value).slot
    return decode_slot(slot) if slot is not None else None


def next_due(wait: Wait) -> int | None:
    """When the wait's next timer is due; None for a finished wait (its timer is its purge)."""
    if wait.status is WaitStatus.DONE:
        return None
    return min((t.due_at for t in wait.timers), default=None)


def purge_at(wait: Wait) -> int | None:
    return next((t.due_at for t in wait.timers if t.kind is TimerKind.RETENTION), None)


def sort_of(key: str, head_due: int | None, parked_at: int) -> SortKey:
    return (0 if head_due is not None else 1,
            head_due if head_due is not None else parked_at, key)


def stage_of(wait: Wait, definitions: Mapping[str, WaitDefinition]) -> dict[str, Any] | None:
    """Which stage (of chained waits) and whose answer the wait waits for now.

    None when the definition is no longer loaded: the console then shows
    the stage's number only.
    """
    d = definition_for(definitions, wait.definition, wait.definition_version)
    if d is None or wait.stage >= len(d.stages):
        return None
    stage = d.stages[wait.stage]
    target = None
    if wait.level > 0 and wait.level <= len(stage.escalation):
        target = stage.escalation[wait.level - 1].target
    shown = {"index": wait.stage, "count": len(d.stages), "name": stage.name,
             "party": stage.party, "escalatedTo": target, "variant": d.variant.value}
    return {**shown, "text": stage_text(shown)}


def stage_text(stage: Mapping[str, Any]) -> str:
    """Where the wait stands, as a person reads it; "" when there is nothing to say.

    "2 of 3: finance (party acme)" for chained stages; a one-stage wait says
    only its party, if any; ", escalated to TARGET" follows whatever came
    before, and stands alone ("escalated to director") when nothing did.
    The console's page and `xwait status` show this text as it is.
    """
    parts = []
    if stage["count"] > 1:
        parts.append(f"{stage['index'] + 1} of {stage['count']}: {stage['name']}"
                     + (f" (party {stage['party']})" if stage.get("party") else ""))
    elif stage.get("party"):
        parts.append(str(stage["party"]))
    if stage.get("escalatedTo"):
        parts.append(f"escalated to {stage['escalatedTo']}")
    return ", ".join(parts)


def _held(h: HeldReply) -> dict[str, Any]:
    r = h.reply
    return {"correlationKey": r.correlation_key, "channel": r.channel, "tenant": r.tenant,
            "responseData": r.response_data, "replyId": r.reply_id, "sentAt": r.sent_at,
            "receivedAt": h.received_at, "byOperator": h.by_operator, "operator": h.operator}


def _send(s: Send) -> dict[str, Any]:
    """One send whose result the wait takes (rule 12)."""
    return {"action": s.kind.value, "party": s.party, "level": s.level, "attempt": s.attempt,
            "sendAttempt": s.tries, "state": s.state.value, "retryAt": s.retry_at,
            "error": s.error}


def _held_command(h: HeldCommand) -> dict[str, Any]:
    c = h.command
    return {"command": c.command.value, "reason": c.reason, "operator": c.operator,
            "receivedAt": h.received_at}


def summary(wait: Wait, partition: int, definitions: Mapping[str, WaitDefinition],
            sort: SortKey) -> dict[str, Any]:
    """One line of the list."""
    return {
        "key": wait.key, "state": wait.status.value, "definition": wait.definition,
        "tenant": wait.tenant, "parkedAt": wait.parked_at, "nextDueAt": next_due(wait),
        "timers": [{"kind": t.kind.value, "dueAt": t.due_at}
                   for t in sorted(wait.timers, key=lambda t: t.due_at)
                   if wait.status is not WaitStatus.DONE],
        "outcome": None if wait.outcome is None else wait.outcome.value,
        "reason": None if wait.reason is None else wait.reason.value,
        "endedAt": wait.ended_at, "purgeAt": purge_at(wait),
        "stage": stage_of(wait, definitions), "escalationLevel": wait.level,
        "partition": partition, "cursor": cursor_of(sort),
    }


def status(key: str, slot: Slot, partition: int,
           definitions: Mapping[str, WaitDefinition]) -> dict[str, Any]:
    """Everything the table knows of one key, a finished wait's history included."""
    wait = slot.wait
    out: dict[str, Any] = {"key": key, "partition": partition,
                           "earlyReplies": [_held(h) for h in slot.early_replies],
                           "earlyCommands": [_held_command(h) for h in slot.early_commands]}
    if wait is None:
        out["state"] = None
        return out
    s = wait.suspension
    done = wait.status is WaitStatus.DONE
    trace = emitted_trace(wait)
    out.update({
        "state": wait.status.value, "definition": wait.definition, "tenant": wait.tenant,
        "definitionVersion": wait.definition_version,
        "parkedAt": wait.parked_at, "nextDueAt": next_due(wait),
        "timers": [] if done else [
            {"kind": t.kind.value, "dueAt": t.due_at, "generation": t.generation}
            for t in sorted(wait.timers, key=lambda t: t.due_at)],
        "purgeAt": purge_at(wait) if done else None,
        "suspension": None if s is None else {
            "reason": s.reason, "at": s.at, "resumeTo": s.resume_to.value,
            "operator": s.operator,
            "remaining": [{"kind": k.value, "ms": ms} for k, ms in s.remaining]},
        "stage": stage_of(wait, definitions), "escalationLevel": wait.level,
        "remindersSent": wait.reminders_sent, "polls": wait.polls, "reviews": wait.reviews,
        "parties": list(wait.parties), "payload": wait.payload,
        "payloadDropped": wait.payload_dropped,
        "held": [_held(h) for h in wait.held],
        "responseData": wait.response_data,
        "responseValid": wait.response_valid if wait.response_data is not None else None,
        "validationIssue": wait.validation_issue, "reviewOutcome": wait.review_outcome,
        "reviewNote": wait.review_note,
        "outcome": None if wait.outcome is None else wait.outcome.value,
        "reason": None if wait.reason is None else wait.reason.value,
        "operator": wait.operator, "operatorReason": wait.operator_reason,
        "endedAt": wait.ended_at,
        "sends": [_send(s) for s in wait.sends], "sendError": wait.send_error,
        "heldResults": len(wait.held_results),
        # The trace as the Outcome carries it: a marker where entries were dropped.
        "trace": [{"at": e.at, "event": e.event, "detail": e.detail} for e in trace],
        "traceDropped": wait.trace_dropped,
    })
    return out


class _Latest:
    """Heap entry ordered backwards, so the heap's head is the last of the first `limit`."""

    __slots__ = ("key", "partition", "sort")

    def __init__(self, sort: SortKey, key: bytes, partition: int) -> None:
        self.sort, self.key, self.partition = sort, key, partition

    def __lt__(self, other: _Latest) -> bool:
        return self.sort > other.sort


def _outcome_matches(value: bytes, filters: Filters) -> bool:
    """The filters that need the wait decoded (read last, when needed)."""
    if not filters.of_ended:
        return True
    try:
        slot = read_slot(value)
    except ValueError:
        return False
    return slot is not None and slot.wait is not None and filters.match_wait(slot.wait)


async def first_waits(rows: Iterable[tuple[int, bytes, bytes]], filters: Filters,
                      limit: int, after: SortKey | None = None
                      ) -> list[tuple[bytes, int, SortKey]]:
    """The keys, partitions and sort keys of the `limit` matching waits first in order
    (after `after`, when given).

    Reads row heads only (and, with an outcome filter, the slots of finished
    waits), holds at most `limit` entries whatever the table's size, and
    yields to the event loop every `SCAN_YIELD_EVERY` rows.
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
        if not filters.match(key, head):
            continue
        sort = sort_of(key.decode(errors="replace"), head.next_due, head.parked_at)
        if after is not None and sort <= after:
            continue
        if len(heap) >= limit and sort >= heap[0].sort:
            continue
        if not _outcome_matches(value, filters):
            continue
        entry = _Latest(sort, key, partition)
        if len(heap) < limit:
            heapq.heappush(heap, entry)
        else:
            heapq.heapreplace(heap, entry)
    return [(e.key, e.partition, e.sort) for e in sorted(heap, key=lambda e: e.sort)]


def index_start(filters: Filters, after: SortKey | None) -> int:
    """The due time a page's walk of the timer index starts from: the cursor's, or the
    filter's `due_from` if later (nothing due before it can be on the page)."""
    start = after[1] if after is not None and after[0] == 0 else 0
    return start if filters.due_from is None else max(start, filters.due_from)


async def first_waits_by_due(armed: Iterable[tuple[int, str, int]],
                             read_row: Callable[[bytes, int], bytes | None], filters: Filters,
                             limit: int, after: SortKey | None = None,
                             budget: int = INDEX_BUDGET) -> list[tuple[bytes, int, SortKey]] | None:
    """What `first_waits` answers, read from the timer index when it can: None when not.

    The list's order starts with the waits that have a timer, by their next
    due time, which is the order of the stored index: a page costs a read of
    each wait on it (and of those the filters pass over), not a scan of the
    table, whatever the number of parked waits.  `armed` gives (due time, wait
    key, partition) by due time then key, from the cursor's due time on.  A
    wait is taken at its earliest timer only (the one its row head names).
    None when the index runs out before the page is full (waits with no timer
    armed, such as suspended ones, come after; only a scan finds them) or the
    filters pass over more than `budget` entries: the caller then scans.  With
    a `due_to` bound the walk ends at it, with what it found: nothing later in
    the order can match.
    """
    if after is not None and after[0] != 0:
        return None
    found: list[tuple[bytes, int, SortKey]] = []
    previous: tuple[int, str] | None = None
    for looked, (due, key, partition) in enumerate(armed, 1):
        if looked > budget:
            return None
        if looked % SCAN_YIELD_EVERY == 0:
            await asyncio.sleep(0)
        if filters.due_to is not None and due > filters.due_to:
            return found  # every wait further on is due later, or has nothing due: done
        if (due, key) == previous:  # another kind of timer due at the same instant
            continue
        previous = (due, key)
        sort: SortKey = (0, due, key)
        if after is not None and sort <= after:
            continue
        raw = key.encode()
        value = read_row(raw, partition)
        if value is None:
            continue
        try:
            head = read_head(value)
        except RowDecodeError:
            continue
        if head.next_due != due or not filters.match(raw, head):
            continue
        if not _outcome_matches(value, filters):
            continue
        found.append((raw, partition, sort))
        if len(found) >= limit:
            return found
    return None


def sort_key(item: dict[str, Any]) -> SortKey:
    """The sort position a listed wait carries (its cursor)."""
    return parse_cursor(str(item["cursor"]))
