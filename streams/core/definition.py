"""Wait definitions as typed, frozen values.

They are loaded from ``topology/waits/*.yaml`` by ``streams.definitions`` and
handed to ``decide()``. Every variant is expressed as a list of *stages*: the
non-chained variants have exactly one, so decide() walks stages the same way
for all five and chaining costs nothing extra.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "DEFAULT_EARLY_REPLY_TTL_MS",
    "DEFAULT_RETENTION_MS",
    "EscalationLevel",
    "InvalidReplyRoute",
    "ReminderPolicy",
    "Stage",
    "Variant",
    "WaitDefinition",
]

DEFAULT_EARLY_REPLY_TTL_MS = 10 * 60 * 1000
"""PT10M: replies and requests travel on different topics and normally meet
within seconds; ten minutes covers a lagging consumer. Too short turns slow
requests into ``unmatched`` replies; too long keeps stray keys in state."""

DEFAULT_RETENTION_MS = 7 * 24 * 60 * 60 * 1000
"""P7D: long enough to recognise late replies and re-sent requests for a week;
every finished wait costs one small row for this long."""


class Variant(StrEnum):
    SINGLE_CHANNEL = "single-channel"
    MULTI_CHANNEL = "multi-channel"
    FIRST_VALID = "first-valid"
    PROBE = "probe"
    CHAINED = "chained"


class InvalidReplyRoute(StrEnum):
    """Where a reply that fails validation goes (rule 4)."""

    REVIEW = "review"
    ESCALATE = "escalate"


@dataclass(frozen=True, slots=True)
class ReminderPolicy:
    """Nudge every ``interval_ms``, at most ``limit`` times per stage."""

    interval_ms: int
    limit: int


@dataclass(frozen=True, slots=True)
class EscalationLevel:
    """Who is contacted when the previous deadline passes, and how long they get."""

    target: str
    deadline_ms: int


@dataclass(frozen=True, slots=True)
class Stage:
    """One waiting phase: its own party, deadline, reminders and escalation."""

    name: str
    deadline_ms: int
    party: str | None = None
    reminder: ReminderPolicy | None = None
    escalation: tuple[EscalationLevel, ...] = ()


@dataclass(frozen=True, slots=True)
class WaitDefinition:
    """A named kind of wait.

    ``response_schema`` is the JSON Schema of ``responseData`` as canonical JSON
    text (hashable, so the compiled validator can be cached on it). An empty
    ``channels`` accepts any channel; ``parties`` is the default list for the
    first-valid variant when a request names none.
    """

    name: str
    variant: Variant
    stages: tuple[Stage, ...]
    channels: tuple[str, ...] = ()
    parties: tuple[str, ...] = ()
    response_schema: str | None = None
    invalid_reply: InvalidReplyRoute = InvalidReplyRoute.REVIEW
    early_reply_ttl_ms: int = DEFAULT_EARLY_REPLY_TTL_MS
    retention_ms: int = DEFAULT_RETENTION_MS
    poll_interval_ms: int | None = None
    source: str = ""
