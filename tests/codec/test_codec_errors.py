"""One root exception, a light import graph, and readable encode errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

import streams.codec
from streams.codec import (
    CodecError,
    InvalidSchema,
    RecordType,
    SchemaNotFound,
    UndecodableRecord,
    UnencodableRecord,
    encode,
)
from streams.errors import XwaitError


def modules_after_import(module: str) -> set[str]:
    code = f"import sys, {module}; print('\\n'.join(sys.modules))"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    return set(result.stdout.split())


def test_codec_errors_hang_from_the_project_root() -> None:
    for leaf in (UndecodableRecord, UnencodableRecord, SchemaNotFound, InvalidSchema):
        assert issubclass(leaf, CodecError)
    assert issubclass(CodecError, XwaitError)


def test_root_error_module_imports_nothing_heavy() -> None:
    # the pure core subclasses XwaitError; it must not drag fastavro or Kafka in
    loaded = modules_after_import("streams.errors")
    assert not {m for m in loaded if m.split(".")[0] in {"fastavro", "faust", "aiokafka"}}
    assert "streams.codec" not in loaded


def test_codec_imports_no_stream_processor_or_kafka_client() -> None:
    loaded = modules_after_import("streams.codec")
    roots = {m.split(".")[0] for m in loaded}
    assert not roots & {"faust", "aiokafka", "confluent_kafka", "mode"}


def test_partitioning_imports_no_kafka_client() -> None:
    roots = {m.split(".")[0] for m in modules_after_import("streams.partitioning")}
    assert not roots & {"faust", "aiokafka", "confluent_kafka", "kafka", "fastavro"}


def test_public_names_are_exactly_the_documented_ones() -> None:
    # isidentifier: pytest's assertion rewriting adds '@py_builtins' to the modules of
    # a distribution that registers a plugin (ours: streams.testing.pytest_plugin).
    public = {name for name in vars(streams.codec)
              if not name.startswith("_") and name.isidentifier()}
    submodules = {"avro_writer", "codec", "errors", "jsonform", "registry", "schemas",
                  "annotations"}
    imported_helpers = {"Any", "Mapping", "TYPE_CHECKING", "threading"}
    assert public - submodules - imported_helpers == set(streams.codec.__all__)


def test_undecodable_record_carries_reason_and_detail_in_its_message() -> None:
    error = UndecodableRecord("Reply", streams.codec.UndecodableReason.EMPTY, "nothing there")
    assert str(error) == "cannot decode Reply (empty): nothing there"
    assert (error.record_type, error.reason, error.detail) == ("Reply", "empty", "nothing there")


def test_encoding_a_wrong_type_names_the_field() -> None:
    with pytest.raises(UnencodableRecord) as caught:
        encode(
            RecordType.TIMER,
            {
                "correlationKey": "k",
                "kind": "deadline",
                "dueAt": "soon",
                "generation": 1,
                "firedAt": 2,
            },
        )
    assert caught.value.detail == "field dueAt: expected \"long\", got str 'soon'"


def test_encoding_a_field_the_schema_lacks_is_refused_not_dropped() -> None:
    with pytest.raises(UnencodableRecord, match="sentat: not a field of Reply"):
        encode(
            RecordType.REPLY,
            {"correlationKey": "k", "channel": "c", "responseData": "", "sentat": 1},
        )


def test_encoding_without_a_required_field_names_it() -> None:
    with pytest.raises(UnencodableRecord, match='field responseData: expected "string"'):
        encode(RecordType.REPLY, {"correlationKey": "k", "channel": "c"})


def test_encoding_fills_defaults_for_missing_optional_fields() -> None:
    data = encode(RecordType.REPLY, {"correlationKey": "k", "channel": "c", "responseData": ""})
    assert streams.codec.decode(RecordType.REPLY, data)["replyId"] is None
