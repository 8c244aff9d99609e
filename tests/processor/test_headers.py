"""Kafka headers through a worker, without the broker: a request's traceparent on every
action and the outcome of its wait (whoever decides them, however late), the
receipt a sender asked for, and both committers producing the headers."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from confluent_kafka import Message

from streams import codec
from streams.core import decode_slot
from streams.headers import (
    RECEIPT,
    TRACEPARENT,
    new_traceparent,
    read_input_headers,
    valid_traceparent,
)
from streams.processor.batch import Batch, PartitionBatch
from streams.processor.commit import AtLeastOnce, ExactlyOnce
from streams.processor.envelope import decode_row
from streams.processor.gaps import input_record
from streams.processor.model import InputRecord, OutRecord, Role
from streams.processor.positions import Positions
from streams.timers.firing import FiredTimer
from tests.processor.test_commit import ScriptedProducer, _ctx
from tests.processor.test_records import (
    KEY,
    NOW,
    PART,
    PARTITIONS,
    Store,
    handler,
    record,
    reply,
    request,
)

pytestmark = [pytest.mark.rule8]

TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
HOUR = 3_600_000


def traced(rec: InputRecord, traceparent: str | None = TRACE,
           receipt: str | None = None) -> InputRecord:
    return InputRecord(rec.role, rec.topic, rec.partition, rec.offset, rec.key, rec.value,
                       rec.timestamp, rec.log_append_time, rec.follows, traceparent, receipt)


def trace_of(out: OutRecord) -> str | None:
    return dict(out.headers or ()).get(TRACEPARENT, b"").decode() or None


def receipt_of(outs: list[OutRecord]) -> dict[str, Any]:
    [found] = [o for o in outs if o.role is Role.RECEIPTS]
    return codec.decode("Receipt", found.value)


# -- reading ---------------------------------------------------------------------------


def test_the_worker_reads_the_two_headers_it_uses_from_a_kafka_message() -> None:
    msg = Message(topic="x.replies", partition=2, offset=7, key=b"k", value=b"{}",
                  headers=[("other", b"x"), (TRACEPARENT, TRACE.encode()),
                           (RECEIPT, b"r-1")], timestamp=(2, 1234))
    rec = input_record(Role.REPLIES, msg)
    assert (rec.traceparent, rec.receipt, rec.timestamp, rec.log_append_time) == (
        TRACE, "r-1", 1234, True)
    bare = input_record(Role.REPLIES, Message(topic="x.replies", partition=2, offset=8,
                                              key=b"k", value=b"{}", timestamp=(2, 5)))
    assert (bare.traceparent, bare.receipt) == (None, None)


@pytest.mark.parametrize("value", [
    "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # an all-zero trace id
    "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  # an all-zero parent
    "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # version ff
    "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  # upper case
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",  # v00 with more
    "not a trace",
])
def test_an_invalid_traceparent_is_not_carried_on(value: str) -> None:
    assert not valid_traceparent(value)
    assert read_input_headers([(TRACEPARENT, value.encode())]) == (None, None)


def test_a_later_version_of_traceparent_and_a_fresh_one_are_taken() -> None:
    assert valid_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x")
    assert valid_traceparent(new_traceparent()) and new_traceparent() != new_traceparent()


def test_a_receipt_id_that_cannot_key_a_receipt_asks_for_none() -> None:
    assert read_input_headers([(RECEIPT, b"x" * 129)]) == (None, None)
    assert read_input_headers([(RECEIPT, b"\xff\xfe")]) == (None, None)
    assert read_input_headers({RECEIPT: "r-9"}) == (None, "r-9")


# -- the trace of a wait ---------------------------------------------------------------


def test_a_requests_traceparent_is_kept_and_written_on_its_actions_and_outcome() -> None:
    store = Store()
    parked = handler.handle(traced(request()), store.load, NOW)
    store.apply(parked)
    [send] = parked.out
    assert send.role is Role.ACTIONS and trace_of(send) == TRACE
    stored = decode_row(store.rows[KEY]).slot
    assert stored is not None and decode_slot(stored).traceparent == TRACE

    # A reminder, fired by the worker's own timer a day later (no input record).
    reminder = next(t for t in parked.timers_after if t.kind.value == "reminder")
    fired = handler.fire(FiredTimer(PART, KEY, reminder.kind, reminder.due_at,
                                    reminder.generation), store.load, reminder.due_at,
                         reminder.due_at)
    store.apply(fired)
    [action] = fired.out
    assert codec.decode("Action", action.value)["action"] == "SEND_REMINDER"
    assert trace_of(action) == TRACE and fired.traceparent == TRACE

    # The reply that ends it carries no trace of its own: the outcome is the wait's.
    ended = handler.handle(reply(4, {"decision": "approved"}), store.load,
                           reminder.due_at + HOUR)
    [outcome] = [o for o in ended.out if o.role is Role.OUTCOMES]
    assert trace_of(outcome) == TRACE and ended.traceparent == TRACE


def test_a_wait_started_without_a_trace_writes_no_headers() -> None:
    store = Store()
    parked = handler.handle(request(), store.load, NOW)
    store.apply(parked)
    ended = handler.handle(reply(1, {"decision": "approved"}), store.load, NOW + 1)
    assert [o.headers for o in parked.out + ended.out] == [None] * (
        len(parked.out) + len(ended.out))
    assert ended.traceparent is None


def test_a_rejection_carries_the_trace_of_the_record_it_refuses() -> None:
    store = Store()
    refused = handler.handle(traced(record(Role.REPLIES, b"\x00junk", 3)), store.load, NOW)
    [rejected] = refused.out
    assert rejected.role is Role.REJECTED and trace_of(rejected) == TRACE


def test_a_misrouted_record_is_forwarded_with_its_headers() -> None:
    wrong = (PART + 1) % PARTITIONS
    rec = traced(record(Role.REPLIES, b"{}", 3, partition=wrong), receipt="r-7")
    [forward] = handler.handle(rec, Store().load, NOW).out
    assert forward.partition == PART
    assert dict(forward.headers or ()) == {TRACEPARENT: TRACE.encode(), RECEIPT: b"r-7"}


# -- receipts --------------------------------------------------------------------------


def test_a_reply_that_asked_for_a_receipt_gets_one_keyed_by_its_id() -> None:
    store = Store()
    store.apply(handler.handle(request(), store.load, NOW))
    asked = traced(reply(5, {"decision": "approved"}), receipt="r-42")
    handled = handler.handle(asked, store.load, NOW + 7)
    [out] = [o for o in handled.out if o.role is Role.RECEIPTS]
    [outcome] = [codec.decode("Outcome", o.value) for o in handled.out
                 if o.role is Role.OUTCOMES]
    got = receipt_of(handled.out)
    assert out.key == b"r-42" and trace_of(out) == TRACE
    assert (got["receiptId"], got["verdict"], got["record"], got["correlationKey"]) == (
        "r-42", "won", "Reply", KEY)
    assert (got["outcomeId"], got["endedAt"], got["decidedAt"]) == (
        outcome["outcomeId"], NOW + 7, NOW + 7)
    assert (got["topic"], got["partition"], got["offset"]) == ("xwait.replies", PART, 5)


def test_no_receipt_is_written_for_a_record_that_asked_for_none() -> None:
    store = Store()
    store.apply(handler.handle(request(), store.load, NOW))
    handled = handler.handle(reply(5, {"decision": "approved"}), store.load, NOW + 7)
    assert Role.RECEIPTS not in {o.role for o in handled.out}


def test_a_record_refused_before_any_decision_still_gets_its_receipt() -> None:
    handled = handler.handle(traced(record(Role.COMMANDS, b"\x00junk", 3), None, "c-1"),
                             Store().load, NOW)
    got = receipt_of(handled.out)
    assert (got["verdict"], got["reason"], got["record"]) == ("refused", "undecodable", None)


def test_an_input_read_again_after_its_row_was_stored_writes_no_second_receipt() -> None:
    """Its receipt went out with the batch that stored the row (before it, under
    at_least_once; in its transaction, under exactly_once)."""
    store = Store()
    store.apply(handler.handle(request(), store.load, NOW))
    asked = traced(reply(5, {"decision": "approved"}), receipt="r-1")
    store.apply(handler.handle(asked, store.load, NOW + 1))
    again = handler.handle(asked, store.load, NOW + 9)
    assert again.out == [] and again.counters == ["replayed"]


def test_a_command_decided_again_on_the_same_row_gets_the_same_receipt() -> None:
    """A takeover decides again what was not stored: the same receipt, byte for byte."""
    store = Store()
    store.apply(handler.handle(request(), store.load, NOW))
    cancel = traced(record(Role.COMMANDS, json.dumps({
        "correlationKey": KEY, "command": "CANCEL", "reason": "gone"}).encode(), 2),
        None, "c-9")
    first = handler.handle(cancel, store.load, NOW + 5)
    second = handler.handle(cancel, store.load, NOW + 5)
    assert [o for o in first.out if o.role is Role.RECEIPTS] == \
        [o for o in second.out if o.role is Role.RECEIPTS]
    got = receipt_of(first.out)
    assert (got["verdict"], got["command"], got["outcome"]) == ("applied", "CANCEL",
                                                                "CANCELLED")


# -- producing -------------------------------------------------------------------------


class HeaderProducer(ScriptedProducer):
    """The scripted transactional producer, also keeping what headers each record had."""

    headers: list[tuple[str, Any]] = []

    def produce(self, topic: str, value: bytes | None, key: bytes, on_delivery: Any,
                partition: int = 0, headers: Any = None) -> None:
        HeaderProducer.headers.append((topic, headers))
        super().produce(topic, value, key, on_delivery, partition)


class OutputProducer:
    """at_least_once's idempotent output producer: acknowledges at flush."""

    def __init__(self, conf: dict[str, Any]) -> None:
        self.queued: list[Any] = []

    def produce(self, topic: str, value: bytes | None, key: bytes, on_delivery: Any,
                partition: int | None = None, headers: Any = None) -> None:
        HeaderProducer.headers.append((topic, headers))
        self.queued.append(on_delivery)

    def flush(self, timeout: float) -> int:
        for on_delivery in self.queued:
            on_delivery(None, None)
        self.queued = []
        return 0

    def poll(self, timeout: float) -> int:
        return 0


def _traced_batch() -> Batch:
    headers = ((TRACEPARENT, TRACE.encode()),)
    part = PartitionBatch(0, Positions(next_offset={Role.REPLIES: 1}), out=[
        OutRecord(Role.OUTCOMES, b"wait-1", b"outcome", None, headers),
        OutRecord(Role.ACTIONS, b"wait-1", b"action")], rows={b"wait-1": b"row"})
    return Batch(parts={0: part})


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
def test_both_committers_produce_the_records_headers(guarantee: str) -> None:
    HeaderProducer.headers = []
    ScriptedProducer.script, ScriptedProducer.made, ScriptedProducer.visible = [], [], []
    ScriptedProducer.abort_error = None
    committer: ExactlyOnce | AtLeastOnce = (
        ExactlyOnce(_ctx(), {}, make_producer=HeaderProducer) if guarantee == "exactly_once"
        else AtLeastOnce(_ctx(), {}, make_producer=HeaderProducer,
                         make_output_producer=OutputProducer))

    async def scenario() -> None:
        await committer.assign([0])
        try:
            await committer.commit(_traced_batch())
        finally:
            await committer.close()

    asyncio.run(scenario())
    outputs = [(t, h) for t, h in HeaderProducer.headers if t != "changelog"]
    assert outputs == [("t.outcomes", [(TRACEPARENT, TRACE.encode())]), ("t.actions", None)]
