"""From Kafka records to core events, and from effects to Kafka records.

Everything here is synchronous and free of faust, so the whole path a record
takes through a worker (decode, route, decide, encode) is tested without a
broker; the worker (`streams.processor.worker`) only moves bytes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from streams import codec
from streams.codec import RecordType, UndecodableRecord
from streams.core import (
    ActionResult,
    ArmedTimer,
    Command,
    CommandKind,
    Decision,
    Discard,
    DiscardReason,
    EmitAction,
    EmitOutcome,
    Event,
    Origin,
    Reject,
    Reply,
    ResultStatus,
    StartWait,
    TimerFired,
    TimerKind,
    WaitDefinition,
    decide,
    decode_slot,
    encode_slot,
    split_correlation_key,
)
from streams.core.keys import key_problem
from streams.core.receipts import Receipt, receipt_for, refusal
from streams.headers import RECEIPT, TRACEPARENT, Headers
from streams.partitioning import partition_for
from streams.processor.envelope import Row, decode_row, encode_row
from streams.processor.model import (
    RECORD_TYPE,
    Handled,
    InputRecord,
    OutRecord,
    ProcessorReject,
    Role,
    RowHead,
    RowWrite,
    head_of,
)
from streams.processor.native import record_path, unavailable
from streams.timers.firing import FiredTimer, event_to_fire, is_armed

log = logging.getLogger(__name__)

# Replies, action results and commands may be held (before their request, or
# while their wait is suspended) and rejected later: they carry where they
# came from.
HELD_ROLES = frozenset({Role.REPLIES, Role.COMMANDS})

# The replies topic carries the channel adapters' action results beside the
# replies (rule 12): the same producers write both, in one order per wait.
REPLIES_TOPIC_TYPES = (RecordType.REPLY, RecordType.ACTION_RESULT)

# The largest table row (its changelog record) or output record a decision
# may produce.  Kafka refuses records over about 1 MB by default; a decision
# whose records would not fit is refused whole (`too_large`) instead, since an
# output Kafka refuses would stop the worker at every commit, replay after
# replay.  The margin covers record keys and framing.
MAX_RECORD_BYTES = 900_000

# Bytes of the refused record a Rejected record carries.  An input may be up
# to the broker's message limit (1 MB by default); wrapped whole, with the
# detail, its rejection could exceed that limit and never be published.
MAX_REJECTED_ORIGINAL = 512 * 1024

def to_event(role: Role, record: Mapping[str, Any], origin: Origin | None = None,
             record_type: RecordType | None = None) -> Event:
    """A decoded record as the core's event (camelCase wire names to fields).

    `origin` travels with a reply or a command, so that rejecting it later -
    after it was held - names the record and carries its bytes as sent.
    `record_type` says which record a topic of several types carried.
    """
    if record_type is RecordType.ACTION_RESULT:
        return ActionResult(
            correlation_key=record["correlationKey"],
            action_id=record["actionId"],
            status=ResultStatus(record["status"]),
            error=record.get("error"),
            permanent=bool(record.get("permanent", False)),
            at=record.get("at"),
            origin=origin,
        )
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
            origin=origin,
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
            origin=origin,
            deadline=record.get("deadline"),
            move_by=record.get("moveBy"),
            version=record.get("version"),
            operation_id=record.get("operationId"),
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
        "operator": e.operator, "operatorReason": e.operator_reason,
        "sendError": e.send_error, "definitionVersion": e.definition_version,
    }


def action_record(e: EmitAction) -> dict[str, Any]:
    return {
        "actionId": e.action_id, "correlationKey": e.correlation_key,
        "definition": e.definition, "tenant": e.tenant, "action": e.action.value,
        "party": e.party, "level": e.level, "attempt": e.attempt, "payload": e.payload,
        "at": e.at, "sendAttempt": e.send_attempt, "idempotencyKey": e.idempotency_key,
    }


def reply_record(r: Reply) -> dict[str, Any]:
    return {
        "correlationKey": r.correlation_key, "tenant": r.tenant, "channel": r.channel,
        "responseData": r.response_data, "replyId": r.reply_id, "sentAt": r.sent_at,
    }


def command_record(c: Command) -> dict[str, Any]:
    return {
        "correlationKey": c.correlation_key, "command": c.command.value, "reason": c.reason,
        "reviewOutcome": c.review_outcome, "reviewNote": c.review_note,
        "responseData": c.response_data, "operator": c.operator,
        "deadline": c.deadline, "moveBy": c.move_by, "version": c.version,
        "operationId": c.operation_id,
    }


def result_record(r: ActionResult) -> dict[str, Any]:
    return {
        "correlationKey": r.correlation_key, "actionId": r.action_id,
        "status": r.status.value, "error": r.error, "permanent": r.permanent, "at": r.at,
    }


class RecordHandler:
    """Turns one input record and the stored row into a `Handled`.

    Bad input never raises: it becomes a rejection with its reason, and the
    worker goes on.  A bug in decide() is caught too, published with reason
    `internal_error` (the input is kept, the state left as it was) and logged.
    """

    def __init__(self, definitions: Mapping[str, WaitDefinition], partitions: int,
                 timers_topic: str = "timers", *, pure_python: bool = False) -> None:
        """`timers_topic` names where a Rejected record about a fired timer says it was
        (a fired timer was read from no topic: offset -1).  Records are decided by the
        native record path where it is built, unless `pure_python`
        (`streams.core.native`): it answers as this class would, or hands the record
        back to the Python path below."""
        self.definitions = definitions
        self.partitions = partitions
        self.timers_topic = timers_topic
        self.pure_python = pure_python
        self.python_because: str | None = "XWAIT_PURE_PYTHON=1" if pure_python else None
        """Why every record is decided in Python (None while the native path decides)."""
        self._native: Any | None = None
        self._native_codec: codec.Codec | None = None

    def _native_failed(self) -> None:
        """The native path raised (a bug: it declines what it cannot do): logged once,
        and from then on this handler decides in Python, which the worker can always do."""
        log.exception("the native record path failed; deciding every record in Python from "
                      "now on (XWAIT_PURE_PYTHON=1 does so from the start)")
        self.pure_python = True
        self.python_because = "the native record path failed (a bug, logged)"
        self._native = None

    def native(self) -> Any | None:
        """The native core for the codec in use (made on first use), or None."""
        active = codec.active_codec()
        if active is not self._native_codec and not self.pure_python:
            self._native_codec = active
            try:
                self._native = record_path(self.definitions, self.partitions,
                                           self.timers_topic, active)
            except Exception:  # a bug of the native path: see `_native_failed`
                self._native_failed()
            else:
                self.python_because = None if self._native is not None else unavailable()
        return self._native

    def rejected(self, about: InputRecord | FiredTimer, reason: str, detail: str, now_ms: int,
                 original: bytes | None = None, key: bytes | None = None,
                 at: Origin | None = None) -> OutRecord:
        """A Rejected record about an input or a fired timer, or about the record at `at`
        (one held before)."""
        headers: Headers | None = None
        if isinstance(about, FiredTimer):
            source = (self.timers_topic, about.partition, -1)
            own_key: bytes | None = about.wait_key.encode()
            own_value: bytes | None = timer_record(about.wait_key, about.kind.value,
                                                   about.due_at, about.generation, now_ms)
        else:
            source = (about.topic, about.partition, about.offset)
            own_key, own_value = about.key, about.value
            if about.traceparent is not None and at is None:  # the sender's trace
                headers = ((TRACEPARENT, about.traceparent.encode()),)
        data = own_value if original is None else original
        if data is not None and len(data) > MAX_REJECTED_ORIGINAL:
            detail += (f" (original cut to its first {MAX_REJECTED_ORIGINAL} of {len(data)} "
                       "bytes; the whole record is at the topic, partition and offset above)")
            data = data[:MAX_REJECTED_ORIGINAL]
        where = source if at is None else (at.topic, at.partition, at.offset)
        value = codec.encode(RecordType.REJECTED, {
            "topic": where[0], "partition": where[1], "offset": where[2],
            "key": own_key if key is None else key, "reason": reason, "detail": detail,
            "original": data, "rejectedAt": now_ms,
        })
        return OutRecord(Role.REJECTED, own_key or key or b"", value, None, headers)

    def _refuse(self, about: InputRecord | FiredTimer, reason: ProcessorReject, detail: str,
                now_ms: int) -> Handled:
        handled = Handled(out=[self.rejected(about, reason.value, detail, now_ms)],
                          counters=[f"rejected.{reason.value}"])
        if isinstance(about, InputRecord) and about.receipt is not None:
            handled.out.append(receipt_out(about, about.receipt, refusal(
                about.role is Role.REPLIES, reason.value, detail, now_ms)))
        return handled

    def handle(self, rec: InputRecord, load: Callable[[str], bytes | None], now_ms: int,
               stream_time: int | None = None) -> Handled:
        """Decide `rec` at `now_ms` (its event time); `load` reads the stored row of a wait key.

        `stream_time` is the partition's stream time: a timer record due
        after it is ignored (`Handled.not_due`), because records appended
        before its due time may not have been applied yet (rule 2, docs/rules.md).
        """
        native = self.native()
        if native is not None:
            try:
                decided: Handled | None = native.handle(rec, load, now_ms)
            except Exception:  # a bug of the native path: see `_native_failed`
                self._native_failed()
                decided = None
            if decided is not None:
                return decided
        if not rec.key:
            return self._refuse(rec, ProcessorReject.NO_KEY, "Expected the wait key as record "
                                "key, but the record has none", now_ms)
        problem = key_problem(rec.key)  # too long, or a NUL: streams.core.keys
        if problem is not None:
            return self._refuse(rec, ProcessorReject.INVALID_KEY, problem, now_ms)
        expected = partition_for(rec.key, self.partitions)
        if expected != rec.partition:
            # Produced with another partitioner (librdkafka's CRC32 default):
            # the wait's state lives elsewhere.  Send it where it belongs.
            return Handled(out=[OutRecord(rec.role, rec.key, rec.value or b"", expected,
                                          _forwarded_headers(rec))],
                           counters=["misrouted"])
        try:
            wait_key = rec.key.decode("utf-8")
            origin = (Origin(rec.topic, rec.partition, rec.offset, rec.value)
                      if rec.role in HELD_ROLES and rec.value is not None else None)
            if rec.role is Role.REPLIES:
                kind, record = codec.active_codec().decode_either(REPLIES_TOPIC_TYPES, rec.value)
            else:
                kind, record = RECORD_TYPE[rec.role], codec.decode(RECORD_TYPE[rec.role], rec.value)
            event = to_event(rec.role, record, origin, kind)
            if rec.traceparent is not None and isinstance(event, StartWait):
                event = replace(event, traceparent=rec.traceparent)  # kept with the wait
        except UndecodableRecord as exc:
            return self._refuse(rec, ProcessorReject.UNDECODABLE, f"{exc.reason}: {exc.detail}",
                                now_ms)
        except UnicodeDecodeError:
            return self._refuse(rec, ProcessorReject.UNDECODABLE, "record key is not UTF-8",
                                now_ms)
        except ValueError as exc:  # an enum value the core does not know
            reason = (ProcessorReject.INVALID_COMMAND if rec.role is Role.COMMANDS
                      else ProcessorReject.UNDECODABLE)
            return self._refuse(rec, reason, str(exc), now_ms)
        event_key = (event.wait_key if isinstance(event, TimerFired)
                     else split_correlation_key(event.correlation_key)[0])
        if event_key != wait_key:
            return self._refuse(rec, ProcessorReject.KEY_MISMATCH, "Expected the record key to "
                                f"be the wait key {event_key!r}, but it is {wait_key!r}", now_ms)
        if (isinstance(event, TimerFired) and stream_time is not None
                and event.due_at > stream_time):
            return Handled(counters=["timers.not_yet_due"], not_due=(
                wait_key, event.kind.value, event.due_at, event.generation))
        try:
            handled = self._decide(rec, wait_key, event, load, now_ms)
            if isinstance(event, TimerFired):
                handled.timer = ArmedTimer(event.kind, event.due_at, event.generation)
            return handled
        except Exception as exc:  # a bug must not stop the partition: see docstring
            log.exception("decide failed key=%s topic=%s partition=%s offset=%s",
                          wait_key, rec.topic, rec.partition, rec.offset)
            return self._refuse(rec, ProcessorReject.INTERNAL_ERROR,
                                f"{type(exc).__name__}: {exc}", now_ms)

    def fire(self, timer: FiredTimer, load: Callable[[str], bytes | None], now_ms: int,
             until: int) -> Handled:
        """Decide a due timer the worker took from its own index (`streams.timers.firing`).

        The event decided is the latest timer of the wait due by `until` (its
        partition's stream time: `firing.event_to_fire`); a timer whose arming
        is gone is stale.  A fired timer is no input: it is never a replay and
        moves no position.
        """
        native = self.native()
        if native is not None:
            try:
                decided: Handled | None = native.fire(timer, load, now_ms, until)
            except Exception:  # a bug of the native path: see `_native_failed`
                self._native_failed()
                decided = None
            if decided is not None:
                return decided
        try:
            stored = load(timer.wait_key)
            row = decode_row(stored) if stored is not None else Row(None)
            event = event_to_fire(timer, row.head.timers, until)
            handled = self._decide(timer, timer.wait_key, event, load, now_ms, row)
        except Exception as exc:  # a bug must not stop the partition: see the class
            log.exception("decide failed key=%s timer=%s due_at=%s", timer.wait_key,
                          timer.kind.value, timer.due_at)
            return self._refuse(timer, ProcessorReject.INTERNAL_ERROR,
                                f"{type(exc).__name__}: {exc}", now_ms)
        handled.timer = ArmedTimer(event.kind, event.due_at, event.generation)
        return handled

    def _decide(self, about: InputRecord | FiredTimer, wait_key: str, event: Event,
                load: Callable[[str], bytes | None], now_ms: int,
                row: Row | None = None) -> Handled:
        """Everything from the stored row (`row`, if the caller read it) to the row to
        store: any failure is refused whole."""
        if row is None:
            stored = load(wait_key)
            row = decode_row(stored) if stored is not None else Row(None)
        rec = about if isinstance(about, InputRecord) else None  # None: a fired timer
        if rec is not None and row.is_replay(rec.role, rec.offset):
            return self._replay(rec, row)
        if isinstance(event, TimerFired) and not is_armed(row.head.timers, event):
            return _stale_timer(wait_key, row.head, event)
        slot = decode_slot(row.slot) if row.slot is not None else None
        decision = decide(slot, event, now_ms, self.definitions)
        handled = self._effects(about, wait_key, decision, now_ms)
        if rec is not None and handled.traceparent is None:
            handled.traceparent = rec.traceparent
        if rec is not None and rec.receipt is not None and not isinstance(event, TimerFired):
            # Its sender waits for it (streams.core.receipts): in this decision's outputs,
            # so in its transaction, and decided again with it after a takeover.
            handled.out.append(receipt_out(rec, rec.receipt, receipt_for(
                slot, event, decision, now_ms, self.definitions), event))
        handled.head_before = row.head  # read with the row: the stored slot's head
        if decision.slot != slot:
            if decision.slot is None:
                handled.row = RowWrite.DELETE
            else:
                seen = row.seen if rec is None else {**row.seen, rec.role: rec.offset}
                handled.row = encode_row(Row(encode_slot(decision.slot), seen, (),
                                             handled.head_after))
        too_large = _too_large(handled)
        if too_large is not None:
            return self._refuse(about, ProcessorReject.TOO_LARGE, too_large, now_ms)
        return handled

    @staticmethod
    def _replay(rec: InputRecord, row: Row) -> Handled:
        """An input the stored row already reflects: its records are durable already.

        The commit protocol (`streams.processor.commit`) writes a row only
        after every record its inputs produced was acknowledged, so there is
        nothing to send again - except what a row of an earlier version holds
        in its outbox (rows written before that protocol).
        """
        return Handled(out=list(row.replayed(rec.role, rec.offset)), counters=["replayed"])

    def _effects(self, source: InputRecord | FiredTimer, wait_key: str, decision: Decision,
                 now_ms: int) -> Handled:
        handled = Handled(wait_key=wait_key)
        handled.timers_before = decision.armed_before
        handled.timers_after = decision.armed_after
        handled.head_after = head_of(decision.slot, decision.armed_after)
        key = wait_key.encode()
        # The trace the wait's request came with (`Slot.traceparent`): on its actions and
        # its outcome, whatever decides them (a reply, a command, a timer), however late.
        trace = decision.slot.traceparent if decision.slot is not None else None
        traced: Headers | None = None
        if trace is not None:
            handled.traceparent = trace
            traced = ((TRACEPARENT, trace.encode()),)
        for effect in decision.effects:
            if isinstance(effect, Reject):
                about = effect.reply or effect.command or effect.result
                origin = about.origin if about is not None else None
                if origin is not None:  # a held record: it is named and carried as sent
                    handled.out.append(self.rejected(source, effect.reason.value,
                                                     effect.detail, now_ms,
                                                     original=origin.value, key=key, at=origin))
                else:
                    original = (
                        codec.encode(RecordType.REPLY, reply_record(effect.reply))
                        if effect.reply is not None
                        else codec.encode(RecordType.COMMAND, command_record(effect.command))
                        if effect.command is not None
                        else codec.encode(RecordType.ACTION_RESULT, result_record(effect.result))
                        if effect.result is not None else None)
                    handled.out.append(self.rejected(source, effect.reason.value,
                                                     effect.detail, now_ms, original=original,
                                                     key=key))
                handled.counters.append(f"rejected.{effect.reason.value}")
            elif isinstance(effect, Discard):
                handled.counters.append(f"discarded.{effect.reason.value}")
            elif isinstance(effect, EmitOutcome):
                handled.out.append(OutRecord(Role.OUTCOMES, key, codec.encode(
                    RecordType.OUTCOME, outcome_record(effect)), None, traced))
                handled.counters.append(f"outcomes.{effect.reason.value}")
                handled.outcomes.append(effect)
            elif isinstance(effect, EmitAction):
                handled.out.append(OutRecord(Role.ACTIONS, key, codec.encode(
                    RecordType.ACTION, action_record(effect)), None, traced))
                handled.counters.append(f"actions.{effect.action.value}")
        return handled


def _stale_timer(wait_key: str, head: RowHead, event: TimerFired) -> Handled:
    """What `decide` makes of a timer record whose timer is no longer armed: nothing.

    Decided from the row's head, without decoding the slot: a stale record
    (superseded by a reply, or already fired while catching up) was 43% of
    the timer records in an open run at 500 waits/s, and decoding and
    deciding the slot was most of what each cost.  A test holds this equal
    to the full decision.  If the row has no timer of this kind due then at
    all (any generation), its index entry must go (`Handled.unindexed`).
    """
    timers = frozenset(head.timers)
    listed = any(t.kind is event.kind and t.due_at == event.due_at for t in head.timers)
    return Handled(wait_key=wait_key, timers_before=timers, timers_after=timers,
                   head_before=head, head_after=head,
                   counters=[f"discarded.{DiscardReason.STALE_TIMER.value}"],
                   unindexed=None if listed else (event.kind, event.due_at))


def _too_large(handled: Handled) -> str | None:
    """Why the records of a decision would not fit in Kafka, or None."""
    if isinstance(handled.row, bytes) and len(handled.row) > MAX_RECORD_BYTES:
        return (f"Expected the wait's stored row to stay within {MAX_RECORD_BYTES} bytes, "
                f"but this input would make it {len(handled.row)} bytes; nothing was changed")
    for out in handled.out:
        if len(out.value) > MAX_RECORD_BYTES:
            return (f"Expected every record this input produces to stay within "
                    f"{MAX_RECORD_BYTES} bytes, but its {out.role.value} record would be "
                    f"{len(out.value)} bytes; nothing was changed")
    return None



def _forwarded_headers(rec: InputRecord) -> Headers | None:
    """The headers a worker reads, on a record it forwards to its partition."""
    if rec.traceparent is None and rec.receipt is None:
        return None
    out: list[tuple[str, bytes]] = []
    if rec.traceparent is not None:
        out.append((TRACEPARENT, rec.traceparent.encode()))
    if rec.receipt is not None:
        out.append((RECEIPT, rec.receipt.encode()))
    return tuple(out)


def receipt_out(rec: InputRecord, receipt_id: str, receipt: Receipt,
                event: Reply | Command | StartWait | ActionResult | None = None) -> OutRecord:
    """The Receipt record of `rec`, keyed by the receipt id its sender gave.

    `event` is the record as decoded (None: refused before it could be read)."""
    if isinstance(event, Command):
        record_type: RecordType | None = RecordType.COMMAND
    elif isinstance(event, Reply):
        record_type = RecordType.REPLY
    elif isinstance(event, StartWait):
        record_type = RecordType.START_WAIT
    elif isinstance(event, ActionResult):
        record_type = RecordType.ACTION_RESULT
    else:
        record_type = None
    value = codec.encode(RecordType.RECEIPT, {
        "receiptId": receipt_id,
        "key": None if rec.key is None else rec.key.decode("utf-8", "replace"),
        "correlationKey": None if event is None else event.correlation_key,
        "record": None if record_type is None else record_type.value,
        "command": event.command.value if isinstance(event, Command) else None,
        "verdict": receipt.verdict.value, "reason": receipt.reason, "detail": receipt.detail,
        "decidedAt": receipt.decided_at, "heldUntil": receipt.held_until,
        "outcome": receipt.outcome, "outcomeReason": receipt.outcome_reason,
        "outcomeId": receipt.outcome_id, "party": receipt.party,
        "endedAt": receipt.ended_at, "validationIssue": receipt.validation_issue,
        "actionId": receipt.action_id,
        "topic": rec.topic, "partition": rec.partition, "offset": rec.offset,
    })
    headers = None if rec.traceparent is None else ((TRACEPARENT, rec.traceparent.encode()),)
    return OutRecord(Role.RECEIPTS, receipt_id.encode(), value, None, headers)
