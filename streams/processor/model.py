"""The records a worker reads and writes, as the processor's layers pass them on."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from streams.codec import RecordType
from streams.core import ArmedTimer, EmitOutcome, Slot, TimerKind, WaitStatus
from streams.core.frozen import fast_init
from streams.headers import Headers


class Role(StrEnum):
    """The contract's topics, by what they carry (names: `Settings.topic(role)`)."""

    REQUESTS = "requests"
    REPLIES = "replies"
    COMMANDS = "commands"
    TIMERS = "timers"
    ACTIONS = "actions"
    OUTCOMES = "outcomes"
    REJECTED = "rejected"
    RECEIPTS = "receipts"


INPUT_ROLES = (Role.REQUESTS, Role.REPLIES, Role.COMMANDS, Role.TIMERS)
RECORD_TYPE = {
    Role.REQUESTS: RecordType.START_WAIT,
    Role.REPLIES: RecordType.REPLY,
    Role.COMMANDS: RecordType.COMMAND,
    Role.TIMERS: RecordType.TIMER,
}


class ProcessorReject(StrEnum):
    """Rejection reasons the processor adds to the core's `RejectReason`s."""

    UNDECODABLE = "undecodable"
    """Or: a record key that is not UTF-8, or a value this build does not know."""
    NO_KEY = "no_key"
    """The record has no key: every record is keyed by its wait key."""
    KEY_MISMATCH = "key_mismatch"
    """The record's key is not the wait key of the correlation key it carries."""
    INVALID_COMMAND = "invalid_command"
    """Or: a command record naming a command (or another value) this build does not
    know."""
    INTERNAL_ERROR = "internal_error"
    """A bug: deciding the record raised, or the wait's stored row could not be read
    (written by a later release). The record is kept here, nothing changes, and the
    worker goes on."""
    TOO_LARGE = "too_large"
    """Deciding it would make the wait's stored row or one of its output records
    larger than 900,000 bytes, which Kafka refuses with its default limits: the
    input is refused whole and nothing changes."""
    INVALID_KEY = "invalid_key"
    """The record key holds a NUL character or is longer than 1024 bytes in UTF-8, which
    no wait key can be (`streams.core.keys`); the detail says which, with the key's
    length."""


@fast_init
@dataclass(frozen=True, slots=True)
class InputRecord:
    role: Role
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int | None = None  # milliseconds, as Kafka stamped the record
    log_append_time: bool = False  # the broker's clock (LogAppendTime), not the producer's
    # The reader's position before this record: librdkafka delivered this record
    # next, so the offsets from there up to it hold no records (transaction
    # markers, aborted records).  None when it came from elsewhere.
    follows: int | None = None
    # Of its Kafka headers (`streams.headers`), the two a worker reads: the W3C trace
    # context, and the receipt id its sender asked a Receipt for.  None: absent.
    traceparent: str | None = None
    receipt: str | None = None

    def event_time(self, wall_ms: int) -> int:
        """When the record happened, as decisions see it: the broker's append time.

        A topic stamped by producers (CreateTime) is not trusted with a
        wait's clock - a producer could move a deadline - so its records are
        decided at the wall time they are processed (`xwait topics describe`
        reports such a topic).
        """
        if self.log_append_time and self.timestamp is not None:
            return self.timestamp
        return wall_ms


@fast_init
@dataclass(frozen=True, slots=True)
class OutRecord:
    role: Role
    key: bytes
    value: bytes
    partition: int | None = None  # None: the partitioner (murmur2) decides
    headers: Headers | None = None  # Kafka headers (`streams.headers`); None: none



@fast_init
@dataclass(frozen=True, slots=True)
class RowHead:
    """What a rebuild after a rebalance needs of a row, readable without the slot."""

    state: WaitStatus | None = None  # None: no wait (early input only, or outbox only)
    definition: str | None = None
    tenant: str | None = None
    timers: tuple[ArmedTimer, ...] = ()
    parked_at: int = 0
    version: str | None = None  # the definition's version the wait follows (rule 13)

    @property
    def next_due(self) -> int | None:
        return self.timers[0].due_at if self.timers else None


NO_WAIT = RowHead()


def head_of(slot: Slot | None, armed: frozenset[ArmedTimer] | None = None) -> RowHead:
    """The head of `slot`; `armed`, when the caller has them, are its armed timers."""
    if slot is None:
        return NO_WAIT
    timers = tuple(sorted(slot.armed_timers() if armed is None else armed,
                          key=lambda t: (t.due_at, t.generation)))
    w = slot.wait
    if w is None:
        return RowHead(timers=timers)
    return RowHead(w.status, w.definition, w.tenant, timers, w.parked_at, w.definition_version)


class RowWrite(StrEnum):
    UNCHANGED = "unchanged"
    DELETE = "delete"


@dataclass
class Handled:
    """What one input record asks the worker to do, in this order:

    1. write `row` under `wait_key` (bytes), delete it, or leave it;
    2. move the timer index from `timers_before` to `timers_after`;
    3. send `out` (rejections, outcomes, actions, forwards).
    """

    wait_key: str | None = None
    row: bytes | RowWrite = RowWrite.UNCHANGED
    timers_before: frozenset[ArmedTimer] = frozenset()
    timers_after: frozenset[ArmedTimer] = frozenset()
    head_before: RowHead = NO_WAIT
    head_after: RowHead = NO_WAIT
    out: list[OutRecord] = field(default_factory=list)
    counters: list[str] = field(default_factory=list)
    # The outcomes in `out`, as decided: observers read them without decoding.
    outcomes: list[EmitOutcome] = field(default_factory=list)
    # A timer record ignored because its partition's stream time has not
    # reached it: (wait key, kind, due_at, generation), to be fired later.
    not_due: tuple[str, str, int, int] | None = None
    # A stale timer record whose timer (kind, due_at) the row does not list at
    # all: its index entry, if any, must not stay.  Before batches kept the
    # index in decision order, a wait parked and ended in one batch left its
    # first timers in the index; each was emitted again on every start and
    # held the due-timer scan back to it.  Deleting the entry heals that.
    unindexed: tuple[TimerKind, int] | None = None
    # The timer a timer record named, or the latest a fired timer fired (for the
    # lateness metric).
    timer: ArmedTimer | None = None
    # The W3C trace the decision belongs to: its wait's (`Slot.traceparent`), else its
    # input record's header; None: untraced.  Batch spans link to it (`tracing`).
    traceparent: str | None = None
