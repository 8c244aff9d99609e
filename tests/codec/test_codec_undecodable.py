"""Bad bytes become UndecodableRecord with a useful detail, and never anything else.

The processor turns exactly this exception into a Rejected record; any other
exception type escaping decode would crash the worker on one bad record.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from fastavro.validation import validate
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams.codec import (
    Codec,
    RecordType,
    SchemaNotFound,
    UndecodableReason,
    UndecodableRecord,
    default_codec,
)

CODEC = default_codec()
REPLY = {"correlationKey": "k-1", "channel": "email", "responseData": "{}", "sentAt": 5}


def undecodable(
    record_type: RecordType, data: bytes | None, codec: Codec = CODEC
) -> UndecodableRecord:
    with pytest.raises(UndecodableRecord) as caught:
        codec.decode(record_type, data)
    return caught.value


@pytest.mark.parametrize("data", [b"", None], ids=["empty", "tombstone"])
def test_empty_value_is_undecodable(data: bytes | None) -> None:
    error = undecodable(RecordType.REPLY, data)
    assert error.reason == UndecodableReason.EMPTY
    assert (
        error.detail == "the value is empty; expected Avro single-object encoding or a JSON object"
    )


def test_truncated_avro_body_says_it_ends_early() -> None:
    # given a valid record cut short by one byte
    data = CODEC.encode(RecordType.REPLY, REPLY)[:-1]
    # then
    error = undecodable(RecordType.REPLY, data)
    assert error.reason == UndecodableReason.MALFORMED_AVRO
    assert error.detail == (
        "Avro body does not match the current Reply schema "
        "(the body ends early: truncated or not this record)"
    )


def test_header_cut_short_is_truncated() -> None:
    error = undecodable(RecordType.REPLY, CODEC.encode(RecordType.REPLY, REPLY)[:6])
    assert error.reason == UndecodableReason.TRUNCATED
    assert error.detail.startswith("only 6 bytes; the single-object header alone is 10")


def test_trailing_bytes_after_a_record_are_not_ignored() -> None:
    error = undecodable(RecordType.REPLY, CODEC.encode(RecordType.REPLY, REPLY) + b"\x00")
    assert error.reason == UndecodableReason.MALFORMED_AVRO
    assert error.detail == "1 unexpected byte after the current Reply record"


def test_unknown_fingerprint_is_named_with_the_known_ones() -> None:
    # given a single-object record from a schema this build has never seen
    data = b"\xc3\x01" + bytes.fromhex("0123456789abcdef") + b"\x02k"
    # then
    error = undecodable(RecordType.REPLY, data)
    assert error.reason == UndecodableReason.UNKNOWN_FINGERPRINT
    assert error.detail.startswith("unknown schema fingerprint 0x0123456789abcdef ")
    assert CODEC.schema(RecordType.REPLY).fingerprint_hex in error.detail


def test_record_of_another_type_is_refused_by_name() -> None:
    # given a valid Reply on the commands topic
    data = CODEC.encode(RecordType.REPLY, REPLY)
    # then
    error = undecodable(RecordType.COMMAND, data)
    assert error.reason == UndecodableReason.WRONG_RECORD_TYPE
    assert error.detail.startswith("this is a Reply record (fingerprint 0x")
    assert error.detail.endswith("), expected Command")


def test_random_garbage_shows_its_first_bytes() -> None:
    error = undecodable(RecordType.REPLY, b"\x89PNG\r\n\x1a\n" + b"\x00" * 20)
    assert error.reason == UndecodableReason.UNKNOWN_FORMAT
    assert error.detail.startswith(
        "starts with 89 50 4E 47 0D 0A 1A 0A 00 00 00 00 00 00 00 00 ..."
    )


def test_non_utf8_text_that_is_not_json_is_an_unknown_format() -> None:
    error = undecodable(RecordType.REPLY, "réponse: oui".encode("latin-1"))
    assert error.reason == UndecodableReason.UNKNOWN_FORMAT


def test_corrupt_union_index_is_malformed_not_a_crash() -> None:
    # given a Reply whose tenant union branch index is 7 (zig-zag 0x0e)
    header = CODEC.header(RecordType.REPLY)
    error = undecodable(RecordType.REPLY, header + b"\x02k\x0e")
    # then
    assert error.reason == UndecodableReason.MALFORMED_AVRO


def test_confluent_wire_format_without_registry_asks_for_a_registry_url() -> None:
    # given a Confluent-framed record (magic 0, schema id 42)
    data = b"\x00" + (42).to_bytes(4, "big") + b"\x02k"
    # then
    error = undecodable(RecordType.REPLY, data)
    assert error.reason == UndecodableReason.NEEDS_SCHEMA_REGISTRY
    assert "schema id 42" in error.detail
    assert "needs a Schema Registry URL, and none is configured" in error.detail


def test_confluent_header_cut_short_is_truncated() -> None:
    assert undecodable(RecordType.REPLY, b"\x00\x00\x01").reason == UndecodableReason.TRUNCATED


class InMemoryRegistry:
    """Stands in for the Schema Registry *client* at the seam; no broker behaviour is faked."""

    def __init__(self, schemas: Mapping[int, Mapping[str, Any]]) -> None:
        self.schemas = schemas
        self.lookups = 0

    def writer_schema(self, schema_id: int) -> Mapping[str, Any]:
        self.lookups += 1
        if schema_id not in self.schemas:
            raise SchemaNotFound(f"no schema {schema_id}")
        return self.schemas[schema_id]


def test_confluent_record_is_read_through_a_configured_registry_once_per_id() -> None:
    # given a registry that knows Reply v1 as id 7, and a v1 body framed the Confluent way
    v1 = json.loads((CODEC.schemas.directory / "history" / "Reply.v1.avsc").read_text())
    registry = InMemoryRegistry({7: v1})
    codec = Codec(CODEC.schemas, registry=registry)
    body = CODEC.encode(RecordType.REPLY, {**REPLY, "sentAt": None})[10:-1]  # v1 has no sentAt
    data = b"\x00" + (7).to_bytes(4, "big") + body
    # when it is decoded twice
    first = codec.decode(RecordType.REPLY, data)
    second = codec.decode(RecordType.REPLY, data)
    # then it resolves to the current Reply, and the registry was asked once
    assert first == second == {**REPLY, "tenant": None, "replyId": None, "sentAt": None}
    assert registry.lookups == 1
    # and an id the registry does not know is undecodable, not a crash
    unknown = b"\x00" + (8).to_bytes(4, "big") + body
    assert undecodable(RecordType.REPLY, unknown, codec).detail.startswith("schema id 8 is not in")


def test_unknown_record_type_is_a_programming_error() -> None:
    with pytest.raises(SchemaNotFound, match="no record type 'Replies'"):
        CODEC.decode("Replies", b"{}")


def decodes_or_is_undecodable(record_type: RecordType, data: bytes) -> None:
    try:
        record = CODEC.decode(record_type, data)
    except UndecodableRecord as error:
        assert error.detail
        assert error.reason in set(UndecodableReason)
    else:
        # whatever decodes must be a valid record: the processor may re-encode it
        assert validate(record, CODEC.schema(record_type).parsed, raise_errors=False)


record_types = st.sampled_from(list(RecordType))


@settings(max_examples=500)
@given(record_types, st.binary(max_size=64))
def test_arbitrary_bytes_decode_or_are_undecodable(record_type: RecordType, data: bytes) -> None:
    decodes_or_is_undecodable(record_type, data)


@settings(max_examples=1000, suppress_health_check=[HealthCheck.too_slow])
@given(record_types, st.sampled_from(list(RecordType)), st.binary(max_size=64))
def test_arbitrary_body_behind_a_valid_header_decodes_or_is_undecodable(
    record_type: RecordType, header_type: RecordType, body: bytes
) -> None:
    # the header gets past the framing checks, so fastavro sees the garbage
    decodes_or_is_undecodable(record_type, CODEC.header(header_type) + body)


@settings(max_examples=300)
@given(record_types, st.data())
def test_mutated_valid_record_decodes_or_is_undecodable(
    record_type: RecordType, data: st.DataObject
) -> None:
    valid = bytearray(CODEC.encode(RecordType.REPLY, REPLY))
    position = data.draw(st.integers(10, len(valid) - 1))
    valid[position] = data.draw(st.integers(0, 255))
    decodes_or_is_undecodable(record_type, bytes(valid))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=10), children, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=300)
@given(
    record_types,
    st.dictionaries(
        st.sampled_from(["correlationKey", "channel", "responseData", "sentAt", "command", "x"]),
        json_values,
    ),
)
def test_arbitrary_json_objects_decode_or_are_undecodable(
    record_type: RecordType, value: dict[str, Any]
) -> None:
    decodes_or_is_undecodable(record_type, json.dumps(value).encode())


def test_deeply_nested_json_is_undecodable_not_a_recursion_crash() -> None:
    data = b'{"correlationKey": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert undecodable(RecordType.REPLY, data).reason in {
        UndecodableReason.INVALID_JSON,
        UndecodableReason.SCHEMA_MISMATCH,
    }
