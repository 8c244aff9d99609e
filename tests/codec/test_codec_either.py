"""A topic of two record types (replies and action results): the bytes say which."""

from __future__ import annotations

import json

import pytest

from streams.codec import RecordType, UndecodableReason, UndecodableRecord, default_codec

CODEC = default_codec()
BOTH = (RecordType.REPLY, RecordType.ACTION_RESULT)
REPLY = {"correlationKey": "k", "tenant": None, "channel": "portal",
         "responseData": '{"actionId": "x", "status": "failed"}', "replyId": None,
         "sentAt": None}
RESULT = {"correlationKey": "k~a", "actionId": "a-1", "status": "delivered", "error": None,
          "permanent": False, "at": 5}


@pytest.mark.parametrize(("kind", "record"), [(RecordType.REPLY, REPLY),
                                              (RecordType.ACTION_RESULT, RESULT)])
def test_avro_and_json_of_either_type_read_as_that_type(kind: RecordType,
                                                         record: dict[str, object]) -> None:
    assert CODEC.decode_either(BOTH, CODEC.encode(kind, record)) == (kind, record)
    assert CODEC.decode_either(BOTH, json.dumps(record).encode()) == (kind, record)


def test_a_reply_whose_data_mentions_action_ids_is_a_reply() -> None:
    text = json.dumps(REPLY).encode()
    assert b"actionId" in text
    assert CODEC.decode_either(BOTH, text)[0] is RecordType.REPLY


def test_json_that_is_neither_is_refused_as_the_first_type_would_refuse_it() -> None:
    with pytest.raises(UndecodableRecord) as caught:
        CODEC.decode_either(BOTH, b'{"correlationKey": "k", "actionId": "a"}')
    assert caught.value.reason == UndecodableReason.SCHEMA_MISMATCH
    assert "Reply" in str(caught.value)


def test_another_record_type_is_refused_naming_what_it_is() -> None:
    data = CODEC.encode(RecordType.COMMAND, {"correlationKey": "k", "command": "CANCEL"})
    with pytest.raises(UndecodableRecord) as caught:
        CODEC.decode_either(BOTH, data)
    assert caught.value.reason == UndecodableReason.WRONG_RECORD_TYPE
