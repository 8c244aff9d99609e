"""A record's whole path through a worker, without the broker: decode, route, decide."""

from __future__ import annotations

import contextlib
import json
import struct
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams import codec
from streams.core import ArmedTimer, TimerKind, WaitStatus
from streams.definitions import load_definitions
from streams.partitioning import partition_for
from streams.processor import records as records_module
from streams.processor.envelope import (
    OutboxEntry,
    Row,
    RowDecodeError,
    decode_row,
    encode_row,
    read_head,
)
from streams.processor.model import (
    INPUT_ROLES,
    Handled,
    InputRecord,
    OutRecord,
    Role,
    RowHead,
    RowWrite,
)
from streams.processor.records import RecordHandler, timer_record
from streams.timers.firing import FiredTimer

pytestmark = [pytest.mark.rule8]

DEFS = load_definitions(Path(__file__).resolve().parents[2] / "topology" / "waits")
PARTITIONS = 8
NOW = 1_800_000_000_000
KEY = "k-0123456789abcdef"
PART = partition_for(KEY.encode(), PARTITIONS)


class Store:
    """The waits table as the agent uses it."""

    def __init__(self) -> None:
        self.rows: dict[str, bytes] = {}

    def load(self, key: str) -> bytes | None:
        return self.rows.get(key)

    def apply(self, handled: Handled) -> None:
        assert handled.wait_key is not None
        if handled.row is RowWrite.DELETE:
            self.rows.pop(handled.wait_key, None)
        elif isinstance(handled.row, bytes):
            self.rows[handled.wait_key] = handled.row


def record(role: Role, value: bytes | None, offset: int, key: str | None = KEY,
           partition: int = PART) -> InputRecord:
    return InputRecord(role, f"xwait.{role.value}", partition, offset,
                       key.encode() if key is not None else None, value)


def request(offset: int = 0) -> InputRecord:
    return record(Role.REQUESTS, codec.encode("StartWait", {
        "correlationKey": KEY, "definition": "expense-approval", "requestedAt": NOW}), offset)


def reply(offset: int, data: object) -> InputRecord:
    return record(Role.REPLIES, json.dumps({
        "correlationKey": KEY, "channel": "portal",
        "responseData": json.dumps(data)}).encode(), offset)


def decoded(out: OutRecord) -> dict[str, object]:
    rtype = {Role.OUTCOMES: "Outcome", Role.ACTIONS: "Action", Role.REJECTED: "Rejected"}
    return codec.decode(rtype[out.role], out.value)


handler = RecordHandler(DEFS, PARTITIONS)


def test_a_request_parks_the_wait_arms_its_timers_and_asks_to_send_the_request() -> None:
    store = Store()
    handled = handler.handle(request(), store.load, NOW)
    store.apply(handled)
    assert [o.role for o in handled.out] == [Role.ACTIONS]
    assert decoded(handled.out[0])["action"] == "SEND_REQUEST"
    assert {t.kind.value for t in handled.timers_after} == {"reminder", "deadline"}
    assert decode_row(store.rows[KEY]).seen == {Role.REQUESTS: 0}


def test_a_json_reply_ends_the_wait_with_one_outcome() -> None:
    store = Store()
    store.apply(handler.handle(request(), store.load, NOW))
    handled = handler.handle(reply(5, {"decision": "approved"}), store.load, NOW + 1)
    outcome = decoded(next(o for o in handled.out if o.role is Role.OUTCOMES))
    assert outcome["outcome"] == "RECEIVED"
    assert handled.timers_after == frozenset(
        t for t in handled.timers_after if t.kind.value == "retention")


def test_an_input_the_row_already_reflects_is_skipped_not_decided_late() -> None:
    # A restart reads again an input whose row reached the changelog: its
    # outputs were acknowledged before the row was produced (streams.processor.commit).
    store = Store()
    store.apply(handler.handle(request(), store.load, NOW))
    store.apply(handler.handle(reply(5, {"decision": "approved"}), store.load, NOW + 1))
    again = handler.handle(reply(5, {"decision": "approved"}), store.load, NOW + 9)
    assert again.out == [] and again.counters == ["replayed"]
    assert again.row is RowWrite.UNCHANGED and again.wait_key is None
    # A genuinely new reply for the finished wait is late, as before.
    late = handler.handle(reply(6, {"decision": "approved"}), store.load, NOW + 9)
    assert [decoded(o)["reason"] for o in late.out] == ["late"]


def test_rows_carry_no_outbox_but_an_earlier_versions_outbox_is_sent_again() -> None:
    store = Store()
    first = handler.handle(request(offset=3), store.load, NOW)
    store.apply(first)
    row = decode_row(store.rows[KEY])
    assert row.outbox == ()
    # A row written by the previous protocol kept its input's records until committed.
    store.rows[KEY] = encode_row(replace(row, outbox=(
        OutboxEntry(Role.REQUESTS, PART, 3, tuple(first.out)),)))
    again = handler.handle(request(offset=3), store.load, NOW + 5)
    assert again.out == first.out and again.counters == ["replayed"]


def test_a_timer_record_not_yet_due_by_stream_time_is_ignored_and_handed_back() -> None:
    store = Store()
    store.apply(handler.handle(request(), store.load, NOW))
    deadline = next(t for t in decode_row(store.rows[KEY]).head.timers
                    if t.kind is TimerKind.DEADLINE)
    forged = record(Role.TIMERS, timer_record(KEY, "deadline", deadline.due_at,
                                              deadline.generation, NOW), 0)
    early = handler.handle(forged, store.load, NOW + 1, stream_time=deadline.due_at - 1)
    assert early.out == [] and early.row is RowWrite.UNCHANGED
    assert early.not_due == (KEY, "deadline", deadline.due_at, deadline.generation)
    due = handler.handle(forged, store.load, NOW + 1, stream_time=deadline.due_at)
    # decided at its due time, after the two reminders due before it
    assert [decoded(o)["action"] for o in due.out] == ["SEND_REMINDER", "SEND_REMINDER",
                                                       "RUN_ESCALATION"]


def test_a_fired_timer_fires_every_timer_of_its_wait_due_by_then_and_names_no_input() -> None:
    store = Store()
    store.apply(handler.handle(request(), store.load, NOW))
    stored = store.rows[KEY]
    first, deadline = sorted(decode_row(stored).head.timers, key=lambda t: t.due_at)
    timer = FiredTimer(PART, KEY, first.kind, first.due_at, first.generation)
    # Taken from the index first (its due time comes first), decided through the deadline:
    # the second reminder, armed by the first, fires on the way.
    all_due = handler.fire(timer, store.load, NOW, until=deadline.due_at)
    assert [decoded(o)["action"] for o in all_due.out] == ["SEND_REMINDER", "SEND_REMINDER",
                                                           "RUN_ESCALATION"]
    assert all_due.timer == deadline
    # Stream time short of the deadline: the reminder taken fires alone, the deadline waits.
    one = handler.fire(timer, store.load, NOW, until=deadline.due_at - 1)
    assert [decoded(o)["action"] for o in one.out] == ["SEND_REMINDER"]
    assert isinstance(one.row, bytes)
    assert deadline in decode_row(one.row).head.timers
    # No input: the row's input offsets stay those of the request.
    assert decode_row(one.row).seen == decode_row(stored).seen
    store.apply(all_due)
    stale = handler.fire(timer, store.load, NOW, until=deadline.due_at)
    assert stale.out == [] and stale.counters == ["discarded.stale_timer"]


def test_a_key_with_a_nul_character_is_refused_as_invalid() -> None:
    handled = handler.handle(record(Role.REPLIES, b"{}", 1, key="k\x00x",
                                    partition=partition_for(b"k\x00x", PARTITIONS)),
                             Store().load, NOW)
    assert decoded(handled.out[0])["reason"] == "invalid_key"


def test_a_record_on_the_wrong_partition_is_forwarded_to_the_right_one() -> None:
    wrong = (PART + 1) % PARTITIONS
    rec = record(Role.REQUESTS, b"anything", 0, partition=wrong)
    handled = handler.handle(rec, Store().load, NOW)
    assert handled.out == [OutRecord(Role.REQUESTS, KEY.encode(), b"anything", PART)]
    assert handled.counters == ["misrouted"]
    assert handled.row is RowWrite.UNCHANGED


def test_undecodable_and_keyless_records_become_rejections_with_the_original_bytes() -> None:
    for rec, reason in ((record(Role.REPLIES, b"\x00\x01garbage", 1), "undecodable"),
                        (record(Role.REPLIES, b"{}", 2, key=None, partition=0), "no_key")):
        handled = handler.handle(rec, Store().load, NOW)
        [out] = handled.out
        rejected = decoded(out)
        assert rejected["reason"] == reason
        assert rejected["original"] == rec.value
        assert rejected["offset"] == rec.offset


def test_a_command_the_core_does_not_know_is_an_invalid_command() -> None:
    value = codec.encode("Command", {"correlationKey": KEY, "command": "UNKNOWN"})
    handled = handler.handle(record(Role.COMMANDS, value, 0), Store().load, NOW)
    assert decoded(handled.out[0])["reason"] == "invalid_command"


def test_a_command_before_its_request_is_held_and_published_whole_when_it_expires() -> None:
    store = Store()
    value = codec.encode("Command", {"correlationKey": KEY, "command": "CANCEL",
                                     "reason": "withdrawn", "operator": "olga"})
    held = handler.handle(record(Role.COMMANDS, value, 0), store.load, NOW)
    store.apply(held)
    assert held.out == [] and KEY in store.rows, "held, not rejected"
    # The request comes eleven minutes later, past the ten-minute early TTL.
    late = handler.handle(request(0), store.load, NOW + 11 * 60_000)
    [rejected] = [decoded(o) for o in late.out if o.role is Role.REJECTED]
    assert rejected["reason"] == "unmatched"
    original = rejected["original"]
    assert isinstance(original, bytes)
    assert original == value, "the command's bytes as sent"
    assert (rejected["topic"], rejected["offset"]) == ("xwait.commands", 0)


def test_an_early_reply_that_expires_is_rejected_as_sent_where_it_was_read() -> None:
    store = Store()
    sent = json.dumps({"correlationKey": KEY, "channel": "portal",
                       "responseData": json.dumps({"decision": "approved"})}).encode()
    store.apply(handler.handle(record(Role.REPLIES, sent, 41), store.load, NOW))
    timer = next(t for t in decode_row(store.rows[KEY]).head.timers
                 if t.kind is TimerKind.EARLY_REPLY)
    expiry = record(Role.TIMERS, timer_record(KEY, "early_reply", timer.due_at,
                                              timer.generation, timer.due_at), 7)
    [out] = handler.handle(expiry, store.load, timer.due_at).out
    rejected = decoded(out)
    assert rejected["reason"] == "unmatched"
    assert (rejected["topic"], rejected["partition"], rejected["offset"]) == (
        "xwait.replies", PART, 41)
    assert rejected["original"] == sent, "the JSON the channel adapter sent, byte for byte"


def test_a_record_whose_key_is_not_its_wait_key_is_rejected() -> None:
    other = "other-key-that-hashes-somewhere"
    value = json.dumps({"correlationKey": KEY, "channel": "portal",
                        "responseData": "{}"}).encode()
    rec = record(Role.REPLIES, value, 0, key=other,
                 partition=partition_for(other.encode(), PARTITIONS))
    handled = handler.handle(rec, Store().load, NOW)
    rejected = decoded(handled.out[0])
    assert rejected["reason"] == "key_mismatch"
    assert str(rejected["detail"]).startswith("Expected")


def test_a_corrupt_row_does_not_stop_the_worker_and_keeps_the_input() -> None:
    store = Store()
    store.rows[KEY] = b"not a row"
    handled = handler.handle(reply(1, {"decision": "approved"}), store.load, NOW)
    rejected = decoded(handled.out[0])
    assert rejected["reason"] == "internal_error"
    assert handled.row is RowWrite.UNCHANGED


out_records = st.builds(OutRecord, st.sampled_from(list(Role)), st.binary(max_size=40),
                        st.binary(max_size=200), st.none() | st.integers(0, 2000))
entries = st.builds(OutboxEntry, st.sampled_from(list(INPUT_ROLES)), st.integers(0, 2000),
                    st.integers(0, 2**40), st.lists(out_records, max_size=4).map(tuple))
texts = st.none() | st.text(max_size=30)
timers = st.builds(ArmedTimer, st.sampled_from(list(TimerKind)), st.integers(0, 2**50),
                   st.integers(1, 2**40))
names = st.none() | st.text(max_size=30).filter(lambda t: "\x1f" not in t)
"""Definition names and versions (a name holds no unit separator: the loader refuses it)."""
heads = st.builds(RowHead, st.none() | st.sampled_from(list(WaitStatus)), names, texts,
                  st.lists(timers, max_size=3).map(tuple), st.integers(0, 2**50), names).map(
    lambda h: h if h.definition is not None else replace(h, version=None))
rows = st.builds(Row, st.none() | st.binary(min_size=1, max_size=300),
                 st.dictionaries(st.sampled_from(list(INPUT_ROLES)), st.integers(0, 2**40)),
                 st.lists(entries, max_size=4).map(tuple), heads)


@settings(max_examples=200, deadline=None)
@given(rows)
def test_rows_round_trip_with_their_outbox(row: Row) -> None:
    assert decode_row(encode_row(row)) == row


@settings(max_examples=200, deadline=None)
@given(rows)
def test_a_row_head_reads_alone_as_the_whole_row_has_it(row: Row) -> None:
    assert read_head(encode_row(row)) == row.head


@given(st.binary(max_size=64))
def test_any_bytes_decode_to_a_row_or_a_row_decode_error(data: bytes) -> None:
    with contextlib.suppress(RowDecodeError):
        decode_row(data)
    with contextlib.suppress(RowDecodeError):
        read_head(data)
    for magic in (b"XR\x01", b"XR\x02"):
        with contextlib.suppress(RowDecodeError):
            read_head(magic + data)


def test_a_request_with_a_huge_tenant_parks_and_keeps_it() -> None:
    store = Store()
    tenant = "t" * 70_000  # longer than a 16-bit length could say
    value = codec.encode("StartWait", {"correlationKey": KEY, "definition": "expense-approval",
                                       "requestedAt": NOW, "tenant": tenant})
    handled = handler.handle(record(Role.REQUESTS, value, 0), store.load, NOW)
    store.apply(handled)
    assert [decoded(o)["action"] for o in handled.out] == ["SEND_REQUEST"]
    assert read_head(store.rows[KEY]).tenant == tenant


def test_an_input_whose_records_would_not_fit_in_kafka_is_refused_whole() -> None:
    store = Store()
    store.apply(handler.handle(request(), store.load, NOW))
    huge = {"decision": "approved", "by": "x" * 950_000}  # valid, but no outcome can carry it
    handled = handler.handle(reply(1, huge), store.load, NOW + 5)
    [out] = handled.out
    rejected = decoded(out)
    assert (out.role, rejected["reason"]) == (Role.REJECTED, "too_large")
    assert handled.row is RowWrite.UNCHANGED
    original = rejected["original"]
    assert isinstance(original, bytes) and len(original) == 512 * 1024, "cut, not dropped"
    assert read_head(store.rows[KEY]).state is WaitStatus.PARKED, "the wait goes on as before"
    # A request with a payload too large to send is refused the same way.
    big = codec.encode("StartWait", {"correlationKey": "k-other", "definition": "expense-approval",
                                     "requestedAt": NOW, "payload": "p" * 950_000})
    rec = record(Role.REQUESTS, big, 2, key="k-other",
                 partition=partition_for(b"k-other", PARTITIONS))
    refused = handler.handle(rec, Store().load, NOW)
    assert [decoded(o)["reason"] for o in refused.out] == ["too_large"]
    assert refused.row is RowWrite.UNCHANGED


def test_the_stored_head_is_the_wait_as_it_now_stands() -> None:
    store = Store()
    handled = handler.handle(request(), store.load, NOW)
    store.apply(handled)
    head = read_head(store.rows[KEY])
    assert head.state is WaitStatus.PARKED and head.definition == "expense-approval"
    assert head.parked_at == NOW
    assert {t.kind for t in head.timers} == {TimerKind.REMINDER, TimerKind.DEADLINE}
    assert head.next_due == min(t.due_at for t in head.timers)
    assert handled.head_before.state is None and handled.head_after == head
    store.apply(handler.handle(reply(1, {"decision": "approved"}), store.load, NOW + 5))
    head = read_head(store.rows[KEY])
    assert head.state is WaitStatus.DONE
    assert [t.kind for t in head.timers] == [TimerKind.RETENTION]


def test_rows_written_before_heads_existed_are_still_read() -> None:
    store = Store()
    store.apply(handler.handle(request(), store.load, NOW))
    row = decode_row(store.rows[KEY])
    slot = row.slot
    assert slot is not None
    row = replace(row, outbox=(OutboxEntry(Role.REQUESTS, PART, 0, (
        OutRecord(Role.ACTIONS, KEY.encode(), b"an action"),)),))
    v2 = encode_row(row)
    # Version 1 had no head; what follows the slot is laid out the same.
    after_slot = v2[v2.index(slot) + len(slot):]
    v1 = b"XR\x01" + struct.pack(">I", len(slot)) + slot + after_slot
    assert decode_row(v1) == row
    assert read_head(v1) == row.head


hostile_text = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["\ud800", "a\udfffb", "\ud83d", "P99999999999D", "P36501D", "PT-1S",
                     "R99999999999/PT1S", "", "\x00", "P1Y", "9" * 400, '{"decision": "\ud800"}']),
)
maybe = st.one_of(st.none(), hostile_text)
hostile_records = st.one_of(
    st.tuples(st.just(Role.REQUESTS), st.fixed_dictionaries({
        "correlationKey": st.just("k-2"), "definition": st.just("expense-approval"),
        "requestedAt": st.just(NOW), "deadline": maybe, "tenant": maybe, "payload": maybe,
        "parties": st.lists(hostile_text, max_size=2)})),
    st.tuples(st.just(Role.REPLIES), st.fixed_dictionaries({
        "correlationKey": st.just(KEY), "channel": st.one_of(st.just("portal"), hostile_text),
        "responseData": hostile_text, "tenant": st.none(), "replyId": maybe})),
    st.tuples(st.just(Role.COMMANDS), st.fixed_dictionaries({
        "correlationKey": st.just(KEY),
        "command": st.sampled_from(["SUSPEND", "RESUME", "CANCEL", "DELIVER", "REVIEW"]),
        "reason": maybe, "responseData": maybe, "operator": maybe, "reviewNote": maybe,
        "reviewOutcome": st.one_of(st.sampled_from(["Accept", "Submit Correction"]), maybe)})),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(hostile_records, min_size=1, max_size=4))
def test_hostile_json_is_a_named_rejection_or_a_decision_never_an_internal_error(
    records: list[tuple[Role, dict[str, object]]],
) -> None:
    """Lone surrogates, overflowing durations and odd text are the sender's mistakes."""
    store = Store()
    store.apply(handler.handle(request(0), store.load, NOW))
    for offset, (role, fields) in enumerate(records, start=5):
        key = str(fields["correlationKey"])
        value = json.dumps(fields).encode()  # json escapes lone surrogates as \\udXXX
        handled = handler.handle(record(role, value, offset, key=key,
                                        partition=partition_for(key.encode(), PARTITIONS)),
                                 store.load, NOW + offset)
        reasons = [decoded(o)["reason"] for o in handled.out if o.role is Role.REJECTED]
        assert "internal_error" not in reasons, (reasons, fields)
        if handled.wait_key is not None:
            store.apply(handled)


def _timer(offset: int, kind: str, due_at: int, generation: int) -> InputRecord:
    return record(Role.TIMERS, timer_record(KEY, kind, due_at, generation, due_at), offset)


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(st.tuples(st.sampled_from(["armed", "stale", "reply"]),
                                st.integers(0, 5), st.sampled_from([-1, 0, 1])),
                      min_size=1, max_size=8))
def test_a_stale_timer_record_is_decided_as_decide_would(
        steps: list[tuple[str, int, int]]) -> None:
    # The handler answers a timer record whose timer is no longer armed from
    # the row's head, without decoding the slot; forcing the full decision
    # must give the same Handled, for stale and armed records alike.
    store = Store()
    store.apply(handler.handle(request(), store.load, NOW))
    for offset, (what, pick, nudge) in enumerate(steps, start=1):
        stored = store.rows.get(KEY)
        armed = decode_row(stored).head.timers if stored is not None else ()
        if what == "reply":
            rec = reply(offset, {"decision": "approved"} if pick == 0 else {"nope": pick})
        elif armed:
            t = armed[pick % len(armed)]
            stale = what == "stale"
            rec = _timer(offset, t.kind.value, t.due_at + (nudge if stale else 0),
                         t.generation + (1 if stale and nudge == 0 else 0))
        else:
            rec = _timer(offset, "deadline", NOW + pick, pick)
        now = NOW + 10_000_000 if rec.role is Role.TIMERS else NOW + offset
        fast = handler.handle(rec, store.load, now)
        original = getattr(records_module, "is_armed")  # noqa: B009 - not exported
        setattr(records_module, "is_armed", lambda armed, event: True)  # noqa: B010
        try:
            full = handler.handle(rec, store.load, now)
        finally:
            setattr(records_module, "is_armed", original)  # noqa: B010
        # ...except that the fast path also names an index entry the row does
        # not list at all (any generation), to be deleted.
        assert replace(fast, unindexed=None) == full
        event = codec.decode("Timer", rec.value) if rec.role is Role.TIMERS else None
        listed = event is not None and any(
            t.kind.value == event["kind"] and t.due_at == event["dueAt"] for t in armed)
        assert fast.unindexed == (None if event is None or listed else (
            TimerKind(event["kind"]), event["dueAt"]))
        if fast.wait_key is not None:
            store.apply(fast)


def test_every_record_the_worker_writes_takes_the_generated_encoder() -> None:
    # A record type of our own that always fell back to fastavro would be a
    # slow path nobody sees (rejections did: their reason was an enum, not str).
    active = codec.active_codec()
    active.fallbacks.clear()
    store = Store()
    outs: list[OutRecord] = []
    for step in range(6):
        stored = store.rows.get(KEY)
        armed = decode_row(stored).head.timers if stored is not None else ()
        rec = [request(0),
               _timer(1, armed[0].kind.value, armed[0].due_at, armed[0].generation)
               if armed else request(1),
               reply(2, {"decision": "approved"}),
               record(Role.REPLIES, b"\xc3\x01garbage", 3),
               record(Role.REPLIES, b"{}", 4, key=None),
               _timer(5, "deadline", NOW, 99)][step]
        handled = handler.handle(rec, store.load, NOW + 10_000_000)
        outs += handled.out
        if handled.wait_key is not None:
            store.apply(handled)
    timer_record(KEY, "deadline", NOW, 1, NOW)

    assert {o.role for o in outs} >= {Role.ACTIONS, Role.OUTCOMES, Role.REJECTED}
    assert dict(active.fallbacks) == {}
