"""The kinds of input record a wait reacts to, as the core sees them.

Field names mirror the contract (schemas/*.avsc, docs/concepts/contract.md),
in snake_case; the codec maps camelCase wire names onto them. All times are
integer epoch milliseconds. Events are frozen so that replaying a log yields
the same decisions: nothing downstream can mutate what was decided upon.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from streams.core.frozen import fast_init

__all__ = [
    "PARTY_SEPARATOR",
    "ActionResult",
    "Command",
    "Origin",
    "CommandKind",
    "Event",
    "Reply",
    "ResultStatus",
    "ReviewOutcome",
    "StartWait",
    "TimerFired",
    "TimerKind",
    "split_correlation_key",
]

PARTY_SEPARATOR = "~"
"""Per-party replies use ``WAITKEY~PARTY``; Kafka keys them by WAITKEY alone."""


class CommandKind(StrEnum):
    """Operator commands (contract values, upper case on the wire)."""

    SUSPEND = "SUSPEND"
    RESUME = "RESUME"
    CANCEL = "CANCEL"
    DELIVER = "DELIVER"
    REVIEW = "REVIEW"
    RESCHEDULE = "RESCHEDULE"
    MIGRATE = "MIGRATE"


class ReviewOutcome(StrEnum):
    """What a reviewer decided about a reply that failed validation."""

    ACCEPT = "Accept"
    SUBMIT_CORRECTION = "Submit Correction"


class TimerKind(StrEnum):
    """Why a timer was armed.

    ``EARLY_REPLY`` expires replies buffered before their request (rule 7) so
    that a key nobody ever requests does not keep state forever; ``SEND_RETRY``
    sends an action again after a failed delivery, once its backoff has passed
    (rule 12).  New kinds go at the end: stored rows and the timer index
    number the kinds in this order.
    """

    REMINDER = "reminder"
    DEADLINE = "deadline"
    POLL = "poll"
    RETENTION = "retention"
    EARLY_REPLY = "early_reply"
    SEND_RETRY = "send_retry"


class ResultStatus(StrEnum):
    """What a channel adapter reports about one action it was to carry out (rule 12)."""

    DELIVERED = "delivered"
    FAILED = "failed"


# The records here are alike in shape with effects.py's, state.py's and receipts.py's
# (duplicates lists the pairs), deliberately: plain frozen records, one per thing.
@fast_init
@dataclass(frozen=True, slots=True)
class StartWait:
    """A process asks for a wait: the request record."""

    correlation_key: str
    definition: str
    requested_at: int
    tenant: str | None = None
    payload: str | None = None
    parties: tuple[str, ...] = ()
    deadline: str | None = None
    traceparent: str | None = None
    """The W3C trace context the request came with (its Kafka header), kept with the
    wait it parks (``Slot.traceparent``); opaque to the rules."""


@fast_init
@dataclass(frozen=True, slots=True)
class Origin:
    """Where an input record was read, and its bytes as they were sent.

    Opaque to the decisions; kept with a reply or command that is held (before
    its request, or while its wait is suspended), so that a rejection of it
    later names the record and carries it byte for byte.
    """

    topic: str
    partition: int
    offset: int
    value: bytes


@fast_init
@dataclass(frozen=True, slots=True)
class Reply:
    """An outside party answers; ``response_data`` is raw JSON text, possibly broken."""

    correlation_key: str
    response_data: str
    tenant: str | None = None
    channel: str = ""
    reply_id: str | None = None
    sent_at: int | None = None
    origin: Origin | None = None


@fast_init
@dataclass(frozen=True, slots=True)
class Command:
    """An operator acts on one wait.

    ``deadline`` and ``move_by`` are for RESCHEDULE (rule 11), exactly one of
    them: the new deadline as an ISO 8601 duration from the command's time, or
    a shift of the current one (``-PT30M`` moves it earlier).  They stay text
    here, like ``StartWait.deadline``, so a malformed one is a named rejection
    decided by the core, not an exception in the codec.
    """

    correlation_key: str
    command: CommandKind
    reason: str | None = None
    review_outcome: str | None = None
    review_note: str | None = None
    response_data: str | None = None
    operator: str | None = None
    origin: Origin | None = None
    deadline: str | None = None
    move_by: str | None = None
    version: str | None = None
    """For MIGRATE: the definition version to move the wait to (None: the newest)."""
    operation_id: str | None = None
    """The bulk operation the command belongs to (streams.core.operations): named in the
    trace entry of a command the wait takes; a second command of it is refused."""


@fast_init
@dataclass(frozen=True, slots=True)
class ActionResult:
    """A channel adapter reports whether it carried out one action (rule 12).

    ``correlation_key`` is the action's (``WAITKEY``, or ``WAITKEY~PARTY`` for
    a party's action); ``action_id`` names the one action, send attempt
    included.  ``at`` is the adapter's clock, informational: like a reply, a
    result is decided at its append time.
    """

    correlation_key: str
    action_id: str
    status: ResultStatus
    error: str | None = None
    permanent: bool = False
    at: int | None = None
    origin: Origin | None = None


@fast_init
@dataclass(frozen=True, slots=True)
class TimerFired:
    """A timer the worker had indexed is due (`streams.timers.firing`).

    ``generation`` identifies one arming: a record whose (kind, generation,
    due_at) is no longer armed in the slot is stale and changes nothing.
    """

    wait_key: str
    kind: TimerKind
    due_at: int
    generation: int


Event = StartWait | Reply | Command | TimerFired | ActionResult


def split_correlation_key(correlation_key: str) -> tuple[str, str | None]:
    """``WAITKEY~PARTY`` -> (WAITKEY, PARTY); ``WAITKEY`` -> (WAITKEY, None).

    The processor uses the first element as the Kafka/table key.
    """
    base, sep, party = correlation_key.partition(PARTY_SEPARATOR)
    return base, (party if sep else None)
