"""The processor's output records as typed, frozen values.

Attribute names are the contract's camelCase field names in snake_case
(``correlationKey`` -> ``correlation_key``); :meth:`to_record` gives the
camelCase dict back, exactly what ``streams.codec`` encodes, so a record can be
printed with ``codec.to_json`` or re-encoded unchanged. Times are epoch
milliseconds (UTC).

The contract's JSON-text fields (``Outcome.responseData``, ``Action.payload``)
are given decoded: ``outcome.response_data["decision"]``, as the value the
SDK was handed (``reply(..., {"decision": ...})``, ``start_wait(payload=...)``).
The text as it travelled is kept beside it (``response_data_text``,
``payload_text``) and is what :meth:`to_record` gives back; text that is not
JSON (an invalid reply accepted in review) stays the text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from enum import StrEnum
from typing import Any, ClassVar, TypeVar

from streams.codec import RecordType

__all__ = ["Action", "ActionKind", "Outcome", "OutcomeKind", "Receipt", "Rejected", "TraceEntry",
           "Verdict"]


class OutcomeKind(StrEnum):
    """How a wait ended. ``UNKNOWN`` is what this build reads for a symbol a newer schema added."""

    RECEIVED = "RECEIVED"
    ESCALATED = "ESCALATED"
    CANCELLED = "CANCELLED"
    UNKNOWN = "UNKNOWN"


# Alike with streams/core/effects.py's ActionKind (duplicates lists the pair),
# deliberately: the SDK's own copy of the contract's symbols, with UNKNOWN for those a
# newer schema adds.
class ActionKind(StrEnum):
    """What the outside world must do. ``UNKNOWN``: a symbol a newer schema added."""

    SEND_REQUEST = "SEND_REQUEST"
    SEND_REMINDER = "SEND_REMINDER"
    RUN_ESCALATION = "RUN_ESCALATION"
    REVIEW_NEEDED = "REVIEW_NEEDED"
    CLOSE_OUT = "CLOSE_OUT"
    POLL = "POLL"
    UNKNOWN = "UNKNOWN"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


_T = TypeVar("_T", bound="_Record")


def _decoded(text: str | None) -> Any:
    """A JSON-text field as its value; text that is not JSON stays the text."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


class _Record:
    """Field mapping shared by the output types; attribute == snake_case(wire name)."""

    __slots__ = ()
    record_type: ClassVar[RecordType]
    _json_text: ClassVar[Mapping[str, str]] = {}
    """Decoded JSON field -> the field that keeps its text as it travelled."""

    @classmethod
    def from_record(cls: type[_T], record: Mapping[str, Any]) -> _T:
        """Build from a decoded record.

        Fields a newer schema added are ignored; a field an older record lacks
        (a JSON record from a release before it) takes its default.
        """
        values: dict[str, Any] = {}
        texts = set(cls._json_text.values())
        for f in fields(cls):  # type: ignore[arg-type]
            if f.name in texts:
                continue
            name = _camel(f.name)
            if name not in record and f.default is not MISSING:
                continue
            value = record[name]
            if f.name in cls._json_text:
                values[cls._json_text[f.name]] = value
                value = _decoded(value)
            values[f.name] = cls._convert_in(f.name, value)
        return cls(**values)

    @classmethod
    def _convert_in(cls, name: str, value: Any) -> Any:
        return value

    def to_record(self) -> dict[str, Any]:
        """The camelCase record ``streams.codec.encode`` and ``to_json`` accept."""
        out: dict[str, Any] = {}
        texts = set(self._json_text.values())
        for f in fields(self):  # type: ignore[arg-type]
            if f.name in texts:
                continue
            value = getattr(self, f.name)
            if f.name in self._json_text:
                text = getattr(self, self._json_text[f.name])
                value = text if text is not None or value is None else json.dumps(value)
            if isinstance(value, tuple):
                value = [v.to_record() if isinstance(v, TraceEntry) else v for v in value]
            elif isinstance(value, StrEnum):
                value = value.value
            out[_camel(f.name)] = value
        return out


@dataclass(frozen=True, slots=True)
class TraceEntry:
    """One thing that happened to a wait: when, a short event name, human detail."""

    at: int
    event: str
    detail: str

    def to_record(self) -> dict[str, Any]:
        return {"at": self.at, "event": self.event, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class Outcome(_Record):
    """How one wait ended (``<prefix>.outcomes``); exactly one per wait."""

    record_type: ClassVar[RecordType] = RecordType.OUTCOME
    _json_text: ClassVar[Mapping[str, str]] = {"response_data": "response_data_text"}

    outcome_id: str
    correlation_key: str
    definition: str
    tenant: str | None
    outcome: OutcomeKind
    reason: str
    response_data: Any
    """The answer, decoded from its JSON text (None when the wait ended without one)."""
    response_valid: bool | None
    validation_issue: str | None
    review_outcome: str | None
    review_note: str | None
    reminders_sent: int
    escalation_level: int
    parked_at: int
    ended_at: int
    trace: tuple[TraceEntry, ...]
    operator: str | None = None
    """Who ended the wait by a command (cancel, deliver, review); None otherwise."""
    operator_reason: str | None = None
    """Their reason, in their words; ``reason`` stays a named reason."""
    response_data_text: str | None = field(default=None, repr=False)
    """``responseData`` as the JSON text it travelled as (``response_data`` decoded)."""
    send_error: str | None = None
    """The last send that failed for good, and its error (``send_failed``: why it ended)."""
    definition_version: str | None = None
    """The version of the definition the wait followed."""

    @classmethod
    def _convert_in(cls, name: str, value: Any) -> Any:
        if name == "outcome":
            return OutcomeKind(value)
        if name == "trace":
            return tuple(TraceEntry(at=t["at"], event=t["event"], detail=t["detail"])
                         for t in value)
        return value


# Alike in shape with Outcome's head (duplicates lists the pair), deliberately: the
# fields two records happen to share.
@dataclass(frozen=True, slots=True)
class Action(_Record):
    """Something the outside world must do for a wait (``<prefix>.actions``)."""

    record_type: ClassVar[RecordType] = RecordType.ACTION
    _json_text: ClassVar[Mapping[str, str]] = {"payload": "payload_text"}

    action_id: str
    correlation_key: str
    definition: str
    tenant: str | None
    action: ActionKind
    party: str | None
    level: int
    attempt: int
    payload: Any
    """The wait's payload (REVIEW_NEEDED: the reply and its issue), decoded from JSON text."""
    at: int
    payload_text: str | None = field(default=None, repr=False)
    """``payload`` as the JSON text it travelled as."""
    send_attempt: int = 1
    """1 for the first send; 2, 3, ... for retries after a failed delivery (a new id each)."""
    idempotency_key: str | None = None
    """The same for every send attempt of this action (its first attempt's id): what a
    receiver drops repeated deliveries by. None in an action written before it existed;
    :attr:`send_key` stands in then."""

    @property
    def send_key(self) -> str:
        """The key a receiver drops repeated deliveries by: ``idempotency_key``, or for an
        action written before it existed, ``action_id`` (exact for a first send attempt)."""
        return self.idempotency_key or self.action_id

    @property
    def reply_key(self) -> str:
        """The correlation key the party's reply must carry: ``WAITKEY~PARTY`` for a party."""
        return self.correlation_key if self.party is None else (
            f"{self.correlation_key}~{self.party}")

    @classmethod
    def _convert_in(cls, name: str, value: Any) -> Any:
        return ActionKind(value) if name == "action" else value


@dataclass(frozen=True, slots=True)
class Rejected(_Record):
    """Input the processor did not act on, with its reason (``<prefix>.rejected``)."""

    record_type: ClassVar[RecordType] = RecordType.REJECTED

    topic: str
    partition: int
    offset: int
    key: bytes | None
    reason: str
    detail: str
    original: bytes | None
    rejected_at: int


class Verdict(StrEnum):
    """What became of a reply or command (``Receipt.verdict``; the schema's doc says each).

    ``UNKNOWN`` is what this build reads for a verdict a newer worker added.
    """

    WON = "won"
    RECORDED = "recorded"
    HELD = "held"
    IN_REVIEW = "in_review"
    ESCALATED = "escalated"
    LATE = "late"
    DUPLICATE = "duplicate"
    TENANT_MISMATCH = "tenant_mismatch"
    REJECTED = "rejected"
    APPLIED = "applied"
    UNCHANGED = "unchanged"
    REFUSED = "refused"
    UNKNOWN = "UNKNOWN"


@dataclass(frozen=True, slots=True)
class Receipt(_Record):
    """What became of one reply or command, decided by the worker that decided it
    (``<prefix>.receipts``): what ``reply(..., wait=True)`` and the commands return."""

    record_type: ClassVar[RecordType] = RecordType.RECEIPT

    # Fields alike with the worker's Receipt (core/receipts.py, core/events.py), bulk.py's
    # BulkCommand and console/waits.py's Filters (duplicates lists the pairs), deliberately:
    # the SDK reads the contract's record; the others are other records' fields.
    receipt_id: str
    verdict: Verdict
    decided_at: int
    """Its broker append time: the time it raced the wait's timers at."""
    topic: str
    partition: int
    offset: int
    key: str | None = None
    correlation_key: str | None = None
    record: str | None = None
    """``Reply``, ``Command``, ...; None when the worker could not read it."""
    command: str | None = None
    reason: str | None = None
    """The Rejected record's reason (late, duplicate, tenant_mismatch, rejected, refused),
    or why nothing changed (unchanged)."""
    detail: str | None = None
    held_until: int | None = None
    """``held`` before its request: when it is given up without one (None: while its
    wait is suspended, until it resumes)."""
    outcome: str | None = None
    outcome_reason: str | None = None
    outcome_id: str | None = None
    party: str | None = None
    ended_at: int | None = None
    validation_issue: str | None = None
    action_id: str | None = None

    @property
    def accepted(self) -> bool:
        """Whether it did what it was sent for: a reply won, a command applied."""
        return self.verdict in (Verdict.WON, Verdict.APPLIED)

    @classmethod
    def _convert_in(cls, name: str, value: Any) -> Any:
        if name == "verdict":
            try:
                return Verdict(value)
            except ValueError:  # a verdict a newer worker added
                return Verdict.UNKNOWN
        return value
