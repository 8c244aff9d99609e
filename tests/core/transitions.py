"""Recorded transitions of the rules: (definitions, slot, event, now) -> decision.

The corpus in ``tests/core/corpus/transitions.jsonl.gz`` holds decisions taken
while the core suite, its hypothesis properties, the processor's record
streams and the end-to-end scenarios ran (``scripts/record_transitions.py``
records it; docs/concepts/native.md says when to record it again).  Each is
replayed against both implementations of the rules
(``tests/core/test_core_native_equal.py``): what the Python rules decide and
what the native ones decide must be equal.  The corpus keeps the inputs, not
the answers, so a change of a rule needs no new corpus, only both
implementations changed alike.

One JSON document a line, of two kinds::

    {"defs": ID, "newest": [definition..], "kept": [definition..]?}
    {"op": "decide"|"catch_up", "defs": ID, "slot": SLOT?, "event": EVENT?, "now": MS,
     "source": WHERE}

``SLOT`` is the stored slot's JSON text (`encode_slot`); ``EVENT`` is
``[type name, {field: value}]`` with enums as their values and an origin as
``[topic, partition, offset, base64(value)]``; a definition is its fields, enums
as values.  ``kept`` is there when the definitions were a `DefinitionSet`.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from streams import core

CORPUS = Path(__file__).parent / "corpus" / "transitions.jsonl.gz"
RECORD_ENV = "XWAIT_RECORD_TRANSITIONS"
"""A folder: while set, the recording hooks append what they see to files in it."""

_EVENTS: dict[str, type] = {
    cls.__name__: cls
    for cls in (core.StartWait, core.Reply, core.Command, core.ActionResult, core.TimerFired)}
_ENUMS: dict[str, type] = {
    "command": core.CommandKind, "status": core.ResultStatus, "kind": core.TimerKind}


# ----------------------------------------------------------------- definitions

def _definition(d: core.WaitDefinition) -> dict[str, Any]:
    policy = d.on_send_failure
    return {
        "name": d.name, "variant": d.variant.value,
        "stages": [{"name": s.name, "deadline_ms": s.deadline_ms, "party": s.party,
                    "reminder": None if s.reminder is None
                    else [s.reminder.interval_ms, s.reminder.limit],
                    "escalation": [[e.target, e.deadline_ms] for e in s.escalation]}
                   for s in d.stages],
        "channels": list(d.channels), "parties": list(d.parties),
        "response_schema": d.response_schema, "invalid_reply": d.invalid_reply.value,
        "early_reply_ttl_ms": d.early_reply_ttl_ms, "retention_ms": d.retention_ms,
        "poll_interval_ms": d.poll_interval_ms, "source": d.source,
        "on_send_failure": None if policy is None
        else [policy.retries, policy.backoff_ms, policy.then.value],
        "version": d.version,
    }


def _read_definition(raw: dict[str, Any]) -> core.WaitDefinition:
    policy = raw["on_send_failure"]
    return core.WaitDefinition(
        name=raw["name"], variant=core.Variant(raw["variant"]),
        stages=tuple(core.Stage(s["name"], s["deadline_ms"], s["party"],
                                None if s["reminder"] is None
                                else core.ReminderPolicy(*s["reminder"]),
                                tuple(core.EscalationLevel(*e) for e in s["escalation"]))
                     for s in raw["stages"]),
        channels=tuple(raw["channels"]), parties=tuple(raw["parties"]),
        response_schema=raw["response_schema"],
        invalid_reply=core.InvalidReplyRoute(raw["invalid_reply"]),
        early_reply_ttl_ms=raw["early_reply_ttl_ms"], retention_ms=raw["retention_ms"],
        poll_interval_ms=raw["poll_interval_ms"], source=raw["source"],
        on_send_failure=None if policy is None
        else core.SendFailurePolicy(policy[0], policy[1], core.SendFailureRoute(policy[2])),
        version=raw["version"])


def definitions_document(definitions: Mapping[str, core.WaitDefinition]) -> dict[str, Any]:
    """The definitions as a corpus line, keyed by a hash of what they hold."""
    doc: dict[str, Any] = {"newest": [_definition(d) for d in definitions.values()]}
    if isinstance(definitions, core.DefinitionSet):
        doc["kept"] = [_definition(d) for d in definitions.kept()]
    text = json.dumps(doc, sort_keys=True)
    return {"defs": hashlib.sha1(text.encode()).hexdigest()[:16], **doc}  # noqa: S324 - a name


def read_definitions(doc: dict[str, Any]) -> Mapping[str, core.WaitDefinition]:
    newest = {d.name: d for d in map(_read_definition, doc["newest"])}
    if "kept" not in doc:
        return newest
    return core.DefinitionSet(newest, [_read_definition(d) for d in doc["kept"]])


# ----------------------------------------------------------------- events

def _value(v: Any) -> Any:
    if isinstance(v, core.Origin):
        return [v.topic, v.partition, v.offset, base64.b64encode(v.value).decode()]
    if isinstance(v, tuple):
        return list(v)
    return getattr(v, "value", v)  # an enum member: its value


def event_document(event: core.Event) -> list[Any]:
    return [type(event).__name__, {f.name: _value(getattr(event, f.name))
                                   for f in fields(event)}]


def read_event(doc: list[Any]) -> core.Event:
    name, raw = doc
    values: dict[str, Any] = {}
    for key, v in raw.items():
        if key == "origin" and v is not None:
            v = core.Origin(v[0], v[1], v[2], base64.b64decode(v[3]))
        elif key in _ENUMS and v is not None:
            v = _ENUMS[key](v)
        elif isinstance(v, list):
            v = tuple(v)
        values[key] = v
    event: core.Event = _EVENTS[name](**values)
    return event


# ----------------------------------------------------------------- the corpus

@dataclass(frozen=True)
class Transition:
    op: str
    definitions: Mapping[str, core.WaitDefinition]
    slot: core.Slot | None
    event: core.Event | None
    now: int
    source: str


def read_corpus(path: Path = CORPUS) -> Iterator[Transition]:
    defs: dict[str, Mapping[str, core.WaitDefinition]] = {}
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            doc = json.loads(line)
            if "op" not in doc:
                defs[doc["defs"]] = read_definitions(doc)
                continue
            slot = None if doc["slot"] is None else core.decode_slot(doc["slot"].encode())
            event = None if doc["event"] is None else read_event(doc["event"])
            yield Transition(doc["op"], defs[doc["defs"]], slot, event, doc["now"],
                             doc["source"])


class Recorder:
    """Appends each decision it is shown to ``<folder>/transitions-<pid>.jsonl``."""

    def __init__(self, folder: str | os.PathLike[str], source: str) -> None:
        self.path = Path(folder) / f"transitions-{os.getpid()}.jsonl"
        self.source = source
        self._written: dict[int, tuple[tuple[str, int], ...]] = {}
        self._names: dict[int, str] = {}

    def _defs(self, definitions: Mapping[str, core.WaitDefinition], out: Any) -> str:
        """The id of `definitions`, written to the file first if they are new to it."""
        shape = tuple((name, id(d)) for name, d in definitions.items())
        if self._written.get(id(definitions)) != shape:
            doc = definitions_document(definitions)
            out.write(json.dumps(doc) + "\n")
            self._written[id(definitions)] = shape
            self._names[id(definitions)] = doc["defs"]
        return self._names[id(definitions)]

    def record(self, op: str, definitions: Mapping[str, core.WaitDefinition],
               slot: core.Slot | None, event: core.Event | None, now: int) -> None:
        with self.path.open("a", encoding="utf-8") as out:
            defs = self._defs(definitions, out)
            out.write(json.dumps({
                "op": op, "defs": defs,
                "slot": None if slot is None else core.encode_slot(slot).decode(),
                "event": None if event is None else event_document(event), "now": now,
                "source": self.source}) + "\n")


Decide = Callable[[core.Slot | None, core.Event, int, Mapping[str, core.WaitDefinition]],
                  core.Decision]
CatchUp = Callable[[core.Slot | None, int, Mapping[str, core.WaitDefinition]], core.Decision]


def recording_decide(decide: Decide, recorder: Recorder) -> Decide:
    def recorded(slot: core.Slot | None, event: core.Event, now_ms: int,
                 definitions: Mapping[str, core.WaitDefinition]) -> core.Decision:
        recorder.record("decide", definitions, slot, event, now_ms)
        return decide(slot, event, now_ms, definitions)
    return recorded


def recording_catch_up(catch_up: CatchUp, recorder: Recorder) -> CatchUp:
    def recorded(slot: core.Slot | None, now_ms: int,
                 definitions: Mapping[str, core.WaitDefinition]) -> core.Decision:
        recorder.record("catch_up", definitions, slot, None, now_ms)
        return catch_up(slot, now_ms, definitions)
    return recorded
