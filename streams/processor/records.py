"""From Kafka records to core events, and from effects to Kafka records.

Everything here is synchronous and free of faust, so the whole path a record
takes through a worker (decode, route, decide, encode) is tested without a
broker; the faust agent in `streams.processor.app` only moves bytes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from streams import codec
from streams.codec import RecordType, UndecodableRecord
from streams.core import (
    ArmedTimer,
    Command,
    CommandKind,
    Decision,
    Discard,
    EmitAction,
    EmitOutcome,
    Event,
    Reject,
    Reply,
    Slot,
    StartWait,
    TimerFired,
    TimerKind,
    WaitDefinition,
    decide,
    decode_slot,
    encode_slot,
    split_correlation_key,
)
from streams.partitioning import partition_for

log = logging.getLogger(__name__)


class Role(StrEnum):
    """The contract's topics, by what they carry (names: `Settings.topic(role)`)."""

    REQUESTS = "requests"
    REPLIES = "replies"
    COMMANDS = "commands"
    TIMERS = "timers"
    ACTIONS = "actions"
    OUTCOMES = "outcomes"
    REJECTED = "rejected"


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
    NO_KEY = "no_key"
    KEY_MISMATCH = "key_mismatch"
    INVALID_COMMAND = "invalid_command"
    INTERNAL_ERROR = "internal_error"


@dataclass(frozen=True)
class InputRecord:
    role: Role
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True)
class OutRecord:
    role: Role
    key: bytes
    value: bytes
    partition: int | None = None  # None: the partitioner (murmur2) decides


class SlotWrite(StrEnum):
    UNCHANGED = "unchanged"
    DELETE = "delete"


@dataclass
class Handled:
    """What one input record asks the worker to do, in this order:

    1. write `slot` under `wait_key` (bytes), delete it, or leave it;
    2. move the timer index from `timers_before` to `timers_after`;
    3. send `out` (rejections, outcomes, actions, forwards).
    """

    wait_key: str | None = None
    slot: bytes | SlotWrite = SlotWrite.UNCHANGED
    timers_before: frozenset[ArmedTimer] = frozenset()
    timers_after: frozenset[ArmedTimer] = frozenset()
    out: list[OutRecord] = field(default_factory=list)
    counters: list[str] = field(default_factory=list)


def to_event(role: Role, record: Mapping[str, Any]) -> Event:
    """A decoded record as the core's event (camelCase wire names to fields)."""
    if role is Role.REQUESTS:
        return StartWait(
            correlation_key=record["correlationKey"],
            definition=record["definition"],
            requested_at=record["requestedAt"],
            tenant=record.get("tenant"),
            payload=record.get("payload"),
            parties=tuple(record.get("parties") or ()),
            deadline=record.get("deadline"),
        )
    if role is Role.REPLIES:
        return Reply(
            correlation_key=record["correlationKey"],
            response_data=record["responseData"],
            tenant=record.get("tenant"),
            channel=record["channel"],
            reply_id=record.get("replyId"),
            sent_at=record.get("sentAt"),
        )
    if role is Role.COMMANDS:
        return Command(
            correlation_key=record["correlationKey"],
            command=CommandKind(record["command"]),
            reason=record.get("reason"),
            review_outcome=record.get("reviewOutcome"),
            review_note=record.get("reviewNote"),
            response_data=record.get("responseData"),
            operator=record.get("operator"),
        )
    return TimerFired(
        wait_key=record["correlationKey"],
        kind=TimerKind(record["kind"]),
        due_at=record["dueAt"],
        generation=record["generation"],
    )


def timer_record(wait_key: str, kind: str, due_at: int, generation: int, now_ms: int) -> bytes:
    return codec.encode(RecordType.TIMER, {
        "correlationKey": wait_key, "kind": kind, "dueAt": due_at,
        "generation": generation, "firedAt": now_ms,
    })


def outcome_record(e: EmitOutcome) -> dict[str, Any]:
    return {
        "outcomeId": e.outcome_id, "correlationKey": e.correlation_key,
        "definition": e.definition, "tenant": e.tenant, "outcome": e.outcome.value,
        "reason": e.reason.value, "responseData": e.response_data,
        "responseValid": e.response_valid, "validationIssue": e.validation_issue,
        "reviewOutcome": e.review_outcome, "reviewNote": e.review_note,
        "remindersSent": e.reminders_sent, "escalationLevel": e.escalation_level,
        "parkedAt": e.parked_at, "endedAt": e.ended_at,
        "trace": [{"at": t.at, "event": t.event, "detail": t.detail} for t in e.trace],
    }


def action_record(e: EmitAction) -> dict[str, Any]:
    return {
        "actionId": e.action_id, "correlationKey": e.correlation_key,
        "definition": e.definition, "tenant": e.tenant, "action": e.action.value,
        "party": e.party, "level": e.level, "attempt": e.attempt, "payload": e.payload,
        "at": e.at,
    }


def reply_record(r: Reply) -> dict[str, Any]:
    return {
        "correlationKey": r.correlation_key, "tenant": r.tenant, "channel": r.channel,
        "responseData": r.response_data, "replyId": r.reply_id, "sentAt": r.sent_at,
    }


class RecordHandler:
    """Turns one input record and the stored slot into a `Handled`.

    Bad input never raises: it becomes a rejection with its reason, and the
    worker goes on.  A bug in decide() is caught too, published with reason
    `internal_error` (the input is kept, the state left as it was) and logged.
    """

    def __init__(self, definitions: Mapping[str, WaitDefinition], partitions: int,
                 topic_names: Mapping[Role, str]) -> None:
        self.definitions = definitions
        self.partitions = partitions
        self.topic_names = topic_names

    def rejected(self, rec: InputRecord, reason: str, detail: str, now_ms: int,
                 original: bytes | None = None, key: bytes | None = None) -> OutRecord:
        value = codec.encode(RecordType.REJECTED, {
            "topic": rec.topic, "partition": rec.partition, "offset": rec.offset,
            "key": rec.key if key is None else key, "reason": reason, "detail": detail,
            "original": rec.value if original is None else original, "rejectedAt": now_ms,
        })
        return OutRecord(Role.REJECTED, rec.key or key or b"", value)

    def handle(self, rec: InputRecord, load: Callable[[str], bytes | None],
               now_ms: int) -> Handled:
        if not rec.key:
            return Handled(out=[self.rejected(rec, ProcessorReject.NO_KEY,
                                              "Expected the wait key as record key, but the "
                                              "record has none", now_ms)],
                           counters=["rejected.no_key"])
        expected = partition_for(rec.key, self.partitions)
        if expected != rec.partition:
            # Produced with another partitioner (librdkafka's CRC32 default):
            # the wait's state lives elsewhere.  Send it where it belongs.
            return Handled(out=[OutRecord(rec.role, rec.key, rec.value or b"", expected)],
                           counters=["misrouted"])
        try:
            wait_key = rec.key.decode("utf-8")
            decoded = codec.decode(RECORD_TYPE[rec.role], rec.value)
            event = to_event(rec.role, decoded)
        except UndecodableRecord as exc:
            return Handled(out=[self.rejected(rec, ProcessorReject.UNDECODABLE,
                                              f"{exc.reason}: {exc.detail}", now_ms)],
                           counters=["rejected.undecodable"])
        except UnicodeDecodeError:
            return Handled(out=[self.rejected(rec, ProcessorReject.UNDECODABLE,
                                              "record key is not UTF-8", now_ms)],
                           counters=["rejected.undecodable"])
        except ValueError as exc:  # an enum value the core does not know
            reason = (ProcessorReject.INVALID_COMMAND if rec.role is Role.COMMANDS
                      else ProcessorReject.UNDECODABLE)
            return Handled(out=[self.rejected(rec, reason, str(exc), now_ms)],
                           counters=[f"rejected.{reason}"])
        event_key = (event.wait_key if isinstance(event, TimerFired)
                     else split_correlation_key(event.correlation_key)[0])
        if event_key != wait_key:
            return Handled(out=[self.rejected(
                rec, ProcessorReject.KEY_MISMATCH,
                f"Expected the record key to be the wait key {event_key!r}, but it is "
                f"{wait_key!r}", now_ms)], counters=["rejected.key_mismatch"])
        try:
            stored = load(wait_key)
            slot = decode_slot(stored) if stored is not None else None
            decision = decide(slot, event, now_ms, self.definitions)
        except Exception as exc:  # a bug must not stop the partition: see docstring
            log.exception("decide failed key=%s topic=%s partition=%s offset=%s",
                          wait_key, rec.topic, rec.partition, rec.offset)
            return Handled(out=[self.rejected(rec, ProcessorReject.INTERNAL_ERROR,
                                              f"{type(exc).__name__}: {exc}", now_ms)],
                           counters=["rejected.internal_error"])
        return self._apply(rec, wait_key, slot, decision, now_ms)

    def _apply(self, rec: InputRecord, wait_key: str, slot: Slot | None, decision: Decision,
               now_ms: int) -> Handled:
        handled = Handled(wait_key=wait_key)
        if decision.slot != slot:
            handled.slot = (encode_slot(decision.slot) if decision.slot is not None
                            else SlotWrite.DELETE)
        handled.timers_before = slot.armed_timers() if slot is not None else frozenset()
        handled.timers_after = (decision.slot.armed_timers() if decision.slot is not None
                                else frozenset())
        key = wait_key.encode()
        for effect in decision.effects:
            if isinstance(effect, Reject):
                original = (codec.encode(RecordType.REPLY, reply_record(effect.reply))
                            if effect.reply is not None else None)
                handled.out.append(self.rejected(rec, effect.reason.value, effect.detail, now_ms,
                                                 original=original, key=key))
                handled.counters.append(f"rejected.{effect.reason.value}")
            elif isinstance(effect, Discard):
                handled.counters.append(f"discarded.{effect.reason.value}")
            elif isinstance(effect, EmitOutcome):
                handled.out.append(OutRecord(Role.OUTCOMES, key, codec.encode(
                    RecordType.OUTCOME, outcome_record(effect))))
                handled.counters.append(f"outcomes.{effect.reason.value}")
            elif isinstance(effect, EmitAction):
                handled.out.append(OutRecord(Role.ACTIONS, key, codec.encode(
                    RecordType.ACTION, action_record(effect))))
                handled.counters.append(f"actions.{effect.action.value}")
        return handled
