"""The seam where a Confluent Schema Registry client plugs in. No HTTP here.

The Confluent wire format is ``0x00`` + a 4-byte big-endian schema id + the
Avro body; the id means nothing without the registry that issued it. When a
deployment configures a Schema Registry URL, it passes an implementation of
:class:`SchemaRegistry` to :class:`streams.codec.Codec` (for instance a thin
wrapper over ``confluent_kafka.schema_registry.SchemaRegistryClient``, with a
cache: ids are immutable, so each one is fetched once). Without one, such a
record is undecodable with reason ``needs_schema_registry``.

# SEAM(schema-registry): reading is wired through this protocol; writing the
# Confluent format (registering our schemas under a subject and prefixing the
# id) is not implemented yet, because outputs are single-object Avro.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

__all__ = ["SchemaRegistry"]


@runtime_checkable
class SchemaRegistry(Protocol):
    """Looks up the writer schema of a Confluent-framed record."""

    def writer_schema(self, schema_id: int) -> Mapping[str, Any]:
        """The Avro schema (as parsed JSON) registered under ``schema_id``.

        Raise :class:`streams.codec.SchemaNotFound` for an id the registry
        does not have: the record then becomes undecodable (rejected, not
        retried). Let transport errors propagate: the registry being down is
        not the record's fault, so the record must be retried, not rejected.
        """
        ...
