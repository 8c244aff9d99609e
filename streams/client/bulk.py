"""Bulk operations: one operator command for every wait a filter selects, resumably.

``xwait cancel --where "definition=expense-approval,state=parked"`` and the
console's bulk action run this code.  An operation has an id, and goes in
three steps:

1. **Select.**  The workers' list API evaluates the filter (streams.client.where)
   where the state is and pages through the matching waits by cursor; the
   operation takes the keys of every page.  A list some worker did not answer
   is incomplete, and the operation refuses to start (:class:`NotAnswered`).
2. **Apply**, at most ``rate`` waits a second.  For each key the wait's status
   is read again, and the wait is *skipped* when its trace already names this
   operation (an earlier run did it), when it no longer meets the filter, when
   it ended or is gone, or when the command would change nothing (suspend a
   suspended wait, resume one that is not, migrate to the version it
   follows: the worker drops those without a trace or a record, so they
   could never be confirmed).  Otherwise the ordinary command goes out
   through the SDK (streams.client.commands) with the operation id, and
   Kafka confirms it.
3. **Confirm.**  A sent command is *applied* once the wait's trace names the
   operation, *refused* once a Rejected record of this operation's command
   for the wait arrives (with its reason and detail), and *unconfirmed* when
   neither happened within ``confirm_timeout``.  Confirming runs in the time
   the rate leaves between two waits, and after the last.

**Resuming: the trace is the progress record.**  Running the operation
again (the same id) selects again and goes on: every wait that took the
operation's command carries its mark and is skipped.  The mark lives in
the wait's own row, so it survives a crash of the CLI at any point, is the
same for a run from another machine or from the console, and needs no file
to keep or lose.  A command the crashed run sent but no worker had decided
yet is not marked yet, so the re-run sends the wait the command again: the
worker decides the two in the order Kafka holds them (one partition per
key), applies the first and refuses the second as ``duplicate`` (rule 9,
streams/core/rules/commands.py).  So no wait takes one operation's command
twice, and none that still matches is left out.  The limit: the mark is
found while its entry is among the trace entries a wait keeps (its first 4
and last 12); a wait that logged more than 12 entries since (reminders,
sends) and still meets the filter would take the command again: run an
interrupted operation again soon, not weeks later.

A progress file beside the CLI was the alternative, and was not taken: it
cannot know whether a command it sent reached a worker (the in-flight case
above still needs the worker's refusal), it is lost with the machine, and
the console could not share it.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from streams.client.errors import ClientError, InvalidRequest
from streams.client.pacing import CONFIRM_TIMEOUT_S, DEFAULT_RATE
from streams.client.where import Where
from streams.core.durations import parse_duration_ms, parse_signed_duration_ms
from streams.core.operations import carries, operation_id_problem

if TYPE_CHECKING:
    from streams.client.consumer import XwaitConsumer
    from streams.client.records import Rejected
    from streams.config import Settings

__all__ = [
    "BulkCommand", "BulkKind", "NotAnswered", "Operation", "Refusal", "Summary",
    "new_operation_id",
]

log = logging.getLogger(__name__)

PAGE = 1000
"""Waits per page of the selection (the list API's largest page)."""

SAMPLE = 10
"""Waits a dry run shows."""

RECHECK_S = 0.5
"""When a sent wait's status is first read again to see its command decided; each later
read waits twice as long, up to RECHECK_MAX_S, so that a worker that lags (or is down)
is not asked about every pending wait twice a second."""

RECHECK_MAX_S = 5.0

SHOWN = 20
"""Refusals the text summary lists one by one (``--json`` lists them all)."""


class BulkKind(StrEnum):
    """The commands an operation can give."""

    CANCEL = "cancel"
    SUSPEND = "suspend"
    RESUME = "resume"
    MIGRATE = "migrate"
    RESCHEDULE = "reschedule"


class NotAnswered(ClientError):
    """No worker answered, or not every worker did: the selection would be incomplete."""


def new_operation_id(kind: str, now: datetime | None = None) -> str:
    """``cancel-20261207T101500-3f9a1c``: the command, when it started (UTC), random bits."""
    when = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%S")
    return f"{kind}-{when}-{secrets.token_hex(3)}"


class Commander(Protocol):
    """What sends the commands: the SDK's client (``XwaitClient``); what a command
    returns (a receipt when waited for) is not read here."""

    def cancel(self, correlation_key: str, reason: str, *, operator: str | None = ...,
               force: bool = ..., operation: str | None = ...) -> object: ...

    def suspend(self, correlation_key: str, reason: str, *, operator: str | None = ...,
                force: bool = ..., operation: str | None = ...) -> object: ...

    def resume(self, correlation_key: str, *, reason: str | None = ...,
               operator: str | None = ..., force: bool = ...,
               operation: str | None = ...) -> object: ...

    def migrate(self, correlation_key: str, *, version: str | None = ...,
                reason: str | None = ..., operator: str | None = ..., force: bool = ...,
                operation: str | None = ...) -> object: ...

    def reschedule(self, correlation_key: str, *, deadline: str | None = ...,
                   move_by: str | None = ..., reason: str | None = ...,
                   operator: str | None = ..., force: bool = ...,
                   operation: str | None = ...) -> object: ...


@dataclass(frozen=True)
class BulkCommand:
    """The command every selected wait gets, with the operator's words."""

    # Fields alike with records.py's Receipt and the worker's Command and Receipt
    # (core/events.py, core/receipts.py; duplicates lists the pairs), deliberately: the
    # operator's words every command carries, no logic shared.
    kind: BulkKind
    reason: str | None = None
    operator: str | None = None
    version: str | None = None
    """MIGRATE: the version to move to (required: the newest is each worker's own idea)."""
    deadline: str | None = None
    """RESCHEDULE: the new deadline, an ISO 8601 duration from the command's time."""
    move_by: str | None = None
    """RESCHEDULE: move the deadline by this signed ISO 8601 duration."""

    def check(self) -> None:
        """InvalidRequest for a command no wait could take, before anything is selected."""
        if self.kind in (BulkKind.CANCEL, BulkKind.SUSPEND) and not (self.reason or "").strip():
            raise InvalidRequest(f"{self.kind.value} needs a reason, for every wait's trace")
        if self.kind is BulkKind.MIGRATE and not self.version:
            raise InvalidRequest("migrate --where needs --to VERSION: which version is the "
                                 "newest is each worker's own idea, and every wait of one "
                                 "operation must go to the same one")
        if self.kind is BulkKind.RESCHEDULE:
            if (self.deadline is None) == (self.move_by is None):
                raise InvalidRequest("reschedule needs exactly one of --deadline and --by")
            try:
                if self.deadline is not None:
                    parse_duration_ms(self.deadline)
                else:
                    parse_signed_duration_ms(self.move_by or "")
            except ValueError as exc:
                raise InvalidRequest(f"reschedule: {exc}") from None

    def unneeded(self, wait: Mapping[str, Any]) -> str | None:
        """Why the worker would take this command for the wait as a no-op; None if not."""
        state = wait.get("state")
        if self.kind is BulkKind.SUSPEND and state == "suspended":
            return "already suspended"
        if self.kind is BulkKind.RESUME and state != "suspended":
            return "not suspended"
        if self.kind is BulkKind.MIGRATE and wait.get("definitionVersion") == self.version:
            return f"already on version {self.version}"
        return None

    def send(self, client: Commander, key: str, operation: str) -> None:
        """The ordinary command, with the operation's id; the key was just read (force)."""
        common: dict[str, Any] = {"operator": self.operator, "force": True,
                                  "operation": operation}
        if self.kind is BulkKind.CANCEL:
            client.cancel(key, self.reason or "", **common)
        elif self.kind is BulkKind.SUSPEND:
            client.suspend(key, self.reason or "", **common)
        elif self.kind is BulkKind.RESUME:
            client.resume(key, reason=self.reason, **common)
        elif self.kind is BulkKind.MIGRATE:
            client.migrate(key, version=self.version, reason=self.reason, **common)
        else:
            client.reschedule(key, deadline=self.deadline, move_by=self.move_by,
                              reason=self.reason, **common)


class Waits(Protocol):
    """What an operation reads: the workers' console API, over HTTP or in the worker."""

    def page(self, query: Mapping[str, str]) -> Mapping[str, Any]:
        """One page of the list (``GET /xwait/api/waits``); NotAnswered if none answered."""
        ...

    def status(self, key: str) -> Mapping[str, Any] | None:
        """One wait's status; None when no wait has the key; NotAnswered when no worker
        could answer for it (a rebalance, a worker down)."""
        ...


class Rejections(Protocol):
    """The rejected topic, from before the operation's first command."""

    def poll(self) -> list[tuple[str, str, str, str]]:
        """(key, operation id, reason, detail) of the commands rejected since the last call."""
        ...


@dataclass(frozen=True)
class Refusal:
    key: str
    reason: str
    detail: str


@dataclass
class Summary:
    """What a run did: every selected wait is in exactly one of the buckets."""

    operation: str
    command: str
    where: str
    selected: int = 0
    applied: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    refused: list[Refusal] = field(default_factory=list)
    unconfirmed: list[str] = field(default_factory=list)
    """Sent, but neither marked nor refused within the confirm timeout."""
    left: list[str] = field(default_factory=list)
    """Not reached: the run stopped first (interrupted, Kafka failed, no worker answered)."""
    stopped: str | None = None
    """Why the run stopped before its end, if it did."""

    @property
    def complete(self) -> bool:
        """Every selected wait was applied or skipped: nothing left to run again for."""
        return not (self.refused or self.unconfirmed or self.left)

    def as_json(self) -> dict[str, Any]:
        return {"operation": self.operation, "command": self.command, "where": self.where,
                "selected": self.selected, "applied": self.applied,
                "skipped": sum(self.skipped.values()), "skippedBy": dict(self.skipped),
                "refused": len(self.refused),
                "refusals": [{"key": r.key, "reason": r.reason, "detail": r.detail}
                             for r in self.refused],
                "unconfirmed": self.unconfirmed, "left": self.left, "stopped": self.stopped,
                "complete": self.complete}

    def text(self) -> str:
        skipped = sum(self.skipped.values())
        lines = [f"{self.command} {self.operation}: {self.selected} selected, "
                 f"applied {self.applied}, skipped {skipped}"
                 + (" (" + ", ".join(f"{why} {n}" for why, n in sorted(self.skipped.items()))
                    + ")" if skipped else "")
                 + f", refused {len(self.refused)}"
                 + (f", unconfirmed {len(self.unconfirmed)}" if self.unconfirmed else "")
                 + (f", not reached {len(self.left)}" if self.left else "")]
        lines += [f"  refused {r.key}: {r.reason}: {r.detail}" for r in self.refused[:SHOWN]]
        if len(self.refused) > SHOWN:
            lines.append(f"  ... and {len(self.refused) - SHOWN} more refused (--json lists "
                         "them all)")
        lines += [f"  unconfirmed {key}: sent, not decided within the timeout"
                  for key in self.unconfirmed[:SHOWN]]
        if self.stopped:
            lines.append(f"stopped: {self.stopped}")
        return "\n".join(lines)


Progress = Callable[[int, int, Summary], None]
"""``on_progress(waits done, waits selected, summary so far)``."""


class Operation:
    """One bulk operation: a filter, a command, an id; see the module docstring."""

    def __init__(self, waits: Waits, where: Where, command: BulkCommand, operation_id: str,
                 *, rate: float = DEFAULT_RATE, confirm_timeout: float = CONFIRM_TIMEOUT_S,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        problem = operation_id_problem(operation_id)
        if problem is not None:
            raise InvalidRequest(f"operation: {problem}")
        if not rate > 0:
            raise InvalidRequest(f"rate must be above zero, got {rate}")
        command.check()
        self.waits, self.where, self.command = waits, where, command
        self.id = operation_id
        self.interval = 1.0 / rate
        self.confirm_timeout = confirm_timeout
        self.clock, self.sleep = clock, sleep

    # -- 1. select ---------------------------------------------------------------
    def pages(self) -> Iterator[list[Mapping[str, Any]]]:
        """The matching waits, a page at a time, in the list's order."""
        query = {**self.where.query(), "limit": str(PAGE)}
        after: str | None = None
        while True:
            body = self.waits.page({**query, **({"after": after} if after else {})})
            if body.get("unavailable"):
                raise NotAnswered("not every worker answered the list, so the selection "
                                  "would be incomplete: " + ", ".join(body["unavailable"]))
            yield list(body.get("waits") or [])
            after = body.get("next")
            if not after:
                return

    def select(self) -> dict[str, str]:
        """Every wait the filter selects now, once each, in the list's order: key ->
        definition (the keys are what :meth:`run` takes)."""
        seen: dict[str, str] = {}
        for page in self.pages():
            for wait in page:
                seen.setdefault(str(wait["key"]), str(wait.get("definition") or ""))
        return seen

    def preview(self, sample: int = SAMPLE) -> tuple[int, list[Mapping[str, Any]]]:
        """A dry run: how many waits the filter selects, and the first ``sample`` of them."""
        count, keys = 0, set()
        shown: list[Mapping[str, Any]] = []
        for page in self.pages():
            for wait in page:
                if wait["key"] in keys:
                    continue
                keys.add(wait["key"])
                count += 1
                if len(shown) < sample:
                    shown.append(wait)
        return count, shown

    # -- 2. and 3. apply and confirm -------------------------------------------------
    def run(self, keys: Sequence[str], client: Commander, rejections: Rejections,
            on_progress: Progress | None = None) -> Summary:
        """Command each of ``keys`` (from :meth:`select`) at the rate; see the module doc."""
        summary = Summary(self.id, self.command.kind.value, self.where.text, len(keys))
        run = _Run(self, summary, rejections)
        done = 0
        next_at = self.clock()
        try:
            for index, key in enumerate(keys):
                run.confirm(until=next_at)
                try:
                    wait = self.waits.status(key)
                except NotAnswered as exc:
                    summary.left.append(key)
                    log.warning("bulk: no answer for key=%s: %s", key, exc)
                else:
                    why = self._skip(wait)
                    if why is not None:
                        summary.skipped[why] += 1
                    else:
                        try:
                            self.command.send(client, key, self.id)
                        except ClientError as exc:
                            summary.stopped = f"Kafka did not take the command for {key}: {exc}"
                            summary.left += keys[index:]
                            break
                        run.sent(key)
                done += 1
                if on_progress is not None:
                    on_progress(done, len(keys), summary)
                next_at = max(next_at, self.clock()) + self.interval
            run.confirm(until=self.clock() + self.confirm_timeout, all_of_them=True)
        except KeyboardInterrupt:
            summary.stopped = "interrupted"
            summary.left += [k for k in keys[done:] if k not in run.pending]
        summary.unconfirmed += list(run.pending)
        if on_progress is not None:
            on_progress(done, len(keys), summary)
        return summary

    def _skip(self, wait: Mapping[str, Any] | None) -> str | None:
        """Why the wait is not commanded now; None to command it."""
        if wait is None:
            return "gone"
        if carries((str(e.get("detail") or "") for e in wait.get("trace") or ()), self.id):
            return "already done by this operation"
        if wait.get("state") == "done":
            return "ended"
        if not self.where.matches(wait):
            return "no longer matching"
        return self.command.unneeded(wait)


class _Run:
    """The commands of one run not yet decided, and what the workers said of them."""

    def __init__(self, op: Operation, summary: Summary, rejections: Rejections) -> None:
        self.op, self.summary, self.rejections = op, summary, rejections
        self.pending: dict[str, float] = {}  # key -> when its status is next read
        self.waited: dict[str, float] = {}  # key -> the wait before that read
        self.refusals: dict[str, tuple[str, str]] = {}  # key -> (reason, detail)

    def sent(self, key: str) -> None:
        self.pending[key] = self.op.clock() + RECHECK_S
        self.waited[key] = RECHECK_S

    def confirm(self, until: float, all_of_them: bool = False) -> None:
        """Settle the sent commands that can be, until ``until`` (the next wait's turn:
        the time the rate leaves is spent here); with ``all_of_them``, return as soon as
        every one is settled, or at ``until``."""
        clock = self.op.clock
        while True:
            if self.pending:  # the topic is read only while something awaits a decision
                for key, operation, reason, detail in self.rejections.poll():
                    if operation == self.op.id:
                        self.refusals[key] = (reason, detail)
            for key in [k for k, at in self.pending.items() if at <= clock()]:
                self._settle(key)
                if not all_of_them and clock() >= until:
                    return  # behind the rate: sending comes first, the rest waits its turn
            now = clock()
            if now >= until or (all_of_them and not self.pending):
                return
            soonest = min(self.pending.values(), default=until)
            self.op.sleep(max(0.0, min(until, soonest) - now))

    def _settle(self, key: str) -> None:
        try:
            wait = self.op.waits.status(key)
        except NotAnswered:
            wait = None
        trace = (wait or {}).get("trace") or ()
        if carries((str(e.get("detail") or "") for e in trace), self.op.id):
            self.summary.applied += 1
        elif key in self.refusals:
            reason, detail = self.refusals[key]
            self.summary.refused.append(Refusal(key, reason, detail))
        else:
            self.waited[key] = min(RECHECK_MAX_S, self.waited[key] * 2)
            self.pending[key] = self.op.clock() + self.waited[key]
            return
        del self.pending[key], self.waited[key]


# -- the real sources: the console API over HTTP, the rejected topic ----------------------

STATUS_RETRY_S = 10.0
"""How long a status read is retried while no worker can answer for its key (503: a
rebalance moves partitions for a few seconds)."""

REJECTED_LOOKBACK_MS = 60_000
"""How far before the run's start the rejected topic is read: its records carry the
workers' clocks, which may lag this machine's a little."""


class HttpWaits:
    """:class:`Waits` from a worker's console API (``XWAIT_CONSOLE_URL``), as `xwait list`
    and `xwait status` read it; any worker answers for the whole cluster."""

    def __init__(self, base: str, token: str | None) -> None:
        self.base, self.token = base, token

    def _get(self, path: str) -> tuple[int, Any]:
        from streams.client import _console

        try:
            return _console.get(self.base, path, token=self.token)
        except _console.ConsoleUnreachable as exc:
            raise NotAnswered(str(exc)) from exc

    def page(self, query: Mapping[str, str]) -> Mapping[str, Any]:
        import urllib.parse

        status, body = self._get("/xwait/api/waits?" + urllib.parse.urlencode(query))
        if status == 200 and isinstance(body, dict):
            return body
        _refuse(status, body, "the list")

    def status(self, key: str) -> Mapping[str, Any] | None:
        from streams.client import _console

        deadline = time.monotonic() + STATUS_RETRY_S
        while True:
            status, body = self._get(_console.wait_path(key))
            if status == 200 and isinstance(body, dict):
                return body
            if status == 404:
                return None
            if status != 503 or time.monotonic() >= deadline:
                _refuse(status, body, f"the status of {key}")
            time.sleep(0.5)


def _refuse(status: int, body: Any, what: str) -> NoReturn:
    message = body.get("error") if isinstance(body, dict) else None
    text = f"{what}: HTTP {status}" + (f": {message}" if message else "")
    if status == 400:
        raise InvalidRequest(text)
    if status == 503:
        raise NotAnswered(text)
    raise ClientError(text)


class RejectedCommands:
    """:class:`Rejections` read from ``<prefix>.rejected``: the commands workers refused,
    with the operation id read from each one's original record."""

    def __init__(self, settings: Settings, since_ms: int | None = None) -> None:
        from streams import codec

        self.settings = settings
        self.start_ms = int(time.time() * 1000) if since_ms is None else since_ms
        self.commands_topic = settings.topic("commands")
        self._codec = codec.for_settings(settings)
        self._consumer: XwaitConsumer[Rejected] | None = None

    def poll(self) -> list[tuple[str, str, str, str]]:
        from streams.client.consumer import XwaitConsumer
        from streams.client.errors import UndecodableOutput
        from streams.codec import RecordType, UndecodableRecord

        if self._consumer is None:
            # Created at the first command, placed by time: nothing written since the
            # run started is missed, and a run that sends nothing costs no consumer.
            self._consumer = XwaitConsumer("rejected", self.settings,
                                           since_ms=self.start_ms - REJECTED_LOOKBACK_MS)
        found = []
        for _ in range(1000):  # what arrived so far, without blocking
            try:
                record = self._consumer.poll(0)
            except UndecodableOutput:
                continue
            if record is None:
                break
            if record.topic != self.commands_topic or not record.original:
                continue
            try:
                command = self._codec.decode(RecordType.COMMAND, record.original)
            except UndecodableRecord:
                continue
            operation = command.get("operationId")
            if operation:
                key = (record.key or b"").decode("utf-8", "replace")
                found.append((key, str(operation), record.reason, record.detail))
        return found

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
