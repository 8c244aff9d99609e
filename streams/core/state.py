"""What is stored under one wait key: the wait, if any, and input held early.

One table row per key holds everything for that key (``Slot``), so one read
and one write per record suffice and a wait cannot drift apart from the
replies and commands that arrived before its request. A million parked waits
are normal: fields default to empty values that the codec leaves out, and the
trace is bounded (see ``TRACE_HEAD``).

A finished wait keeps what an operator needs to read its history until
retention purges it (rule 10): outcome, response, review, trace, and the
payload up to ``KEPT_PAYLOAD_BYTES``; its timers, held replies and stage
results go.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from streams.core.effects import ActionKind, OutcomeKind, OutcomeReason, TraceEntry
from streams.core.events import ActionResult, Command, Reply, TimerKind
from streams.core.frozen import fast_init

__all__ = [
    "KEPT_PAYLOAD_BYTES",
    "MAX_HELD_REPLIES",
    "MAX_REPLY_IDS",
    "MAX_SENDS",
    "TRACE_HEAD",
    "TRACE_TAIL",
    "ArmedTimer",
    "HeldCommand",
    "HeldReply",
    "HeldResult",
    "Send",
    "SendState",
    "Slot",
    "Suspension",
    "Wait",
    "WaitStatus",
]

TRACE_HEAD = 4
TRACE_TAIL = 12
"""The trace keeps its first 4 and last 12 entries and counts what it dropped
in between: the start and the end explain most waits, and a wait with a long
reminder or poll loop must not grow without bound (probe waits poll every
few minutes for hours)."""

MAX_HELD_REPLIES = 16
"""Replies held per key, early or while suspended, and commands held per key
before their request. A real wait sees one or a handful; more is a flood or a
loop, refused as ``overflow`` not stored."""

MAX_REPLY_IDS = 8
"""Reply ids remembered for de-duplication: re-deliveries arrive close together."""

MAX_SENDS = 16
"""Sends a wait remembers for their results (rule 12), newest kept: a request,
its reminders and an escalation or two; three parties of a first-valid wait
with two reminders each make 9.  A result for a send forgotten is
``unmatched``."""

KEPT_PAYLOAD_BYTES = 64 * 1024
"""A finished wait keeps its request payload (for operators reading its
history) only up to this size in utf-8.  The row of a finished wait holds its
response and trace too, and must stay under the processor's record limit
(900,000 bytes) whatever the payload; a larger payload went out with the
SEND_REQUEST action and is dropped from the row (``payload_dropped``)."""


class WaitStatus(StrEnum):
    PARKED = "parked"
    IN_REVIEW = "in_review"
    SUSPENDED = "suspended"
    DONE = "done"


@fast_init
@dataclass(frozen=True, slots=True)
class ArmedTimer:
    """One arming of a timer; the generation tells it apart from earlier armings."""

    kind: TimerKind
    due_at: int
    generation: int


@fast_init
@dataclass(frozen=True, slots=True)
class HeldReply:
    """A reply kept for later: before its request, or while the wait is suspended."""

    reply: Reply
    received_at: int
    by_operator: bool = False
    """A DELIVER command recorded while suspended: no channel or tenant check."""
    seq: int = 0
    """Arrival number among a key's early replies and commands (0: held before
    numbering, or while suspended): several can arrive in one millisecond."""
    operator: str | None = None
    """For a DELIVER recorded while suspended: who delivered it, and why
    (``reason``), so the outcome names them when resume decides it."""
    reason: str | None = None


# HeldResult, HeldReply and HeldCommand are alike in shape (duplicates lists the
# pairs), deliberately: one held record per kind of input, each its own slot field.
@fast_init
@dataclass(frozen=True, slots=True)
class HeldResult:
    """An action's result that arrived while its wait was suspended: decided on resume."""

    result: ActionResult
    received_at: int


class SendState(StrEnum):
    """Where one send stands, as its channel adapter reported it (rule 12)."""

    PENDING = "pending"
    """Sent (or sent again); no result yet."""
    DELIVERED = "delivered"
    RETRYING = "retrying"
    """Failed; it is sent again at ``Send.retry_at``."""
    FAILED = "failed"
    """Failed for good: permanently, after its retries, or no longer worth sending."""


@fast_init
@dataclass(frozen=True, slots=True)
class Send:
    """One action a channel adapter is to carry out and report on (rule 12).

    The action's id is derived, not stored: (wait, kind, stage, level, party,
    attempt, send attempt) give it (``streams.core.rules.ids.action_id``).
    ``tries`` is the send attempt of its latest emission.
    """

    kind: ActionKind
    stage: int
    level: int
    party: str | None
    attempt: int
    tries: int = 1
    state: SendState = SendState.PENDING
    retry_at: int | None = None
    error: str | None = None


@fast_init
@dataclass(frozen=True, slots=True)
class HeldCommand:
    """An operator's command that overtook its request (it travels on another topic)."""

    command: Command
    received_at: int
    seq: int = 0
    """Arrival number among a key's early replies and commands (see HeldReply)."""


@fast_init
@dataclass(frozen=True, slots=True)
class Suspension:
    """Why and since when a wait is suspended, and what it goes back to.

    ``remaining`` is what was left of each armed timer at suspension; resume
    re-arms each once with that much left, so suspended time never counts and
    missed reminders do not burst out.
    """

    reason: str | None
    at: int
    resume_to: WaitStatus
    remaining: tuple[tuple[TimerKind, int], ...] = ()
    operator: str | None = None


@fast_init
@dataclass(frozen=True, slots=True)
class Wait:
    key: str
    definition: str
    tenant: str | None
    parked_at: int
    status: WaitStatus = WaitStatus.PARKED
    payload: str | None = None
    parties: tuple[str, ...] = ()
    deadline_override_ms: int | None = None
    stage: int = 0
    level: int = 0
    stage_reminders: int = 0
    reminders_sent: int = 0
    polls: int = 0
    reviews: int = 0
    timers: tuple[ArmedTimer, ...] = ()
    suspension: Suspension | None = None
    held: tuple[HeldReply, ...] = ()
    response_data: str | None = None
    response_valid: bool = False
    validation_issue: str | None = None
    review_outcome: str | None = None
    review_note: str | None = None
    stage_results: tuple[str, ...] = ()
    outcome: OutcomeKind | None = None
    reason: OutcomeReason | None = None
    ended_at: int | None = None
    reply_ids: tuple[str, ...] = ()
    trace: tuple[TraceEntry, ...] = ()
    trace_dropped: int = 0
    operator: str | None = None
    """Once done: who ended it by a command, and their reason (as in the Outcome)."""
    operator_reason: str | None = None
    payload_dropped: bool = False
    """Once done: the payload was over KEPT_PAYLOAD_BYTES and is not kept."""
    sends: tuple[Send, ...] = ()
    """The actions sent whose results matter (rule 12); a done wait keeps only
    an escalation still on its way."""
    held_results: tuple[HeldResult, ...] = ()
    """Results that arrived while suspended, decided on resume."""
    send_error: str | None = None
    """The last send that failed for good: which action, and the error."""
    definition_version: str | None = None
    """The version of its definition the wait follows (rule 13); None for a
    wait parked before versions, which follows the newest of its name."""


@fast_init
@dataclass(frozen=True, slots=True)
class Slot:
    """Everything stored under one wait key.

    ``next_generation`` numbers timer armings for this key; it lives here (not
    in the wait) so early-reply timers and wait timers never share a number.
    """

    wait: Wait | None = None
    early_replies: tuple[HeldReply, ...] = ()
    early_timer: ArmedTimer | None = None
    """Expires early replies and early commands alike: the first of them due."""
    next_generation: int = 1
    early_commands: tuple[HeldCommand, ...] = ()
    traceparent: str | None = None
    """The W3C trace context of the request that parked the wait (``StartWait``), for
    the processor to write on the wait's actions and outcome; opaque to the rules.  On
    the slot, not the wait, so that the stored form keeps it beside the wait (a worker
    of 0.2.0 ignores it there, where an unknown wait field would stop it)."""

    def armed_timers(self) -> frozenset[ArmedTimer]:
        return frozenset(self.armed_in_any_order())

    def armed_in_any_order(self) -> tuple[ArmedTimer, ...]:
        """The armed timers without building a set (a decision asks many times)."""
        timers = self.wait.timers if self.wait is not None else ()
        return timers if self.early_timer is None else (*timers, self.early_timer)
