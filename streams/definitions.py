"""Load wait definitions from ``topology/waits/*.yaml`` into frozen ``WaitDefinition`` values.

A definition that is wrong is refused at start-up, not when the first wait
needs it: a typo in a deadline found at 3 a.m. by a parked wait is far worse
than a worker that will not start. Every refusal is a ``DefinitionError``
naming the file, the field and what was expected.

The YAML format (see the shipped examples for comments on each field)::

    name: expense-approval         # optional, defaults to the file name without .yaml
    variant: single-channel        # single-channel | multi-channel | first-valid | probe | chained
    channels: [email]              # accepted reply channels; omitted = any
    parties: [a, b]                # first-valid: default parties when a request names none
    reminder: {every: PT24H, limit: 2}   # or a cycle: R2/PT24H
    deadline: P3D                  # ISO 8601; years and months are refused
    escalation:                    # levels after the deadline, each waits again
      - {target: director, deadline: PT12H}
    invalid_reply: review          # review | escalate
    early_reply_ttl: PT10M         # how long a reply may wait for its request
    retention: P7D                 # how long a finished wait is remembered
    poll: PT5M                     # probe only: time between polls
    on_send_failure:               # what a failed send does (rule 12); omitted: only traced
      {retries: 3, backoff: PT1M, then: escalate}   # then: escalate | review
    version: "2026-12"             # optional; default: a hash of the normalised content
    response_schema: {...}         # JSON Schema of responseData
    stages:                        # chained only, instead of deadline/reminder/escalation
      - {name: manager, party: manager, deadline: P2D, reminder: ..., escalation: [...]}
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml

# The same names as streams/core/__init__.py's list (duplicates lists the pair),
# deliberately: an import list, and the core's lazy table of where its names live.
from streams.core.definition import (
    DEFAULT_EARLY_REPLY_TTL_MS,
    DEFAULT_RETENTION_MS,
    EscalationLevel,
    InvalidReplyRoute,
    ReminderPolicy,
    SendFailurePolicy,
    SendFailureRoute,
    Stage,
    Variant,
    WaitDefinition,
)
from streams.core.durations import parse_cycle_ms, parse_duration_ms
from streams.core.errors import DefinitionError
from streams.core.events import PARTY_SEPARATOR

__all__ = ["DefinitionError", "Document", "content_hash", "definition_from_mapping",
           "load_definition", "load_definitions", "load_documents"]

Document = tuple[WaitDefinition, dict[str, Any]]
"""A definition and the YAML mapping it was read from (what is stored to read it again)."""

_TOP_FIELDS = frozenset({
    "name", "variant", "channels", "parties", "reminder", "deadline", "escalation",
    "invalid_reply", "early_reply_ttl", "retention", "poll", "response_schema", "stages",
    "on_send_failure", "version",
})
_SEND_FAILURE_FIELDS = frozenset({"retries", "backoff", "then"})
MAX_SEND_RETRIES = 100
"""More retries than this is a loop, not a policy: a send failing a hundred times
needs a person (``then: review``)."""
DEFAULT_SEND_BACKOFF = "PT1M"
VERSION_CHARS = 12
"""Hex digits of the content hash that name a version: 48 bits, no collision
among the versions of one definition in practice, short enough to read."""
_STAGE_FIELDS = frozenset({"name", "party", "deadline", "reminder", "escalation"})
_LEVEL_FIELDS = frozenset({"target", "deadline"})
_REMINDER_FIELDS = frozenset({"every", "limit"})


def load_definitions(folder: Path, *, check_schemas: bool = True) -> dict[str, WaitDefinition]:
    """Every ``*.yaml`` in ``folder``, by definition name; refuses the first wrong one.

    ``check_schemas=False`` skips checking that each ``response_schema`` is a
    valid JSON Schema (the rest is read and checked all the same): the SDK and
    CLI, which only look up names, variants and channels, then do not load
    jsonschema (0.1 s of a command's start-up). A worker, and `xwait
    definitions`, check everything.
    """
    return {d.name: d for d, _raw in load_documents(folder, check_schemas=check_schemas)}


def load_documents(folder: Path, *, check_schemas: bool = True) -> list[Document]:
    """Every ``*.yaml`` in ``folder`` with the mapping it was read from, by name."""
    if not folder.is_dir():
        raise DefinitionError(str(folder), "(folder)", "a folder of wait definitions",
                              "it does not exist")
    found: dict[str, Document] = {}
    for path in sorted(folder.glob("*.yaml")):
        definition, raw = _load_document(path, check_schemas)
        if definition.name in found:
            raise DefinitionError(
                str(path), "name", "a name no other definition uses",
                f"{definition.name!r} is also defined in {found[definition.name][0].source}",
            )
        found[definition.name] = (definition, raw)
    return [found[name] for name in sorted(found)]


def load_definition(path: Path, *, check_schemas: bool = True) -> WaitDefinition:
    return _load_document(path, check_schemas)[0]


def _load_document(path: Path, check_schemas: bool = True) -> Document:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise DefinitionError(str(path), "(document)", "a readable YAML document",
                              f"reading it failed: {exc}") from exc
    definition = _Reader(str(path), check_schemas).definition(raw, default_name=path.stem)
    doc = {str(k): v for k, v in raw.items()}  # a mapping: the reader checked
    doc.setdefault("name", definition.name)
    return definition, doc


def definition_from_mapping(raw: object, *, file: str, default_name: str) -> WaitDefinition:
    """A definition from the YAML format's mapping, with the loader's every check.

    For definitions that come from elsewhere than a YAML file (a BPMN import):
    the same rules as at start-up, so what is accepted here a worker accepts.
    """
    return _Reader(file).definition(raw, default_name=default_name)


def content_hash(d: WaitDefinition) -> str:
    """The version of a definition without an explicit ``version:``: 12 hex digits.

    A hash of what the definition means, not of how its file is written:
    every field, durations in milliseconds, the JSON Schema canonical, and a
    field at its default left out.  So comments, layout, key order,
    ``PT24H`` for ``P1D`` or a default spelled out make no new version, and a
    field a later build adds (with its default) changes no version either.
    """
    text = json.dumps(_meaning(d), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:VERSION_CHARS]


def _meaning(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in dataclasses.fields(value):
            v = getattr(value, f.name)
            if f.name in ("source", "version") or (f.default is not dataclasses.MISSING
                                                   and v == f.default):
                continue
            out[f.name] = _meaning(v)
        return out
    if isinstance(value, tuple | list):
        return [_meaning(v) for v in value]
    if isinstance(value, StrEnum):
        return value.value
    return value


class _Reader:
    """Reads one file; knows the file name so every error can name it."""

    def __init__(self, file: str, check_schemas: bool = True) -> None:
        self.file = file
        self.check_schemas = check_schemas

    def fail(self, field: str, expected: str, found: str) -> DefinitionError:
        return DefinitionError(self.file, field, expected, found)

    def definition(self, raw: object, *, default_name: str) -> WaitDefinition:
        top = self.mapping(raw, "(document)", _TOP_FIELDS)
        name = self.text(top.get("name", default_name), "name")
        if "\x1f" in name:
            raise self.fail("name", "a name without control characters", f"got {name!r}")
        version = ""
        if "version" in top:
            version = self.text(top["version"], "version")
            if "@" in version or len(version) > 64:
                raise self.fail("version", "a version of at most 64 characters without '@'",
                                f"got {version!r}")
        variant_raw = top.get("variant")
        try:
            variant = Variant(str(variant_raw))
        except ValueError:
            raise self.fail("variant", f"one of {[v.value for v in Variant]}",
                            f"got {variant_raw!r}") from None

        channels = self.names(top.get("channels", []), "channels")
        if variant is Variant.MULTI_CHANNEL and len(channels) < 2:
            raise self.fail("channels", "at least two channels for a multi-channel wait",
                            f"got {list(channels)}")
        if variant is Variant.SINGLE_CHANNEL and len(channels) > 1:
            raise self.fail("channels", "at most one channel for a single-channel wait",
                            f"got {list(channels)}")
        parties = self.names(top.get("parties", []), "parties")
        if variant is not Variant.FIRST_VALID and parties:
            raise self.fail("parties", "parties only on a first-valid wait",
                            f"variant is {variant.value}")

        if variant is Variant.CHAINED:
            for field in ("deadline", "reminder", "escalation"):
                if field in top:
                    raise self.fail(field, "per-stage settings under 'stages' for a chained wait",
                                    f"'{field}' is given at the top")
            stages_raw = top.get("stages")
            if not isinstance(stages_raw, list) or len(stages_raw) < 2:
                raise self.fail("stages", "a list of at least two stages for a chained wait",
                                f"got {stages_raw!r}")
            stages = tuple(self.stage(s, f"stages[{i}]") for i, s in enumerate(stages_raw))
            names = [s.name for s in stages]
            if len(set(names)) != len(names):
                raise self.fail("stages", "distinct stage names", f"got {names}")
        else:
            if "stages" in top:
                raise self.fail("stages", "stages only on a chained wait",
                                f"variant is {variant.value}")
            stages = (Stage(
                name=name,
                deadline_ms=self.duration(top.get("deadline"), "deadline"),
                reminder=self.reminder(top.get("reminder"), "reminder"),
                escalation=self.levels(top.get("escalation", []), "escalation"),
            ),)

        poll: int | None = None
        if variant is Variant.PROBE:
            poll = self.duration(top.get("poll"), "poll")
        elif "poll" in top:
            raise self.fail("poll", "poll only on a probe wait", f"variant is {variant.value}")

        route_raw = top.get("invalid_reply", InvalidReplyRoute.REVIEW.value)
        try:
            route = InvalidReplyRoute(str(route_raw))
        except ValueError:
            raise self.fail("invalid_reply", f"one of {[r.value for r in InvalidReplyRoute]}",
                            f"got {route_raw!r}") from None

        d = WaitDefinition(
            name=name,
            variant=variant,
            stages=stages,
            channels=channels,
            parties=parties,
            response_schema=self.schema(top.get("response_schema"), "response_schema"),
            invalid_reply=route,
            early_reply_ttl_ms=(self.duration(top["early_reply_ttl"], "early_reply_ttl")
                                if "early_reply_ttl" in top else DEFAULT_EARLY_REPLY_TTL_MS),
            retention_ms=(self.duration(top["retention"], "retention")
                          if "retention" in top else DEFAULT_RETENTION_MS),
            poll_interval_ms=poll,
            source=self.file,
            on_send_failure=self.send_failure(top.get("on_send_failure"), "on_send_failure"),
        )
        return dataclasses.replace(d, version=version or content_hash(d))

    def send_failure(self, raw: object, field: str) -> SendFailurePolicy | None:
        if raw is None:
            return None
        m = self.mapping(raw, field, _SEND_FAILURE_FIELDS)
        retries = m.get("retries", 0)
        if isinstance(retries, bool) or not isinstance(retries, int) \
                or not 0 <= retries <= MAX_SEND_RETRIES:
            raise self.fail(f"{field}.retries",
                            f"a whole number of retries from 0 to {MAX_SEND_RETRIES}",
                            f"got {retries!r}")
        then_raw = m.get("then")
        try:
            then = SendFailureRoute(str(then_raw))
        except ValueError:
            raise self.fail(f"{field}.then", f"one of {[r.value for r in SendFailureRoute]}",
                            f"got {then_raw!r}") from None
        return SendFailurePolicy(
            retries=retries,
            backoff_ms=self.duration(m.get("backoff", DEFAULT_SEND_BACKOFF), f"{field}.backoff"),
            then=then)

    def stage(self, raw: object, field: str) -> Stage:
        m = self.mapping(raw, field, _STAGE_FIELDS)
        party = m.get("party")
        return Stage(
            name=self.text(m.get("name"), f"{field}.name"),
            party=self.text(party, f"{field}.party") if party is not None else None,
            deadline_ms=self.duration(m.get("deadline"), f"{field}.deadline"),
            reminder=self.reminder(m.get("reminder"), f"{field}.reminder"),
            escalation=self.levels(m.get("escalation", []), f"{field}.escalation"),
        )

    def levels(self, raw: object, field: str) -> tuple[EscalationLevel, ...]:
        if not isinstance(raw, list):
            raise self.fail(field, "a list of {target, deadline} levels", f"got {raw!r}")
        levels = []
        for i, item in enumerate(raw):
            m = self.mapping(item, f"{field}[{i}]", _LEVEL_FIELDS)
            levels.append(EscalationLevel(
                target=self.text(m.get("target"), f"{field}[{i}].target"),
                deadline_ms=self.duration(m.get("deadline"), f"{field}[{i}].deadline"),
            ))
        return tuple(levels)

    def reminder(self, raw: object, field: str) -> ReminderPolicy | None:
        if raw is None:
            return None
        if isinstance(raw, str):
            try:
                limit, interval = parse_cycle_ms(raw)
            except ValueError as exc:
                raise self.fail(field, "a cycle such as R3/PT1H or {every, limit}",
                                str(exc)) from None
            return ReminderPolicy(interval_ms=interval, limit=limit)
        m = self.mapping(raw, field, _REMINDER_FIELDS)
        limit_raw = m.get("limit")
        if isinstance(limit_raw, bool) or not isinstance(limit_raw, int) or limit_raw < 1:
            raise self.fail(f"{field}.limit", "a whole number of reminders, 1 or more",
                            f"got {limit_raw!r}")
        return ReminderPolicy(interval_ms=self.duration(m.get("every"), f"{field}.every"),
                              limit=limit_raw)

    def duration(self, raw: object, field: str) -> int:
        if not isinstance(raw, str):
            raise self.fail(field, "an ISO 8601 duration such as PT24H or P3D",
                            f"got {raw!r}")
        try:
            return parse_duration_ms(raw)
        except ValueError as exc:
            text = str(exc)
            found = text.split(", but ", 1)[1] if ", but " in text else text
            raise self.fail(field, "a positive ISO 8601 duration in weeks, days, hours, "
                            "minutes or seconds", found) from None

    def schema(self, raw: object, field: str) -> str | None:
        if raw is None:
            return None
        if not isinstance(raw, dict):
            raise self.fail(field, "a JSON Schema object", f"got {raw!r}")
        if not self.check_schemas:
            return json.dumps(raw, sort_keys=True, separators=(",", ":"))
        from jsonschema import exceptions as schema_exceptions
        from jsonschema import validators

        cls = validators.validator_for(raw, default=validators.Draft202012Validator)
        try:
            cls.check_schema(raw)
        except schema_exceptions.SchemaError as exc:
            where = "/".join(str(p) for p in exc.path)
            raise self.fail(f"{field}/{where}" if where else field, "a valid JSON Schema",
                            exc.message) from None
        return json.dumps(raw, sort_keys=True, separators=(",", ":"))

    def mapping(self, raw: object, field: str, allowed: frozenset[str]) -> Mapping[str, Any]:
        if not isinstance(raw, dict):
            raise self.fail(field, "a mapping of fields", f"got {type(raw).__name__}")
        unknown = sorted(str(k) for k in raw if k not in allowed)
        if unknown:
            raise self.fail(f"{field}.{unknown[0]}" if field != "(document)" else unknown[0],
                            f"one of the fields {sorted(allowed)}",
                            f"found {unknown[0]!r}")
        return raw

    def text(self, raw: object, field: str) -> str:
        if not isinstance(raw, str) or not raw.strip():
            raise self.fail(field, "a non-empty string", f"got {raw!r}")
        if PARTY_SEPARATOR in raw:
            raise self.fail(field, f"a name without '{PARTY_SEPARATOR}'", f"got {raw!r}")
        return raw

    def names(self, raw: object, field: str) -> tuple[str, ...]:
        if not isinstance(raw, list):
            raise self.fail(field, "a list of names", f"got {raw!r}")
        names = tuple(self.text(item, f"{field}[{i}]") for i, item in enumerate(raw))
        if len(set(names)) != len(names):
            raise self.fail(field, "distinct names", f"got {list(names)}")
        return names
