"""A Confluent-compatible Schema Registry behind :class:`streams.codec.Codec`.

The Confluent wire format is ``0x00`` + a 4-byte big-endian schema id + the
Avro body; the id means nothing without the registry that issued it.

:class:`SchemaRegistry` is the protocol the codec needs: register a schema
under a subject (for writing) and look a writer schema up by id (for
reading). :class:`ConfluentSchemaRegistry` implements it with
``confluent_kafka.schema_registry.SchemaRegistryClient``, which speaks the
Confluent REST API that Confluent's registry serves and that Apicurio
Registry serves at ``/apis/ccompat/v7`` (the URL to configure is that one).

Subjects follow the Confluent serializers' default, TopicNameStrategy:
``<topic>-value``, so a Java or Go consumer with an off-the-shelf Avro
deserializer reads xwait's topics, and their producers' records are read
here by id. Each xwait record type lives on exactly one topic
(:data:`TOPIC_ROLE`), so the record type alone names its subject.  The one
topic with a second record type, ``replies`` (``ActionResult`` beside
``Reply``), names that one's subject with TopicRecordNameStrategy
(``<topic>-<record full name>``), as Confluent's serializers do for topics
holding several types: registering it under ``<topic>-value`` would fail the
subject's compatibility check against ``Reply``.

The Kafka client library is imported only when a registry is configured:
without one the codec needs fastavro and nothing else.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from streams.codec.errors import RegistryUnavailable, SchemaNotFound
from streams.codec.schemas import RecordType

__all__ = ["TOPIC_ROLE", "ConfluentSchemaRegistry", "SchemaLookup", "SchemaRegistry",
           "subject_for"]

TOPIC_ROLE: Mapping[RecordType, str] = {
    RecordType.START_WAIT: "requests",
    RecordType.REPLY: "replies",
    RecordType.COMMAND: "commands",
    RecordType.TIMER: "timers",
    RecordType.ACTION: "actions",
    RecordType.OUTCOME: "outcomes",
    RecordType.REJECTED: "rejected",
    RecordType.ACTION_RESULT: "replies",
    RecordType.RECEIPT: "receipts",
}
"""The topic role (``<prefix>.<role>``) each record type is written to."""

SECOND_TYPES: frozenset[RecordType] = frozenset({RecordType.ACTION_RESULT})
"""Record types that share their topic with its main type (TopicRecordNameStrategy)."""

REGISTRY_TIMEOUT_S = 5
"""Per HTTP request. The same budget as a Kafka metadata request: a healthy
registry answers in milliseconds, and a CLI must not hang on a dead one."""


def subject_for(topic_prefix: str, record_type: RecordType) -> str:
    """TopicNameStrategy: ``<prefix>.<role>-value``; a second type on a topic:
    ``<prefix>.<role>-<full name>`` (TopicRecordNameStrategy)."""
    topic = f"{topic_prefix}.{TOPIC_ROLE[record_type]}"
    if record_type in SECOND_TYPES:
        return f"{topic}-{record_type.full_name}"
    return f"{topic}-value"


@runtime_checkable
class SchemaLookup(Protocol):
    """What reading Confluent-framed records needs: the writer schema of an id."""

    def writer_schema(self, schema_id: int) -> Mapping[str, Any]:
        """The Avro schema (as parsed JSON) registered under ``schema_id``.

        Raise :class:`streams.codec.SchemaNotFound` for an id the registry
        does not have: the record then becomes undecodable (rejected, not
        retried). Raise :class:`streams.codec.RegistryUnavailable` when the
        registry is down: that is not the record's fault, so the record must
        be retried, not rejected.
        """
        ...


@runtime_checkable
class SchemaRegistry(SchemaLookup, Protocol):
    """What writing the Confluent wire format needs too: an id for each of our schemas."""

    def register(self, subject: str, schema: Mapping[str, Any]) -> int:
        """Register ``schema`` (idempotent) under ``subject`` and return its id.

        Raise :class:`streams.codec.RegistryUnavailable` when the registry
        cannot be reached or refuses the schema.
        """
        ...


class ConfluentSchemaRegistry:
    """:class:`SchemaRegistry` over confluent-kafka's client (which caches ids both ways)."""

    def __init__(self, url: str, client: Any = None) -> None:
        self.url = url
        if client is None:
            from confluent_kafka.schema_registry import SchemaRegistryClient

            client = SchemaRegistryClient({"url": url, "timeout": REGISTRY_TIMEOUT_S})
        self._client = client

    def close(self) -> None:
        """Release the HTTP connections (a process-wide codec keeps its registry open)."""
        self._client.close()

    def __enter__(self) -> ConfluentSchemaRegistry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def register(self, subject: str, schema: Mapping[str, Any]) -> int:
        from confluent_kafka.schema_registry import Schema

        try:
            schema_id: int = self._client.register_schema(
                subject, Schema(json.dumps(schema), "AVRO"))
        except Exception as exc:  # noqa: BLE001 - httpx and registry errors alike
            raise RegistryUnavailable(
                f"Expected the Schema Registry at {self.url} to register {subject}, "
                f"but {_explain(exc)}") from exc
        return schema_id

    def writer_schema(self, schema_id: int) -> Mapping[str, Any]:
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        try:
            found = self._client.get_schema(schema_id)
        except SchemaRegistryError as exc:
            if exc.http_status_code == 404:
                raise SchemaNotFound(f"the registry at {self.url} has no schema id "
                                     f"{schema_id}") from exc
            raise RegistryUnavailable(
                f"Expected the Schema Registry at {self.url} to return schema id {schema_id}, "
                f"but {_explain(exc)}") from exc
        except Exception as exc:  # noqa: BLE001 - transport errors (httpx) are not one family
            raise RegistryUnavailable(
                f"Expected the Schema Registry at {self.url} to return schema id {schema_id}, "
                f"but {_explain(exc)}") from exc
        if (found.schema_type or "AVRO") != "AVRO":
            raise SchemaNotFound(f"schema id {schema_id} is a {found.schema_type} schema, "
                                 "not Avro")
        try:
            raw = json.loads(found.schema_str)
        except ValueError as exc:
            raise SchemaNotFound(f"schema id {schema_id} is not JSON: {exc}") from exc
        if isinstance(raw, str):  # a primitive schema, "string" say: not one of ours
            raw = {"type": raw}
        if not isinstance(raw, dict):
            raise SchemaNotFound(f"schema id {schema_id} is not an Avro record schema")
        return raw


def _explain(exc: Exception) -> str:
    status = getattr(exc, "http_status_code", None)
    message = getattr(exc, "error_message", None) or str(exc) or type(exc).__name__
    return f"it answered HTTP {status}: {message}" if status else f"it is unreachable ({message})"
