"""Replies and operator commands with the SDK, read back raw from their topics."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Message

from streams import codec
from streams.client import InvalidRequest, XwaitClient
from streams.codec import RecordType
from streams.config import Settings
from streams.definition_store import DefinitionStore
from streams.definitions import load_documents
from streams.partitioning import partition_for

ReadRaw = Callable[[Settings, str, int], list[Message]]
EndOffsets = Callable[[Settings, str], list[int]]


def decoded(record_type: RecordType, msg: Message) -> dict[str, Any]:
    return codec.decode(record_type, msg.value())



def test_a_party_reply_carries_waitkey_tilde_party_but_is_keyed_by_waitkey(
    topics: Settings, read_raw: ReadRaw,
) -> None:
    with XwaitClient(topics) as client:
        key = client.start_wait("first-valid")
        client.reply(f"{key}~carrier-b", {"price": 410.5}, channel="portal", tenant="acme",
                     reply_id="r-1")

    [request] = read_raw(topics, "requests", 1)
    [msg] = read_raw(topics, "replies", 1)
    assert msg.key() == key.encode()
    assert msg.partition() == request.partition() == partition_for(key.encode(),
                                                                   topics.partitions)
    assert decoded(RecordType.REPLY, msg) == {
        "correlationKey": f"{key}~carrier-b", "tenant": "acme", "channel": "portal",
        "responseData": '{"price":410.5}', "replyId": "r-1", "sentAt": None,
    }


@pytest.mark.parametrize("key", ["~party", "k~", "k~a~b"])
def test_a_malformed_party_key_is_refused(
    topics: Settings, key: str, end_offsets: EndOffsets,
) -> None:
    with XwaitClient(topics) as client, pytest.raises(InvalidRequest):
        client.reply(key, {}, channel="portal")
    assert end_offsets(topics, "replies") == [0] * topics.partitions


def test_each_operator_command_writes_its_fields_keyed_by_the_wait_key(
    topics: Settings, read_raw: ReadRaw,
) -> None:
    key = "wait-1"
    # A worker's start publishes its definitions' versions: MIGRATE names one of them.
    version = DefinitionStore(topics).sync(load_documents(topics.topology / "waits"))[
        "vendor-quote"].version
    with XwaitClient(topics) as client:
        client.suspend(key, "vendor on holiday", operator="ana")
        client.resume(key, operator="ana")
        client.deliver(key, {"amount": 10, "currency": "EUR"}, reason="by phone", operator="bo")
        client.review(key, "Accept", "looks fine", operator="cy")
        client.review(key, "Submit Correction", "typo in currency",
                      corrected_data='{"amount": 10, "currency": "EUR"}', operator="cy")
        client.reschedule(key, move_by="-PT30M", reason="customer in a hurry", operator="di")
        client.migrate(key, version=version, reason="new policy", operator="ed")
        client.cancel(key, "order withdrawn")

    msgs = read_raw(topics, "commands", 8)  # one key, one partition: in order
    assert {m.key() for m in msgs} == {key.encode()}
    records = [decoded(RecordType.COMMAND, m) for m in msgs]
    blank = {"correlationKey": key, "reason": None, "reviewOutcome": None, "reviewNote": None,
             "responseData": None, "operator": None, "deadline": None, "moveBy": None,
             "version": None, "operationId": None}
    assert records == [
        {**blank, "command": "SUSPEND", "reason": "vendor on holiday", "operator": "ana"},
        {**blank, "command": "RESUME", "operator": "ana"},
        {**blank, "command": "DELIVER", "reason": "by phone", "operator": "bo",
         "responseData": '{"amount":10,"currency":"EUR"}'},
        {**blank, "command": "REVIEW", "reviewOutcome": "Accept", "reviewNote": "looks fine",
         "operator": "cy"},
        {**blank, "command": "REVIEW", "reviewOutcome": "Submit Correction",
         "reviewNote": "typo in currency", "responseData": '{"amount": 10, "currency": "EUR"}',
         "operator": "cy"},
        {**blank, "command": "RESCHEDULE", "moveBy": "-PT30M",
         "reason": "customer in a hurry", "operator": "di"},
        {**blank, "command": "MIGRATE", "version": version, "reason": "new policy",
         "operator": "ed"},
        {**blank, "command": "CANCEL", "reason": "order withdrawn"},
    ]


def test_a_command_of_a_bulk_operation_carries_its_id_and_a_bad_id_sends_nothing(
    topics: Settings, read_raw: ReadRaw, end_offsets: EndOffsets,
) -> None:
    with XwaitClient(topics) as client:
        with pytest.raises(InvalidRequest, match="operation: Expected an operation id of "
                                                 "letters, digits"):
            client.cancel("wait-3", "cleanup", operation="two words")
        assert end_offsets(topics, "commands") == [0] * topics.partitions
        client.cancel("wait-3", "cleanup", operator="ann", operation="cleanup-7")
    [msg] = read_raw(topics, "commands", 1)
    record = decoded(RecordType.COMMAND, msg)
    assert (record["command"], record["operationId"]) == ("CANCEL", "cleanup-7")


def test_results_are_written_beside_the_replies_keyed_by_the_wait_key(
    topics: Settings, read_raw: ReadRaw,
) -> None:
    with XwaitClient(topics) as client:
        client.report_delivered("wait-2~carrier-a", "a-1", at=5)
        client.report_failed("wait-2", "a-2", "550 mailbox unavailable", permanent=True)
    msgs = read_raw(topics, "replies", 2)
    assert {m.key() for m in msgs} == {b"wait-2"}
    assert [decoded(RecordType.ACTION_RESULT, m) for m in msgs] == [
        {"correlationKey": "wait-2~carrier-a", "actionId": "a-1", "status": "delivered",
         "error": None, "permanent": False, "at": 5},
        {"correlationKey": "wait-2", "actionId": "a-2", "status": "failed",
         "error": "550 mailbox unavailable", "permanent": True, "at": None},
    ]


def test_results_are_checked_before_anything_is_produced(
    topics: Settings, end_offsets: EndOffsets,
) -> None:
    with XwaitClient(topics) as client:
        with pytest.raises(InvalidRequest, match="action id"):
            client.report_delivered("k", "")
        with pytest.raises(InvalidRequest, match="error"):
            client.report_failed("k", "a-1", "")
        with pytest.raises(InvalidRequest, match="WAITKEY~PARTY"):
            client.report_delivered("k~", "a-1")
    assert end_offsets(topics, "replies") == [0] * topics.partitions


def test_reschedule_arguments_are_checked_before_anything_is_produced(
    topics: Settings, end_offsets: EndOffsets,
) -> None:
    with XwaitClient(topics) as client:
        for kwargs, message in (({}, "exactly one of deadline"),
                                ({"deadline": "PT1H", "move_by": "PT1H"}, "exactly one"),
                                ({"deadline": "-PT1H"}, "deadline: Expected"),
                                ({"move_by": "P1M"}, "move_by: Expected")):
            with pytest.raises(InvalidRequest, match=message):
                client.reschedule("k", **kwargs)  # type: ignore[arg-type]
    assert end_offsets(topics, "commands") == [0] * topics.partitions


def test_review_decisions_are_checked_before_anything_is_produced(
    topics: Settings, end_offsets: EndOffsets,
) -> None:
    with XwaitClient(topics) as client:
        with pytest.raises(InvalidRequest, match="'Accept' or 'Submit Correction'"):
            client.review("k", "Reject", "no")  # type: ignore[arg-type]
        with pytest.raises(InvalidRequest, match="needs the corrected data"):
            client.review("k", "Submit Correction", "fix")
        with pytest.raises(InvalidRequest, match="only for 'Submit Correction'"):
            client.review("k", "Accept", "ok", corrected_data={"a": 1})
        with pytest.raises(InvalidRequest, match="contains '~'"):
            client.cancel("k~party", "no")
    assert end_offsets(topics, "commands") == [0] * topics.partitions
