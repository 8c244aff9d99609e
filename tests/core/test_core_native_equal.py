"""Every recorded transition is decided alike by the Python rules and the native ones.

The corpus (`tests.core.transitions`) holds decisions taken by the core suite
and its hypothesis properties, by the processor's record streams and by the
end-to-end scenarios against a real broker: (definitions, stored slot, event,
now).  Each is decided again here by both implementations, the slot read
from its stored bytes by each, and the decisions - the new slot, every
effect, the timers armed before and after - must be equal.  A rule changed in
one implementation and not in the other fails here on the first transition
that takes it.

The reference is called as ``reference.decide`` so that the suite's fixture,
which runs modules with a ``decide`` of their own once per implementation,
leaves this module alone: it compares the two itself.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator

import pytest

from streams.core import native
from streams.core import rules as reference
from streams.core.rules import Decision
from tests.core.transitions import CORPUS, Transition, read_corpus

SOURCES = ("core", "streams", "e2e")
"""Where the transitions were recorded: the core suite, the processor's record streams
(tests/processor/native_streams.py), the end-to-end scenarios."""


@pytest.fixture(scope="module")
def corpus() -> list[Transition]:
    if native.load(pure_python=os.environ.get("XWAIT_PURE_PYTHON") == "1") is None:
        pytest.skip(f"the native rules are not used here: {native.unavailable}")
    return list(read_corpus(CORPUS))


def _decided(t: Transition, native_rules: bool) -> Decision | str:
    """The decision, or the name of the exception that refused the input."""
    try:
        if t.event is None:
            return (native.catch_up if native_rules else reference.catch_up)(
                t.slot, t.now, t.definitions)
        return (native.decide if native_rules else reference.decide)(
            t.slot, t.event, t.now, t.definitions)
    except native.NativeDeclined:
        raise
    except Exception as exc:  # both must refuse it alike
        return type(exc).__name__


def _differences(transitions: list[Transition]) -> Iterator[str]:
    for t in transitions:
        python, native_ = _decided(t, False), _decided(t, True)
        if python == native_:
            continue
        if isinstance(python, Decision) and isinstance(native_, Decision):
            fields = [f for f in ("slot", "effects", "armed_before", "armed_after")
                      if getattr(python, f) != getattr(native_, f)]
            yield f"{t.source}: {t.op} {t.event!r} at {t.now}: {', '.join(fields)} differ"
        else:
            yield f"{t.source}: {t.op} {t.event!r} at {t.now}: {python!r} != {native_!r}"


@pytest.mark.parametrize("source", SOURCES)
def test_every_recorded_transition_is_decided_alike_by_both_implementations(
        corpus: list[Transition], source: str) -> None:
    mine = [t for t in corpus if t.source.split(":")[0] == source]
    assert len(mine) >= 200, f"only {len(mine)} transitions recorded from {source}"
    differences = list(_differences(mine))
    assert differences == [], (f"{len(differences)} of {len(mine)} transitions differ, "
                               f"the first: " + "\n".join(differences[:5]))


def test_the_corpus_takes_every_kind_of_input_of_every_variant(
        corpus: list[Transition]) -> None:
    kinds = Counter(type(t.event).__name__ if t.event is not None else "catch_up"
                    for t in corpus)
    assert set(kinds) == {"StartWait", "Reply", "Command", "ActionResult", "TimerFired",
                          "catch_up"}, kinds
    variants = {d.variant.value for t in corpus for d in t.definitions.values()}
    assert variants == {"single-channel", "multi-channel", "first-valid", "probe",
                        "chained"}, variants
    commands = {t.event.command.value for t in corpus
                if t.event is not None and hasattr(t.event, "command")}
    assert {"SUSPEND", "RESUME", "CANCEL", "DELIVER", "REVIEW", "RESCHEDULE",
            "MIGRATE"} <= commands, commands
