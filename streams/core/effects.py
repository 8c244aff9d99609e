"""What a decision asks the outside world to do, as plain data.

The processor applies effects in the order given: rejections and discards
first (they concern the input), then outcomes and actions, then timer index
changes, then ``Purge``. Nothing here performs I/O; that is the point.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from streams.core.events import ActionResult, Command, Reply, TimerKind
from streams.core.frozen import fast_init

__all__ = [
    "ActionKind",
    "ArmTimer",
    "BufferEarlyCommand",
    "BufferEarlyReply",
    "Discard",
    "DiscardReason",
    "DisarmTimer",
    "Effect",
    "EmitAction",
    "EmitOutcome",
    "OutcomeKind",
    "OutcomeReason",
    "Purge",
    "Reject",
    "RejectReason",
    "TraceEntry",
]


class OutcomeKind(StrEnum):
    """The three ways a wait ends (contract values)."""

    RECEIVED = "RECEIVED"
    ESCALATED = "ESCALATED"
    CANCELLED = "CANCELLED"


class OutcomeReason(StrEnum):
    """The named reason carried by every terminal outcome (rule 5)."""

    REPLY_VALID = "reply_valid"
    """A reply passed validation and won the race."""
    REVIEW_ACCEPTED = "review_accepted"
    """An invalid reply was accepted as it was by a reviewer."""
    REVIEW_CORRECTED = "review_corrected"
    """An invalid reply was replaced by a reviewer's corrected data."""
    DELIVERED = "delivered"
    """An operator delivered the reply by hand (DELIVER command)."""
    RESULT_READY = "result_ready"
    """Probe variant: a poll result said ``resultReady: true``."""
    DEADLINE_EXHAUSTED = "deadline_exhausted"
    """The deadline of the last escalation level passed."""
    INVALID_REPLY_ESCALATED = "invalid_reply_escalated"
    """An invalid reply was routed to escalation and no level was left."""
    CANCELLED_BY_OPERATOR = "cancelled_by_operator"
    """A CANCEL command; who and why are the outcome's ``operator`` and
    ``operator_reason`` (and in the trace)."""
    SEND_FAILED = "send_failed"
    """A send failed for good (permanently, or after the definition's retries)
    and ``on_send_failure`` said escalate, with no level left; the outcome's
    ``send_error`` says which action and the last error (rule 12)."""


class ActionKind(StrEnum):
    """What the outside world must do (contract values)."""

    SEND_REQUEST = "SEND_REQUEST"
    SEND_REMINDER = "SEND_REMINDER"
    RUN_ESCALATION = "RUN_ESCALATION"
    REVIEW_NEEDED = "REVIEW_NEEDED"
    CLOSE_OUT = "CLOSE_OUT"
    POLL = "POLL"


class RejectReason(StrEnum):
    """Why an input record was refused; published to the ``rejected`` topic.

    ``undecodable`` is raised by the codec in the processor, never by decide().
    """

    UNMATCHED = "unmatched"
    """No wait under the key (an early reply or command past its TTL, a key or
    party the wait does not know)."""
    LATE = "late"
    """The wait is already done, or a reply already won and is in review."""
    DUPLICATE = "duplicate"
    """A second request for a key that has a wait, a reply id seen before, or a command
    of a bulk operation whose command the wait already took (its trace names it)."""
    UNDECODABLE = "undecodable"
    """Neither readable Avro nor valid JSON of the record's fields (decided by the
    codec in the processor; `detail` says what was wrong)."""
    TENANT_MISMATCH = "tenant_mismatch"
    """A reply from a tenant other than the wait's; it never ends the wait."""
    UNACCEPTABLE = "unacceptable"
    """First-valid variant: a party's reply failed validation or declined;
    the wait goes on."""
    UNKNOWN_DEFINITION = "unknown_definition"
    """A request (or event on a wait) names a definition not loaded."""
    INVALID_REQUEST = "invalid_request"
    """A request with a malformed deadline override, parties or key."""
    INVALID_COMMAND = "invalid_command"
    """A command that does not apply to the wait in its current state."""
    OVERFLOW = "overflow"
    """Too many replies held for one key (early or while suspended), or too
    many commands held before their request."""
    DEADLINE_PASSED = "deadline_passed"
    """A RESCHEDULE whose new deadline is not after the command's time (or,
    for a suspended wait, would leave no time when it resumes)."""


class DiscardReason(StrEnum):
    """Internal no-ops: counted by the processor, not published."""

    STALE_TIMER = "stale_timer"
    """A timer record whose (kind, generation, due_at) is no longer armed:
    it lost a race, was disarmed, or is a duplicate."""
    ALREADY_SUSPENDED = "already_suspended"
    NOT_SUSPENDED = "not_suspended"
    DUPLICATE_RESULT = "duplicate_result"
    """A result an adapter reported again (at-least-once adapters do after a
    crash): the same status for the same send attempt, already recorded."""
    STALE_RESULT = "stale_result"
    """A result for an earlier send attempt of an action that was sent again."""
    SAME_VERSION = "same_version"
    """A MIGRATE to the version the wait already follows."""


# The records here are alike in shape with events.py's and state.py's (duplicates lists
# the pairs), deliberately: plain frozen records, one per thing, no logic to share.
@fast_init
@dataclass(frozen=True, slots=True)
class TraceEntry:
    """One line of "what happened when" (rule 5)."""

    at: int
    event: str
    detail: str = ""


@fast_init
@dataclass(frozen=True, slots=True)
class EmitOutcome:
    """The one terminal record of a wait, to the ``outcomes`` topic."""

    outcome_id: str
    correlation_key: str
    definition: str
    tenant: str | None
    outcome: OutcomeKind
    reason: OutcomeReason
    response_data: str | None
    response_valid: bool
    validation_issue: str | None
    review_outcome: str | None
    review_note: str | None
    reminders_sent: int
    escalation_level: int
    parked_at: int
    ended_at: int
    trace: tuple[TraceEntry, ...]
    operator: str | None = None
    """Who ended the wait by a command (CANCEL, DELIVER, REVIEW); None when a
    reply or a deadline ended it."""
    operator_reason: str | None = None
    """That command's reason, in the operator's words."""
    send_error: str | None = None
    """When a failed send ended the wait (``send_failed``): the action and the
    last error its channel adapter reported."""
    definition_version: str | None = None
    """The version of the definition the wait followed (None: a wait parked
    before definitions had versions)."""


@fast_init
@dataclass(frozen=True, slots=True)
class EmitAction:
    """Something the outside world must do, to the ``actions`` topic.

    ``correlation_key`` is ``WAITKEY~PARTY`` for actions aimed at one party of a
    first-valid wait, so the party's reply carries its own key back.
    ``payload`` is JSON text: the request's payload, or for REVIEW_NEEDED an
    object with ``responseData``, ``validationIssue`` and ``channel``.
    """

    action_id: str
    correlation_key: str
    definition: str
    tenant: str | None
    action: ActionKind
    party: str | None
    level: int
    attempt: int
    payload: str | None
    at: int
    idempotency_key: str
    """The same for every send attempt of one action: the id of its first send
    attempt (a receiver drops a repeated delivery by it, rule 12)."""
    send_attempt: int = 1
    """1 for the first send of this action; n for its (n-1)th retry after a
    channel adapter reported a failed delivery (rule 12)."""


@fast_init
@dataclass(frozen=True, slots=True)
class ArmTimer:
    kind: TimerKind
    due_at: int
    generation: int


@fast_init
@dataclass(frozen=True, slots=True)
class DisarmTimer:
    """``due_at`` is included so an index ordered by due time can find the entry."""

    kind: TimerKind
    due_at: int
    generation: int


# Alike in shape with BufferEarlyCommand (duplicates lists the pair), deliberately: one
# effect per kind of record held (rule 7), as the native rules return them.
@fast_init
@dataclass(frozen=True, slots=True)
class BufferEarlyReply:
    """A reply arrived before its request and is held until ``expires_at`` (rule 7).

    Informational (for metrics/logs): the reply is already in the returned slot.
    """

    reply: Reply
    received_at: int
    expires_at: int


@fast_init
@dataclass(frozen=True, slots=True)
class BufferEarlyCommand:
    """A command arrived before its request and is held until ``expires_at`` (rule 7).

    Informational (for metrics/logs): the command is already in the returned slot.
    """

    command: Command
    received_at: int
    expires_at: int


@fast_init
@dataclass(frozen=True, slots=True)
class Reject:
    """Publish the input to ``rejected`` with this reason.

    ``reply`` (or ``command``, or ``result``) is set when the rejection concerns a record held
    earlier (buffered before its request, or recorded while suspended) rather
    than the input record being processed; the processor publishes that
    record's fields.
    """

    reason: RejectReason
    detail: str
    reply: Reply | None = None
    command: Command | None = None
    result: ActionResult | None = None


@fast_init
@dataclass(frozen=True, slots=True)
class Discard:
    reason: DiscardReason
    detail: str = ""


@fast_init
@dataclass(frozen=True, slots=True)
class Purge:
    """Delete everything stored under the key (the decision's slot is None)."""


Effect = (
    EmitOutcome | EmitAction | ArmTimer | DisarmTimer | BufferEarlyReply | BufferEarlyCommand
    | Reject | Discard | Purge
)
