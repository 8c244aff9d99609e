"""The worker's tuning constants live in one place, and the relations between them hold.

Every relation `Tuning.relations` states is checked whenever a `Tuning` is
made: the defaults satisfy them, and a value that breaks one is refused with
its reason.  Two structural checks keep the house as issue 50 left it: no
room of the processor defines a tuning constant of its own, and no
constructor there takes more than eight parameters (the rooms share one
`WorkerContext` instead).
"""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from streams.processor.tuning import TUNING, Tuning, TuningError

ROOT = Path(__file__).resolve().parents[2]
ROOMS = sorted([*(ROOT / "streams" / "processor").glob("*.py"),
                *(ROOT / "streams" / "timers").glob("*.py")])
# Numbers at module level that are no tuning: formats, exit codes, contract limits.
NOT_TUNING = {
    ("worker.py", "EXIT_COMMIT_FAILED"),  # the exit code of a failed commit
    ("envelope.py", "_NONE32"),  # the row format's "none"
    ("due.py", "NOTHING_LATER"),  # "no timer after this": a sentinel
    ("stored.py", "_SIGN"),  # the index key's sign flip
    ("records.py", "MAX_RECORD_BYTES"),  # the contract's largest record (too_large)
    ("records.py", "MAX_REJECTED_ORIGINAL"),  # the contract's cut of a Rejected's original
    ("inputs.py", "MARKERS_MAX"),  # what a fetch may pass over: librdkafka's behaviour
}


def test_the_defaults_keep_every_relation() -> None:
    assert all(holds for holds, _ in TUNING.relations())


@pytest.mark.parametrize(("change", "why"), [
    ({"flush_timeout_s": 200.0}, "flush_timeout_s must outlast message_timeout_s"),
    ({"stall_s": 61.0}, "stall_s must be shorter than transaction_timeout_s"),
    ({"commit_hang_s": 100.0}, "commit_hang_s must outlast the longest step"),
    ({"stop_commit_wait_s": 31.0}, "stop_commit_wait_s must fit in the 30 s"),
    ({"timers_max": 100}, "timers_max must equal batch_max"),
    ({"yield_after_s": 0.5}, "yield_after_s must be shorter than idle_wake_s"),
    ({"held_enough": 6000}, "held_enough must be below held_max"),
    ({"probe_retry_s": 0.001}, "probe_retry_s must be at least probe_min_s"),
    ({"offsets_attempt_s": 6.0}, "offsets_attempt_s must be shorter than"),
    ({"restore_poll_s": 30.0}, "restore_poll_s must be far below restore_stall_s"),
])
def test_a_value_that_breaks_a_relation_is_refused_with_its_reason(
    change: dict[str, Any], why: str
) -> None:
    with pytest.raises(TuningError, match=why):
        replace(TUNING, **change)


def test_a_consistent_change_of_related_values_is_taken() -> None:
    quick = replace(TUNING, message_timeout_s=1.0, flush_timeout_s=2.0,
                    transaction_timeout_s=1.0, stall_s=0.5, commit_hang_s=5.0)
    assert isinstance(quick, Tuning) and quick.commit_hang_s == 5.0


def _module_numbers(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    found = []
    for node in tree.body:
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, ast.AnnAssign) else [])
        value = getattr(node, "value", None)
        numeric = isinstance(value, ast.Constant) and type(value.value) in (int, float) or (
            isinstance(value, ast.BinOp))
        for target in targets:
            if isinstance(target, ast.Name) and target.id.isupper() and numeric:
                found.append(target.id)
    return found


def test_no_room_of_the_processor_keeps_a_tuning_constant_of_its_own() -> None:
    strays = [f"{path.name}: {name}" for path in ROOMS if path.name != "tuning.py"
              for name in _module_numbers(path) if (path.name, name) not in NOT_TUNING]
    assert strays == [], "a tuning constant belongs in streams/processor/tuning.py"


def test_no_constructor_of_the_processor_takes_more_than_eight_parameters() -> None:
    wide = []
    for path in ROOMS:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name == "__init__":
                args = node.args
                count = (len(args.posonlyargs) + len(args.args) + len(args.kwonlyargs)
                         - 1)  # self
                if count > 8:
                    wide.append(f"{path.name}:{node.lineno} ({count})")
    assert wide == []
