"""The rules of the wait in Rust (``streams._native``): the same decisions, natively.

Why: deciding a record in Python - decoding it, reading and writing its row,
the rules, encoding what they emit - was two thirds of a worker's main thread
and most of its CPU (docs/speed.md, "The native record path").  The crate in
``native/`` (PyO3, built by ``make venv`` with maturin) implements the whole
path of one record or fired timer, bytes to bytes: the input's JSON or Avro,
the row (`streams.processor.envelope`), the slot (`streams.core.state_codec`),
every rule of ``streams/core/rules`` function for function, the outcome, action
and rejection records in Avro, and the deterministic ids.

The Python rules stay the specification, the reference and the fallback:

* A native decision that meets anything it does not do exactly as Python
  does (a record the processor refuses, a row of an older layout, a
  number beyond 64 bits) *declines*, and the record is decided in Python.
* Where a text users read comes from a library (jsonschema's and json's
  messages in ``validationIssue``, isodate's durations, ``repr`` of text
  beyond ASCII), the native rules call the very Python function the Python
  rules call (`Helpers`), so the two cannot differ there.
* Equality is held by tests, not by care: the whole core suite and its
  hypothesis properties run against both (``tests/core/conftest.py``), a
  corpus of recorded decisions is replayed against both
  (``tests/core/test_core_native_equal.py``), and the processor's record
  path is compared byte for byte (``tests/processor/test_native_records.py``).

Selected once: `load()` gives the extension, or None - when the worker is
told ``XWAIT_PURE_PYTHON=1`` (`Settings.pure_python`), or when the extension
is not built or does not load (`unavailable` says why; the worker logs it
once at start).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from streams.core.definition import WaitDefinition, definition_for
from streams.core.durations import parse_duration_ms, parse_signed_duration_ms

# Every effect: _effect below builds each kind the native rules return.
from streams.core.effects import (
    ActionKind,
    ArmTimer,
    BufferEarlyCommand,
    BufferEarlyReply,
    DisarmTimer,
    Discard,
    DiscardReason,
    Effect,
    EmitAction,
    EmitOutcome,
    OutcomeKind,
    OutcomeReason,
    Purge,
    Reject,
    RejectReason,
    TraceEntry,
)
from streams.core.events import (
    ActionResult,
    Command,
    CommandKind,
    Event,
    Origin,
    Reply,
    ResultStatus,
    TimerKind,
)
from streams.core.rules import Decision
from streams.core.rules import catch_up as python_catch_up
from streams.core.rules import decide as python_decide
from streams.core.rules.commands import correction_issue
from streams.core.rules.replies import _combine_stages, reply_verdict
from streams.core.state import ArmedTimer, Slot
from streams.core.state_codec import decode_slot, encode_slot

__all__ = ["Helpers", "NativeDeclined", "catch_up", "decide", "load", "unavailable"]

_loaded: ModuleType | None = None
unavailable: str | None = None
"""Why the extension is not used (None while it is, or before `load` was asked)."""


def load(pure_python: bool = False) -> ModuleType | None:
    """The native extension, or None (and `unavailable` says why)."""
    global _loaded, unavailable
    if pure_python:
        unavailable = "XWAIT_PURE_PYTHON=1"
        return None
    if _loaded is None:
        try:
            _loaded = importlib.import_module("streams._native")
        except ImportError as exc:
            unavailable = f"the extension streams._native is not built or does not load ({exc})"
            return None
    unavailable = None
    return _loaded


class Helpers:
    """What the native rules ask Python: exactly the functions the Python rules use."""

    @staticmethod
    def reply_verdict(d: WaitDefinition, data: str, channel: str,
                      by_operator: bool) -> tuple[str | None, bool]:
        return reply_verdict(d, data, channel, by_operator=by_operator)

    correction_issue = staticmethod(correction_issue)
    definition_for = staticmethod(definition_for)

    @staticmethod
    def combine_stages(d: WaitDefinition, results: list[str]) -> str:
        return _combine_stages(d, results)

    @staticmethod
    def duration(text: str, signed: bool) -> tuple[int | None, str | None]:
        """(milliseconds, None), or (None, the ValueError's text) - as the rules report it."""
        try:
            return (parse_signed_duration_ms(text) if signed else parse_duration_ms(text)), None
        except ValueError as exc:
            return None, str(exc)


class NativeDeclined(AssertionError):
    """The native rules declined a decision the Python rules make: a gap between them."""


# One core per definitions mapping, rebuilt when its contents change (tests build theirs).
_cores: dict[int, tuple[Mapping[str, WaitDefinition], tuple[tuple[str, int], ...], Any]] = {}


def _core(definitions: Mapping[str, WaitDefinition]) -> Any:
    module = load()
    if module is None:
        raise NativeDeclined(f"no native rules: {unavailable}")
    seen = tuple((name, id(d)) for name, d in definitions.items())
    cached = _cores.get(id(definitions))
    if cached is None or cached[1] != seen:
        cached = (definitions, seen, module.Core(definitions, 1, "timers", Helpers, None, None))
        _cores[id(definitions)] = cached
    return cached[2]


def _origin(raw: tuple[str, int, int, bytes] | None) -> Origin | None:
    return None if raw is None else Origin(*raw)


def _reply(raw: dict[str, Any] | None) -> Reply | None:
    if raw is None:
        return None
    return Reply(**{**raw, "origin": _origin(raw["origin"])})


def _command(raw: dict[str, Any] | None) -> Command | None:
    if raw is None:
        return None
    return Command(**{**raw, "command": CommandKind(raw["command"]),
                      "origin": _origin(raw["origin"])})


def _result(raw: dict[str, Any] | None) -> ActionResult | None:
    if raw is None:
        return None
    return ActionResult(**{**raw, "status": ResultStatus(raw["status"]),
                           "origin": _origin(raw["origin"])})


def _timer(raw: tuple[str, int, int]) -> ArmedTimer:
    return ArmedTimer(TimerKind(raw[0]), raw[1], raw[2])


def _effect(raw: tuple[Any, ...]) -> Effect:
    kind = raw[0]
    if kind == "outcome":
        fields = raw[1]
        return EmitOutcome(**{**fields, "outcome": OutcomeKind(fields["outcome"]),
                              "reason": OutcomeReason(fields["reason"]),
                              "trace": tuple(TraceEntry(*t) for t in fields["trace"])})
    if kind == "action":
        return EmitAction(**{**raw[1], "action": ActionKind(raw[1]["action"])})
    if kind == "arm":
        return ArmTimer(TimerKind(raw[1][0]), raw[1][1], raw[1][2])
    if kind == "disarm":
        return DisarmTimer(TimerKind(raw[1][0]), raw[1][1], raw[1][2])
    if kind == "buffer_reply":
        return BufferEarlyReply(Reply(**{**raw[1], "origin": _origin(raw[1]["origin"])}),
                                raw[2], raw[3])
    if kind == "buffer_command":
        return BufferEarlyCommand(Command(**{**raw[1], "command": CommandKind(raw[1]["command"]),
                                             "origin": _origin(raw[1]["origin"])}),
                                  raw[2], raw[3])
    if kind == "reject":
        return Reject(RejectReason(raw[1]), raw[2], _reply(raw[3]), _command(raw[4]),
                      _result(raw[5]))
    if kind == "discard":
        return Discard(DiscardReason(raw[1]), raw[2])
    if kind == "purge":
        return Purge()
    raise ValueError(f"unknown native effect {kind!r}")


def _decision(slot: Slot | None, got: tuple[Any, ...]) -> Decision:
    changed, data, effects, before, after = got
    new = decode_slot(data) if changed and data is not None else None if changed else slot
    return Decision(slot=new, effects=tuple(_effect(e) for e in effects),
                    armed_before=frozenset(_timer(t) for t in before),
                    armed_after=frozenset(_timer(t) for t in after))


def decide(slot: Slot | None, event: Event, now_ms: int,
           definitions: Mapping[str, WaitDefinition]) -> Decision:
    """`streams.core.decide`, decided by the native rules (the equality harness's entry).

    The slot goes in as its stored bytes and comes back from them, so the
    native slot codec is in every comparison.  Where the native rules
    decline, the Python rules decide: if they raise, so does this (both
    refuse the input); if they decide, that is a gap, `NativeDeclined`.
    """
    got = _core(definitions).decide(None if slot is None else encode_slot(slot), event, now_ms)
    if got is None:
        python_decide(slot, event, now_ms, definitions)  # raises if Python refuses it too
        raise NativeDeclined(f"the native rules declined {type(event).__name__} at {now_ms}")
    return _decision(slot, got)


def catch_up(slot: Slot | None, now_ms: int,
             definitions: Mapping[str, WaitDefinition]) -> Decision:
    """`streams.core.catch_up`, decided by the native rules (see `decide`)."""
    got = _core(definitions).catch_up(None if slot is None else encode_slot(slot), now_ms)
    if got is None:
        python_catch_up(slot, now_ms, definitions)
        raise NativeDeclined(f"the native rules declined catching up to {now_ms}")
    return _decision(slot, got)
