"""The codec against a real Schema Registry (scripts/registry: Apicurio's Confluent API).

What a Confluent-compatible serializer in any language writes, xwait reads by
id; what xwait writes carries the id of the schema it registered under the
usual subject (TopicNameStrategy).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from streams import codec
from streams.cli import main
from streams.codec import (
    Codec,
    ConfluentSchemaRegistry,
    RecordType,
    RegistryUnavailable,
    UndecodableReason,
    UndecodableRecord,
    default_codec,
    subject_for,
)
from streams.config import Settings
from tests.prefixes import unique_prefix

pytestmark = pytest.mark.kafka  # needs the session's real registry

REPLY: dict[str, Any] = {"correlationKey": "k-1", "tenant": None, "channel": "portal",
                         "responseData": '{"decision":"approved"}', "replyId": None,
                         "sentAt": None}


def _registry_codec(schema_registry: str) -> tuple[str, Codec]:
    """A fresh topic prefix, and a codec of settings that name it and the registry."""
    prefix = unique_prefix("r")
    return prefix, codec.for_settings(Settings(topic_prefix=prefix,
                                               schema_registry_url=schema_registry))


def test_outputs_are_written_in_the_confluent_format_under_topic_subjects(
    schema_registry: str,
) -> None:
    # given settings that name the registry
    prefix, registry_codec = _registry_codec(schema_registry)
    # when an outcome-like record is encoded
    data = registry_codec.encode(RecordType.REPLY, REPLY)
    # then it is 00 + the id registered under <prefix>.replies-value + the Avro body
    with SchemaRegistryClient({"url": schema_registry}) as client:
        latest = client.get_latest_version(f"{prefix}.replies-value")
        subjects = set(client.get_subjects())
    assert data[:5] == b"\x00" + latest.schema_id.to_bytes(4, "big")
    assert data[5:] == default_codec().encode(RecordType.REPLY, REPLY)[10:]
    assert subjects >= {subject_for(prefix, t) for t in RecordType}
    # and a codec that only knows the registry reads it by id
    with ConfluentSchemaRegistry(schema_registry) as registry:
        reader = Codec(default_codec().schemas, registry=registry)
        assert reader.decode(RecordType.REPLY, data) == REPLY


def test_a_record_a_foreign_producer_wrote_with_an_older_schema_is_read_by_id(
    schema_registry: str,
) -> None:
    # given Reply v1 (no sentAt) registered by somebody else under their subject
    v1 = (default_codec().schemas.directory / "history" / "Reply.v1.avsc").read_text()
    with SchemaRegistryClient({"url": schema_registry}) as client:
        schema_id = client.register_schema(f"{unique_prefix('f')}.replies-value",
                                           Schema(v1, "AVRO"))
    # a v1 body: the current body minus the trailing null sentAt
    body = default_codec().encode(RecordType.REPLY, REPLY)[10:-1]
    data = b"\x00" + schema_id.to_bytes(4, "big") + body
    with ConfluentSchemaRegistry(schema_registry) as registry:
        # when xwait decodes it
        reader = Codec(default_codec().schemas, registry=registry)
        # then it resolves to the current Reply
        assert reader.decode(RecordType.REPLY, data) == REPLY
        # and an id the registry never issued is undecodable input, not a crash
        unknown = b"\x00" + (2**31 - 7).to_bytes(4, "big") + body
        with pytest.raises(UndecodableRecord) as caught:
            reader.decode(RecordType.REPLY, unknown)
    assert caught.value.reason == UndecodableReason.UNKNOWN_FINGERPRINT


def test_a_registry_that_does_not_answer_fails_the_start_not_a_record(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(RegistryUnavailable, match="Expected the Schema Registry at"):
        codec.for_settings(Settings(topic_prefix=unique_prefix("r"),
                                    schema_registry_url="http://127.0.0.1:9/apis/ccompat/v7"))
    assert main(["start", "expense-approval", "--bootstrap", "127.0.0.1:1",
                 "--schema-registry", "http://127.0.0.1:9/apis/ccompat/v7"]) == 3
    assert capsys.readouterr().err.startswith("xwait: Schema Registry unreachable: ")


def test_without_a_registry_the_codec_writes_single_object_encoding_as_before() -> None:
    plain = codec.for_settings(Settings())
    assert plain is default_codec()
    assert plain.encode(RecordType.REPLY, REPLY)[:2] == b"\xc3\x01"
    assert json.loads(codec.to_json(RecordType.REPLY, REPLY))["channel"] == "portal"


def test_an_action_result_beside_the_replies_is_registered_under_its_record_name_and_read(
    schema_registry: str,
) -> None:
    prefix, registry_codec = _registry_codec(schema_registry)
    result = {"correlationKey": "k-1", "actionId": "a-1", "status": "failed",
              "error": "503", "permanent": False, "at": None}
    data = registry_codec.encode(RecordType.ACTION_RESULT, result)
    with SchemaRegistryClient({"url": schema_registry}) as client:
        latest = client.get_latest_version(f"{prefix}.replies-dev.xwait.ActionResult")
    assert data[:5] == b"\x00" + latest.schema_id.to_bytes(4, "big")
    with ConfluentSchemaRegistry(schema_registry) as registry:
        reader = Codec(default_codec().schemas, registry=registry)
        both = (RecordType.REPLY, RecordType.ACTION_RESULT)
        assert reader.decode_either(both, data) == (RecordType.ACTION_RESULT, result)
        reply = registry_codec.encode(RecordType.REPLY, REPLY)
        assert reader.decode_either(both, reply) == (RecordType.REPLY, REPLY)
