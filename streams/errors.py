"""The root of every error xwait raises on purpose.

Callers that want "anything xwait refused" catch :class:`XwaitError`; callers
that can act on a specific failure catch the leaf. Each error lives next to
the code that raises it, but all of them hang from this one root::

    XwaitError                      streams.errors
    ├── CodecError                  streams.codec.errors   (wire formats)
    │   ├── UndecodableRecord       bytes that are neither readable Avro nor valid JSON;
    │   │                           carries .reason (machine) and .detail (human)
    │   ├── UnencodableRecord       a record that does not fit its schema (a bug of ours)
    │   ├── SchemaNotFound          a record type or schema file that does not exist
    │   ├── InvalidSchema           an .avsc file that does not parse (refused at start-up)
    │   └── RegistryUnavailable     the Schema Registry did not answer or refused our schema
    ├── DefinitionError             streams.core.errors   (a wait definition that is wrong)
    ├── ConfigError                 an XWAIT_* setting or flag xwait cannot use
    ├── TopologyError               topology/topics.yaml missing or malformed
    └── ClientError                 what the SDK refused or could not do; its tree is
        │                           drawn in streams.client.errors
        └── KafkaUnavailable        the broker did not answer: check XWAIT_BOOTSTRAP

``ClientError`` is defined here, not in ``streams.client.errors`` (which
re-exports it), so that ``KafkaUnavailable`` can be one: an SDK caller's
``except ClientError`` must catch a broker that is down, and the worker,
the CLI and the SDK raise the same ``KafkaUnavailable``.

This module deliberately imports nothing: the pure decision core
(``streams.core``) must be able to subclass ``XwaitError`` without pulling in
fastavro, Kafka clients or faust, and without an import cycle.
"""

from __future__ import annotations

__all__ = ["ClientError", "ConfigError", "KafkaUnavailable", "TopologyError", "XwaitError"]


class XwaitError(Exception):
    """Something xwait refused, with a message meant for the person who must fix it."""


class ConfigError(XwaitError):
    """A setting (XWAIT_* variable or flag) with a value xwait cannot use."""


class TopologyError(XwaitError):
    """topology/topics.yaml is missing or malformed."""


class ClientError(XwaitError):
    """Something the xwait SDK refused or could not do (see streams.client.errors)."""


class KafkaUnavailable(ClientError):
    """The broker did not answer in time: check XWAIT_BOOTSTRAP and that Kafka runs."""
