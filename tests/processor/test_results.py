"""Action results on the replies topic (rule 12): read as Avro or JSON beside replies,
decided, and refused with the record as it was sent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streams import codec
from streams.codec import RecordType
from streams.core import ActionKind
from streams.definitions import load_definitions
from streams.processor.model import Handled, InputRecord, Role
from streams.processor.records import RecordHandler
from tests.processor.test_records import KEY, NOW, PART, Store, record, request

pytestmark = [pytest.mark.rule12]

DEFS = load_definitions(Path(__file__).resolve().parents[2] / "topology" / "waits")


def _decided(store: Store, handler: RecordHandler, rec: InputRecord, at: int) -> Handled:
    handled = handler.handle(rec, store.load, at)
    if handled.wait_key is not None:
        store.apply(handled)
    return handled


def _sent(handled: Handled) -> dict[str, object]:
    (out,) = [o for o in handled.out if o.role is Role.ACTIONS]
    return codec.decode(RecordType.ACTION, out.value)


def _result(action: dict[str, object], status: str, *, as_json: bool, offset: int,
            error: str | None = None) -> InputRecord:
    fields = {"correlationKey": action["correlationKey"], "actionId": action["actionId"],
              "status": status, "error": error}
    value = (json.dumps(fields).encode() if as_json
             else codec.encode(RecordType.ACTION_RESULT, fields))
    return record(Role.REPLIES, value, offset)


@pytest.mark.parametrize("as_json", [False, True], ids=["avro", "json"])
def test_a_result_on_the_replies_topic_is_decided_as_a_result(as_json: bool) -> None:
    store, handler = Store(), RecordHandler(DEFS, 8)
    sent = _sent(_decided(store, handler, request(), NOW))
    assert sent["action"] == ActionKind.SEND_REQUEST.value and sent["sendAttempt"] == 1
    handled = _decided(store, handler, _result(sent, "delivered", as_json=as_json, offset=1),
                       NOW + 5)
    assert handled.out == [] and not [c for c in handled.counters if "rejected" in c]
    row = store.rows[KEY]
    assert b"send_delivered" in row


def test_a_result_for_an_unknown_action_is_rejected_carrying_its_bytes() -> None:
    store, handler = Store(), RecordHandler(DEFS, 8)
    _decided(store, handler, request(), NOW)
    rec = _result({"correlationKey": KEY, "actionId": "nope"}, "failed", as_json=True, offset=1)
    handled = _decided(store, handler, rec, NOW + 5)
    (out,) = handled.out
    rejected = codec.decode(RecordType.REJECTED, out.value)
    assert (rejected["reason"], rejected["original"], rejected["partition"]) == (
        "unmatched", rec.value, PART)


def test_a_result_with_a_status_this_build_does_not_know_is_undecodable() -> None:
    store, handler = Store(), RecordHandler(DEFS, 8)
    rec = _result({"correlationKey": KEY, "actionId": "a"}, "bounced", as_json=True, offset=0)
    (out,) = _decided(store, handler, rec, NOW).out
    assert codec.decode(RecordType.REJECTED, out.value)["reason"] == "undecodable"


def test_a_result_held_while_suspended_is_rejected_later_as_it_was_sent() -> None:
    store, handler = Store(), RecordHandler(DEFS, 8)
    sent = _sent(_decided(store, handler, request(), NOW))
    _decided(store, handler, record(Role.COMMANDS, json.dumps(
        {"correlationKey": KEY, "command": "SUSPEND"}).encode(), 0), NOW + 1)
    held = _result({**sent, "actionId": "other"}, "failed", as_json=False, offset=1)
    assert _decided(store, handler, held, NOW + 2).out == []
    handled = _decided(store, handler, record(Role.COMMANDS, json.dumps(
        {"correlationKey": KEY, "command": "RESUME"}).encode(), 1), NOW + 3)
    (out,) = handled.out
    rejected = codec.decode(RecordType.REJECTED, out.value)
    assert (rejected["topic"], rejected["offset"], rejected["original"]) == (
        "xwait.replies", 1, held.value)
