"""Rule 9 for bulk operations: a command of an operation names the operation in the wait's
trace, and a wait takes an operation's command once."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from streams import core
from streams.core import catch_up, decide
from streams.core.operations import by, carries, operation_id_problem
from tests.core.core_harness import HOUR, KEY, MINUTE, Run
from tests.core.picking import rejects, the_outcome, the_reject
from tests.core.test_core_history import NEWER
from tests.core.test_core_properties import World, _expand, op, program

pytestmark = [pytest.mark.rule9]

OPERATION = "cancel-20261207T101500-3f9a1c"


def _marks(slot: core.Slot | None, operation: str) -> int:
    if slot is None or slot.wait is None:
        return 0
    return sum(carries((e.detail,), operation) for e in slot.wait.trace)


def test_a_command_of_an_operation_names_it_in_the_trace_entry_and_the_outcome() -> None:
    run = Run()
    run.start()
    outcome = the_outcome(run.command(core.CommandKind.CANCEL, reason="cleanup",
                                      operation_id=OPERATION))
    (entry,) = [e for e in run.wait.trace if e.event == "cancelled"]
    assert entry.detail == f"cleanup (by olga, operation {OPERATION})"
    assert entry in outcome.trace
    # The outcome's operator and reason stay the operator's own words.
    assert (outcome.operator, outcome.operator_reason) == ("olga", "cleanup")


def test_a_second_command_of_the_same_operation_is_refused_and_moves_nothing() -> None:
    run = Run()
    run.start()
    run.command(core.CommandKind.RESCHEDULE, move_by="PT1H", operation_id=OPERATION)
    moved = run.due(core.TimerKind.DEADLINE)
    run.advance(MINUTE)
    reject = the_reject(run.command(core.CommandKind.RESCHEDULE, move_by="PT1H",
                                    operation_id=OPERATION))
    assert reject.reason is core.RejectReason.DUPLICATE
    assert OPERATION in reject.detail and "RESCHEDULE does nothing" in reject.detail
    assert run.due(core.TimerKind.DEADLINE) == moved  # not two hours later
    assert _marks(run.slot, OPERATION) == 1
    # Another operation (or a command of its own) still applies.
    assert not rejects(run.command(core.CommandKind.RESCHEDULE, move_by="PT1H",
                                   operation_id="other-op"))
    assert run.due(core.TimerKind.DEADLINE) == moved + HOUR


def test_a_repeated_cancel_of_an_operation_says_duplicate_rather_than_late() -> None:
    run = Run()
    run.start()
    run.command(core.CommandKind.CANCEL, reason="cleanup", operation_id=OPERATION)
    assert the_reject(run.command(core.CommandKind.CANCEL, reason="cleanup",
                                  operation_id=OPERATION)).reason is core.RejectReason.DUPLICATE
    # A plain cancel of the finished wait is late, as before.
    assert the_reject(run.command(core.CommandKind.CANCEL)).reason is core.RejectReason.LATE


@pytest.mark.parametrize("bad", ["", "has space", "x)", "a,b", "é", "x" * 65])
def test_a_malformed_operation_id_is_refused_as_an_invalid_command(bad: str) -> None:
    run = Run()
    run.start()
    before = run.wait
    reject = the_reject(run.command(core.CommandKind.SUSPEND, reason="r", operation_id=bad))
    assert reject.reason is core.RejectReason.INVALID_COMMAND
    assert "operationId" in reject.detail
    assert run.wait == before
    assert operation_id_problem(bad) is not None


def test_a_command_of_an_operation_held_before_its_request_keeps_its_id() -> None:
    run = Run()
    run.command(core.CommandKind.SUSPEND, reason="audit", operation_id=OPERATION)
    assert run.slot is not None
    assert core.decode_slot(core.encode_slot(run.slot)) == run.slot
    run.start()
    assert run.wait.status is core.WaitStatus.SUSPENDED
    assert _marks(run.slot, OPERATION) == 1


def test_the_mark_is_found_only_as_the_end_of_an_entry() -> None:
    assert by("r", "ann", "op-1") == "r (by ann, operation op-1)"
    assert carries(["r (by ann, operation op-1)"], "op-1")
    assert not carries(["r (by ann, operation op-12)"], "op-1")
    assert not carries(["operation op-1) typed as a reason (by ann)"], "op-1")
    assert not carries(["r (by ann)"], "op-1")


BULK = [core.CommandKind.SUSPEND, core.CommandKind.RESUME, core.CommandKind.CANCEL,
        core.CommandKind.RESCHEDULE, core.CommandKind.MIGRATE]


def _unmarked(slot: core.Slot | None, operation: str) -> core.Slot | None:
    """`slot` as if its commands had carried no operation id."""
    if slot is None:
        return None
    held = tuple(dataclasses.replace(h, command=dataclasses.replace(h.command,
                                                                   operation_id=None))
                 for h in slot.early_commands)
    wait = slot.wait
    if wait is not None:
        trace = tuple(dataclasses.replace(
            e, detail=e.detail.replace(f", operation {operation})", ")")) for e in wait.trace)
        wait = dataclasses.replace(wait, trace=trace)
    return dataclasses.replace(slot, wait=wait, early_commands=held)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program, st.lists(op, max_size=20),
       st.lists(st.tuples(st.integers(0, 25), st.sampled_from(BULK),
                          st.sampled_from(["PT1H", "-PT30M"])), min_size=1, max_size=4))
def test_a_wait_takes_an_operation_s_command_once_and_otherwise_as_if_it_had_no_id(
    case: tuple[str, list[tuple[object, ...]]], more: list[tuple[object, ...]],
    sends: list[tuple[int, core.CommandKind, str]],
) -> None:
    """Whatever the wait goes through, and however often an operation's command reaches it
    (a re-run after a crash sends again what may still be in flight): while the kept trace
    names the operation, its command is refused as duplicate and changes nothing; otherwise
    it does exactly what the same command without an operation id does, and its trace entry
    names the operation.  The wait's trace never names one operation twice."""
    definition, ops = case
    steps: list[tuple[object, ...]] = [*ops, *_expand(more)]
    for at, kind, shift in sorted(sends, key=lambda s: s[0]):
        steps.insert(min(at, len(steps)), ("operation", kind, shift))
    world = World(definition)
    for step in steps:
        if step[0] != "operation":
            found = world.event_for(step)
            if found is not None:
                world.slot = decide(world.slot, found, world.now, NEWER).slot
            continue
        kind, shift = core.CommandKind(str(step[1])), str(step[2])
        fields = {"reason": "cleanup", "operator": "ann", "deadline": None,
                  "move_by": shift if kind is core.CommandKind.RESCHEDULE else None}
        plain = core.Command(KEY, kind, **fields)  # type: ignore[arg-type]
        marked = dataclasses.replace(plain, operation_id=OPERATION)
        before = None if world.slot is None else core.decode_slot(core.encode_slot(world.slot))
        taken = decide(before, marked, world.now, NEWER)
        if _marks(before, OPERATION):
            own = [e for e in taken.effects if isinstance(e, core.Reject)]
            assert [r.reason for r in own] == [core.RejectReason.DUPLICATE]
            assert taken.slot == catch_up(before, world.now, NEWER).slot
            event("refused again")
        else:
            alone = decide(before, plain, world.now, NEWER)
            assert _unmarked(taken.slot, OPERATION) == _unmarked(alone.slot, OPERATION)
            assert [type(e) for e in taken.effects] == [type(e) for e in alone.effects]
            event("taken" if _marks(taken.slot, OPERATION) else "refused or a no-op")
        assert _marks(taken.slot, OPERATION) <= 1
        world.slot = taken.slot
