"""The longest wait key (streams.core.keys.MAX_KEY_BYTES), at the processor's input."""

from __future__ import annotations

import pytest

from streams import codec
from streams.core.keys import MAX_KEY_BYTES
from streams.partitioning import partition_for
from streams.processor.model import InputRecord, Role
from tests.processor.test_records import NOW, PARTITIONS, Store, decoded, handler


def _request(key: str) -> InputRecord:
    raw = key.encode()
    value = codec.encode("StartWait", {"correlationKey": key, "definition": "expense-approval",
                                       "requestedAt": NOW})
    return InputRecord(Role.REQUESTS, "xwait.requests", partition_for(raw, PARTITIONS), 0,
                       raw, value)


@pytest.mark.parametrize("role", [Role.REQUESTS, Role.REPLIES, Role.COMMANDS])
def test_a_key_one_byte_over_the_limit_is_rejected_invalid_key_naming_its_length(
        role: Role) -> None:
    key = "é" * (MAX_KEY_BYTES // 2) + "x"  # 2 bytes a character in UTF-8: one byte over
    rec = _request(key)
    rec = InputRecord(role, f"xwait.{role.value}", rec.partition, 0, rec.key, rec.value)
    handled = handler.handle(rec, Store().load, NOW)
    [out] = handled.out
    rejected = decoded(out)
    assert rejected["reason"] == "invalid_key"
    assert f"at most {MAX_KEY_BYTES} bytes" in str(rejected["detail"])
    assert f"has {MAX_KEY_BYTES + 1} bytes" in str(rejected["detail"])
    assert rejected["original"] == rec.value
    assert handled.counters == ["rejected.invalid_key"]


def test_a_key_of_exactly_the_limit_parks_its_wait() -> None:
    key = "é" * (MAX_KEY_BYTES // 2)
    store = Store()
    handled = handler.handle(_request(key), store.load, NOW)
    assert [decoded(o)["action"] for o in handled.out] == ["SEND_REQUEST"]
    assert handled.wait_key == key
