"""The filter of a bulk operation, ``--where FILTER``: its one syntax, parsed here.

    definition=expense-approval,state=parked,parkedBefore=-P30D

A filter is conditions ``field=value`` separated by commas, all of which a
wait must meet:

    definition     the wait's definition (its name)
    version        the version of its definition it follows
    state          parked, in_review, suspended, done or all (default: every state but done)
    tenant         its tenant
    key            its key starts with this
    parkedAfter    parked at or after the instant
    parkedBefore   parked before the instant
    dueAfter       its next timer is due at or after the instant
    dueBefore      its next timer is due before the instant

``…After`` and ``…Before`` bound a half-open range, so two filters of whole
days meet without overlap.  A wait with no timer armed (a suspended one) has
no next due time and never meets a ``due`` condition.  An instant is an ISO
8601 date and time (``2026-11-30T16:00:00Z``; without an offset, this
machine's local time; a date alone is its midnight), epoch milliseconds, or
an ISO 8601 duration from now, signed (``-P30D``: thirty days ago, ``PT2H``:
in two hours; days, hours, minutes, seconds and weeks, not months).
Durations are turned into instants once, when the filter is read: a run of an
operation selects by the instants its own start gives.

The worker's list API evaluates the filter where the state is
(:meth:`Where.query`); :meth:`Where.matches` checks it again on one wait's
status just before that wait is commanded, because a wait may have changed
since it was listed.  Every mistake raises :class:`InvalidRequest`, whose
message names the field or the value (exit 2 for the CLI).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any

from streams.client.errors import InvalidRequest
from streams.core.durations import parse_signed_duration_ms
from streams.core.keys import key_problem

__all__ = ["STATES", "Where"]

STATES = ("parked", "in_review", "suspended", "done", "all")
"""What ``state=`` takes; without one, every state but done."""

_TIMES = {"parkedAfter": "parked_after", "parkedBefore": "parked_before",
          "dueAfter": "due_after", "dueBefore": "due_before"}
_TEXTS = {"definition": "definition", "version": "version", "state": "state",
          "tenant": "tenant", "key": "key_prefix"}
FIELDS = (*_TEXTS, *_TIMES)
"""The fields a filter names, as it names them."""


@dataclass(frozen=True)
class Where:
    """A parsed filter; None is "any".  Times are epoch milliseconds."""

    definition: str | None = None
    version: str | None = None
    state: str | None = None
    tenant: str | None = None
    key_prefix: str | None = None
    parked_after: int | None = None
    parked_before: int | None = None
    due_after: int | None = None
    due_before: int | None = None
    text: str = ""
    """The filter as given, for messages and the summary."""

    @classmethod
    def parse(cls, text: str, now_ms: Callable[[], int] | None = None) -> Where:
        """Read ``text``; InvalidRequest naming what is wrong with it."""
        now = (now_ms or (lambda: int(time.time() * 1000)))()
        found: dict[str, Any] = {}
        conditions = [part.strip() for part in text.split(",")]
        if not any(conditions):
            raise InvalidRequest(
                "--where needs at least one condition, such as "
                "definition=expense-approval,state=parked (fields: " + ", ".join(FIELDS) + ")")
        for part in conditions:
            name, sep, value = part.partition("=")
            name, value = name.strip(), value.strip()
            if not sep or not name:
                raise InvalidRequest(f"--where: expected field=value, but got {part!r} "
                                     "(conditions are separated by commas)")
            if name not in FIELDS:
                raise InvalidRequest(f"--where: unknown field {name!r}; the fields are "
                                     + ", ".join(FIELDS))
            attr = _TEXTS.get(name) or _TIMES[name]
            if attr in found:
                raise InvalidRequest(f"--where: {name} is given twice")
            if not value:
                raise InvalidRequest(f"--where: {name} has no value")
            found[attr] = _instant(name, value, now) if name in _TIMES else value
        state = found.get("state")
        if state is not None and state not in STATES:
            raise InvalidRequest(f"--where: state must be one of {', '.join(STATES)}, "
                                 f"got {state!r}")
        key = found.get("key_prefix")
        if key is not None:
            problem = key_problem(key.encode("utf-8", "surrogatepass"))
            if problem is not None:
                raise InvalidRequest(f"--where: key: {problem}")
        where = cls(**found, text=",".join(p for p in conditions if p))
        for low, high in (("parked_after", "parked_before"), ("due_after", "due_before")):
            a, b = getattr(where, low), getattr(where, high)
            if a is not None and b is not None and a >= b:
                raise InvalidRequest(f"--where: nothing is {_name(low)} {_iso(a)} and "
                                     f"{_name(high)} {_iso(b)}")
        return where

    def query(self) -> dict[str, str]:
        """The worker list API's parameters for this filter (streams/console/api.py)."""
        q = {"definition": self.definition, "version": self.version, "state": self.state,
             "tenant": self.tenant, "key": self.key_prefix,
             "parkedFrom": self.parked_after, "dueFrom": self.due_after,
             # The API's bounds include their end: one millisecond before is "before".
             "parkedTo": None if self.parked_before is None else self.parked_before - 1,
             "dueTo": None if self.due_before is None else self.due_before - 1}
        return {k: str(v) for k, v in q.items() if v is not None}

    def matches(self, wait: Mapping[str, Any]) -> bool:
        """Whether a wait's status (the API's ``GET /xwait/api/waits/{key}``) meets it."""
        state = wait.get("state")
        if self.state is None:
            state_ok = state is not None and state != "done"
        else:
            state_ok = self.state == "all" or state == self.state
        due = wait.get("nextDueAt") if state != "done" else None
        return (state_ok
                and _same(self.definition, wait.get("definition"))
                and _same(self.version, wait.get("definitionVersion"))
                and _same(self.tenant, wait.get("tenant"))
                and (self.key_prefix is None or str(wait.get("key", "")).startswith(
                    self.key_prefix))
                and _within(wait.get("parkedAt"), self.parked_after, self.parked_before)
                and _within(due, self.due_after, self.due_before))

    def describe(self) -> dict[str, Any]:
        """The filter as instants (ISO 8601, UTC) for a person or a script to read back."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or f.name == "text":
                continue
            name = next(n for n, a in {**_TEXTS, **_TIMES}.items() if a == f.name)
            out[name] = _iso(value) if f.name in _TIMES.values() else value
        return out


def _same(wanted: str | None, value: Any) -> bool:
    return wanted is None or value == wanted


def _within(value: Any, low: int | None, high: int | None) -> bool:
    if low is None and high is None:
        return True
    if not isinstance(value, int):
        return False
    return (low is None or value >= low) and (high is None or value < high)


def _name(attr: str) -> str:
    return next(n for n, a in _TIMES.items() if a == attr)


def _iso(ms: int) -> str:
    """``2026-11-30T16:00:00.000Z``."""
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def _instant(name: str, value: str, now: int) -> int:
    """Epoch ms of an ISO 8601 instant, epoch ms, or a signed duration from ``now``."""
    if value.isdigit():
        return int(value)
    if value.lstrip("+-").startswith("P"):
        try:
            return now + parse_signed_duration_ms(value.removeprefix("+"))
        except ValueError as exc:
            raise InvalidRequest(f"--where: {name}: {exc}") from None
    try:
        when = datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        raise InvalidRequest(
            f"--where: {name} must be an ISO 8601 date and time (2026-11-30T16:00:00Z), "
            f"epoch milliseconds, or a duration from now (-P30D: thirty days ago), got "
            f"{value!r}") from None
    if when.tzinfo is None:
        when = when.astimezone()  # this machine's local time
    return int(when.timestamp() * 1000)
