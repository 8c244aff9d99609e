"""Errors of the wire-format layer; the tree is drawn in :mod:`streams.errors`.

Every foreign exception fastavro or the json module raises while reading a
record is wrapped into :class:`UndecodableRecord` at the boundary, so the
processor needs exactly one ``except`` to turn bad input into a ``Rejected``
record (reason ``undecodable``, detail from the exception) and keep going.
"""

from __future__ import annotations

from enum import StrEnum

from streams.errors import XwaitError

__all__ = [
    "CodecError",
    "InvalidSchema",
    "RegistryUnavailable",
    "SchemaNotFound",
    "UndecodableReason",
    "UndecodableRecord",
    "UnencodableRecord",
]


class UndecodableReason(StrEnum):
    """Why bytes could not be read, as a short stable code for metrics and filters.

    The human explanation goes in :attr:`UndecodableRecord.detail`; these codes
    are few so a dashboard can count them.
    """

    EMPTY = "empty"
    """The value had no bytes at all (a tombstone, or a producer bug)."""
    UNKNOWN_FORMAT = "unknown_format"
    """Neither the Avro single-object marker, the Confluent magic byte nor a JSON object."""
    TRUNCATED = "truncated"
    """Starts like single-object Avro or Confluent but is too short for the header."""
    UNKNOWN_FINGERPRINT = "unknown_fingerprint"
    """Written with a schema this build does not know (newer, or another project's)."""
    WRONG_RECORD_TYPE = "wrong_record_type"
    """A valid record of another type (a Command on the replies topic, say)."""
    MALFORMED_AVRO = "malformed_avro"
    """The Avro body does not match its writer schema (cut short, corrupt, trailing bytes)."""
    NEEDS_SCHEMA_REGISTRY = "needs_schema_registry"
    """Confluent wire format, but no Schema Registry is configured to resolve the id."""
    NOT_UTF8 = "not_utf8"
    """Looks like JSON but is not valid UTF-8."""
    INVALID_JSON = "invalid_json"
    """Not parseable as JSON, or not a JSON object."""
    SCHEMA_MISMATCH = "schema_mismatch"
    """Valid JSON whose fields do not fit the schema (missing, unknown or mistyped)."""
    JSON_NOT_ACCEPTED = "json_not_accepted"
    """JSON for a record type that is only ever written by xwait itself, so only Avro is valid."""


class CodecError(XwaitError):
    """A record could not be turned into bytes or back."""


class UndecodableRecord(CodecError):
    """Bytes that are neither readable Avro nor valid JSON of the expected record.

    This is bad *input*, not a crash: the caller publishes the original bytes
    to the rejected topic with :attr:`detail` and carries on.
    """

    def __init__(self, record_type: str, reason: UndecodableReason, detail: str) -> None:
        self.record_type = record_type
        self.reason = reason
        self.detail = detail
        super().__init__(f"cannot decode {record_type} ({reason}): {detail}")


class UnencodableRecord(CodecError):
    """A record that does not fit its schema.

    xwait only encodes records it built itself, so this is a bug of ours; it
    names the field so the fix is obvious.
    """

    def __init__(self, record_type: str, detail: str) -> None:
        self.record_type = record_type
        self.detail = detail
        super().__init__(f"cannot encode {record_type}: {detail}")


class SchemaNotFound(CodecError):
    """A record type, schema folder or schema file that does not exist."""


class InvalidSchema(CodecError):
    """An .avsc file that does not parse; the service refuses to start with it.

    The message names the file so the operator knows which one to fix.
    """


class RegistryUnavailable(CodecError):
    """The configured Schema Registry did not answer, or refused to register our schema.

    Not the record's fault: a record that needs the registry is retried (the
    worker stops rather than reject it), and a CLI command or the SDK fails
    before producing anything. Check XWAIT_SCHEMA_REGISTRY_URL.
    """
