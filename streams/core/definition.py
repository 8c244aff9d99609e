"""Wait definitions as typed, frozen values.

They are loaded from ``topology/waits/*.yaml`` by ``streams.definitions`` and
handed to ``decide()``. Every variant is expressed as a list of *stages*: the
non-chained variants have exactly one, so decide() walks stages the same way
for all five and chaining costs nothing extra.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "DEFAULT_EARLY_REPLY_TTL_MS",
    "DEFAULT_RETENTION_MS",
    "EscalationLevel",
    "InvalidReplyRoute",
    "definition_for",
    "DefinitionSet",
    "ReminderPolicy",
    "SendFailurePolicy",
    "SendFailureRoute",
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


# The enums and records here are alike in shape with events.py's and receipts.py's
# (duplicates lists the pairs), deliberately: plain values, one per thing.
class InvalidReplyRoute(StrEnum):
    """Where a reply that fails validation goes (rule 4)."""

    REVIEW = "review"
    ESCALATE = "escalate"


class SendFailureRoute(StrEnum):
    """Where a send that failed for good takes the wait (rule 12)."""

    ESCALATE = "escalate"
    """As if the deadline had passed: the next escalation level now, or the
    end (``ESCALATED``, ``send_failed``) when none is left."""
    REVIEW = "review"
    """A person is asked (``REVIEW_NEEDED`` naming the failed send); the wait
    goes on waiting, its deadline still running."""


@dataclass(frozen=True, slots=True)
class SendFailurePolicy:
    """``on_send_failure``: send again ``retries`` times, ``backoff_ms`` apart, then ``then``."""

    retries: int
    backoff_ms: int
    then: SendFailureRoute


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
    on_send_failure: SendFailurePolicy | None = None
    version: str = ""
    """The explicit ``version:`` of the file, or a hash of its normalised
    content; a wait keeps the version it parked on (rule 13).  Empty for
    definitions built by hand: their waits follow whatever has the name."""


class DefinitionSet(Mapping[str, WaitDefinition]):
    """The newest definition of each name (the mapping), and every version still kept.

    New waits take the newest (``set[name]``); a wait parked on an older
    version goes on with that one (``version(name, v)``).  Versions are
    added while a worker runs (a wait may hold any of them) and dropped only
    when `xwait definitions remove` tombstones one, which it refuses while a
    wait not yet done follows it (``forget``): the running worker then knows
    what a restarted one would.

    A version is one content (a hash of what it means, or an explicit
    ``version:`` the store refuses to see reused), so two objects of one
    (name, version) are the same definition: the one read back from the
    store and the one loaded from a file are equal as versions, not as
    objects.  Compare versions (``is_newest``), never identities.
    """

    def __init__(self, newest: Mapping[str, WaitDefinition],
                 kept: Iterable[WaitDefinition] = (),
                 on_missing: Callable[[str, str], WaitDefinition | None] | None = None) -> None:
        self._newest = dict(newest)
        self._versions: dict[tuple[str, str], WaitDefinition] = {}
        self.on_missing = on_missing
        """Asked for a version not kept (the processor looks in its store once more:
        another worker may have published it a moment ago); None answers "not loaded"."""
        for d in (*kept, *self._newest.values()):
            self.add(d)

    def __getitem__(self, name: str) -> WaitDefinition:
        return self._newest[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._newest)

    def __len__(self) -> int:
        return len(self._newest)

    def add(self, d: WaitDefinition) -> None:
        """Keep another version (the first one kept under a (name, version) stays)."""
        self._versions.setdefault((d.name, d.version), d)

    def forget(self, name: str, version: str) -> None:
        """Drop a removed version; the newest of a name (a worker's own file) stays."""
        newest = self._newest.get(name)
        if newest is None or newest.version != version:
            self._versions.pop((name, version), None)

    def is_newest(self, d: WaitDefinition) -> bool:
        """Whether ``d`` is the version new waits of its name park on."""
        newest = self._newest.get(d.name)
        return newest is not None and newest.version == d.version

    def version(self, name: str, version: str) -> WaitDefinition | None:
        found = self._versions.get((name, version))
        if found is None and self.on_missing is not None:
            found = self.on_missing(name, version)
            if found is not None:
                self.add(found)
        return found

    def kept(self) -> list[WaitDefinition]:
        """Every version kept, by name, then the newest first."""
        return sorted(self._versions.values(),
                      key=lambda d: (d.name, not self.is_newest(d), d.version))


def definition_for(definitions: Mapping[str, WaitDefinition], name: str,
                   version: str | None) -> WaitDefinition | None:
    """The definition a wait follows: its own version, or the newest when it has none."""
    newest = definitions.get(name)
    if version is None or (newest is not None and newest.version == version):
        return newest
    if isinstance(definitions, DefinitionSet):
        return definitions.version(name, version)
    return None
