"""The generated Avro encoders write fastavro's bytes, or hand the record back to fastavro.

A generated encoder that wrote different bytes would change what every
consumer reads; one that accepted a record fastavro rejects would hide a bug.
So: for every schema in ``schemas/`` and a synthetic one using every type the
generator knows, any record (valid, with defaulted fields left out, or wrong)
either encodes to exactly fastavro's bytes or raises ``Fallback``; and a
valid record never falls back, or the fast path would silently not be used.
"""

from __future__ import annotations

from io import BytesIO
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_writer
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.codec import RecordType, UnencodableRecord, default_codec
from streams.codec.avro_writer import Fallback, compile_writer
from tests.codec.test_codec_roundtrip import strategy_for

CODEC = default_codec()

EVERY_KIND: dict[str, Any] = {
    "type": "record", "name": "Every", "namespace": "test.kinds",
    "fields": [
        {"name": "i", "type": "int"},
        {"name": "l", "type": "long", "default": -7},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double", "default": 1.5},
        {"name": "b", "type": "boolean", "default": True},
        {"name": "s", "type": "string", "default": "x"},
        {"name": "y", "type": "bytes"},
        {"name": "e", "type": {"type": "enum", "name": "Colour", "symbols": ["RED", "GREEN"],
                               "default": "RED"}, "default": "GREEN"},
        {"name": "e2", "type": "Colour"},
        {"name": "m", "type": {"type": "map", "values": "long"}, "default": {}},
        {"name": "a", "type": {"type": "array", "items": {
            "type": "record", "name": "Item", "fields": [
                {"name": "n", "type": ["null", "string"], "default": None},
                {"name": "c", "type": "test.kinds.Colour"}]}}, "default": []},
        {"name": "u", "type": ["null", "long", "string", "Item"], "default": None},
        {"name": "ub", "type": ["null", "bytes", "boolean", "double"], "default": None},
    ],
}


def fastavro_bytes(parsed: Any, record: Any) -> bytes:
    buffer = BytesIO()
    schemaless_writer(buffer, parsed, record, strict_allow_default=True)
    return buffer.getvalue()


def valid_for(schema: Any, named: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Valid values, records sometimes without their defaulted fields."""
    if isinstance(schema, str) and schema not in strategy_simple:
        return valid_for(named[schema.rsplit(".", 1)[-1]], named)
    if isinstance(schema, list):
        return st.one_of(*[valid_for(branch, named) for branch in schema])
    kind = schema if isinstance(schema, str) else schema["type"]
    if kind in strategy_simple:
        return strategy_simple[kind]
    if kind in ("record", "enum"):
        named[schema["name"]] = schema
    if kind == "enum":
        return st.sampled_from(schema["symbols"])
    if kind == "array":
        return st.lists(valid_for(schema["items"], named), max_size=3)
    if kind == "map":
        return st.dictionaries(st.text(max_size=5), valid_for(schema["values"], named),
                               max_size=3)
    assert kind == "record"
    fields = {f["name"]: valid_for(f["type"], named) for f in schema["fields"]}
    optional = [f["name"] for f in schema["fields"] if "default" in f]
    return st.tuples(st.fixed_dictionaries(fields), st.sets(st.sampled_from(optional))
                     if optional else st.just(set())).map(
        lambda pair: {k: v for k, v in pair[0].items() if k not in pair[1]})


strategy_simple: dict[str, st.SearchStrategy[Any]] = {
    "null": st.none(),
    "boolean": st.booleans(),
    "int": st.integers(-(2**31), 2**31 - 1),
    "long": st.integers(-(2**63), 2**63 - 1),
    "float": st.floats(width=32, allow_nan=False),
    "double": st.floats(allow_nan=False),
    "string": st.text(max_size=80),
    "bytes": st.binary(max_size=80),
}

SCHEMAS: dict[str, Any] = {
    loaded.record_type.value: dict(loaded.raw) for loaded in CODEC.schemas.current.values()}
SCHEMAS["Every"] = EVERY_KIND


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_every_schema_gets_an_encoder(name: str) -> None:
    assert compile_writer(SCHEMAS[name]) is not None


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_valid_records_encode_to_fastavros_bytes(name: str, data: st.DataObject) -> None:
    schema = SCHEMAS[name]
    record = data.draw(valid_for(schema, {}))
    writer = compile_writer(schema)
    assert writer is not None
    assert writer(record) == fastavro_bytes(parse_schema(schema, named_schemas={}), record)


# Values of the wrong kind, at any field: the encoder must not make up bytes for them.
ODD = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(),
                st.text(max_size=3), st.binary(max_size=3), st.just([]), st.just({}),
                st.just(("a",)), st.just("\ud800"))


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_odd_records_fall_back_or_match(name: str, data: st.DataObject) -> None:
    schema = SCHEMAS[name]
    record = dict(data.draw(valid_for(schema, {})))
    field = data.draw(st.sampled_from([f["name"] for f in schema["fields"]] + ["unknown"]))
    record[field] = data.draw(ODD)
    writer = compile_writer(schema)
    assert writer is not None
    try:
        ours = writer(record)
    except Fallback:
        return
    assert ours == fastavro_bytes(parse_schema(schema, named_schemas={}), record)


@pytest.mark.parametrize("schema", [
    {"type": "record", "name": "T", "fields": [
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}}]},
    {"type": "record", "name": "U", "fields": [{"name": "n", "type": ["int", "long"]}]},
    {"type": "record", "name": "V", "fields": [
        {"name": "h", "type": {"type": "fixed", "name": "H", "size": 2}}]},
], ids=["logical type", "int or long", "fixed"])
def test_schemas_it_cannot_prove_stay_on_fastavro(schema: dict[str, Any]) -> None:
    assert compile_writer(schema) is None


@given(record=strategy_for(CODEC.schema(RecordType.OUTCOME).parsed))
@settings(max_examples=50, deadline=None)
def test_codec_writes_the_same_bytes_either_way(record: dict[str, Any]) -> None:
    loaded = CODEC.schema(RecordType.OUTCOME)
    expected = SINGLE_OBJECT_HEADER + loaded.fingerprint + fastavro_bytes(loaded.parsed, record)
    assert CODEC.encode(RecordType.OUTCOME, record) == expected


SINGLE_OBJECT_HEADER = b"\xc3\x01"


def test_a_wrong_record_is_still_named_by_the_codec() -> None:
    record = {"outcomeId": "o", "correlationKey": "k", "definition": "d", "outcome": "RECEIVED",
              "reason": "reply_valid", "remindersSent": "two", "escalationLevel": 0,
              "parkedAt": 1, "endedAt": 2}
    with pytest.raises(UnencodableRecord, match="remindersSent"):
        CODEC.encode(RecordType.OUTCOME, record)
