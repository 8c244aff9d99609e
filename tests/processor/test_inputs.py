"""The input gate: each offset taken once, and never one passed over unread."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streams.processor.inputs import InputGate, Verdict
from streams.processor.model import INPUT_ROLES, InputRecord, Role

R = Role.REQUESTS


def _gate(start: int = 0) -> InputGate:
    gate = InputGate()
    gate.assign(0, dict.fromkeys(INPUT_ROLES, start))
    return gate


def _records(start: int, stop: int) -> list[InputRecord]:
    return [InputRecord(R, "x.requests", 0, o, b"k", b"v") for o in range(start, stop)]


def test_a_read_from_the_expected_offset_is_taken_whole() -> None:
    gate = _gate(10)
    taken = gate.read_directly(R, 0, 10, 15, _records(10, 15))
    assert [r.offset for r in taken or ()] == [10, 11, 12, 13, 14]
    assert gate.expected(R, 0) == 15


def test_what_was_taken_meanwhile_is_not_taken_again() -> None:
    gate = _gate(10)
    gate.advance(R, 0, 11)  # 10 and 11 came through the fetch while the read ran
    taken = gate.read_directly(R, 0, 10, 15, _records(10, 15))
    assert [r.offset for r in taken or ()] == [12, 13, 14]
    assert gate.expected(R, 0) == 15


def test_a_read_beginning_above_the_expected_offset_is_dropped() -> None:
    """The crash run that lost 2,689 waits: a stall read chosen before a takeover
    (from offset 3561) came back after it, when the gate expected 872."""
    gate = _gate(872)
    assert gate.read_directly(R, 0, 3561, 4561, _records(3561, 4561)) is None
    assert gate.expected(R, 0) == 872
    assert gate.check(R, 0, 872) is Verdict.APPLY


def test_a_read_wholly_below_the_expected_offset_changes_nothing() -> None:
    gate = _gate(20)
    assert gate.read_directly(R, 0, 5, 10, _records(5, 10)) == []
    assert gate.expected(R, 0) == 20


def test_a_partition_not_owned_takes_nothing() -> None:
    assert InputGate().read_directly(R, 0, 0, 5, _records(0, 5)) is None


@given(st.lists(st.tuples(st.sampled_from(["fetch", "read"]), st.integers(0, 60),
                          st.integers(0, 15)), max_size=40))
def test_the_gate_never_passes_an_offset_that_was_not_taken(
        steps: list[tuple[str, int, int]]) -> None:
    """Fetched records and direct reads of any range, in any order: what was
    taken is always exactly the offsets below the expected one, each once."""
    gate = _gate(0)
    taken: list[int] = []
    for kind, start, length in steps:
        if kind == "fetch":  # a record arrives; taken only if it is the next one
            if gate.check(R, 0, start) is Verdict.APPLY:
                gate.advance(R, 0, start)
                taken.append(start)
        else:
            got = gate.read_directly(R, 0, start, start + length,
                                     _records(start, start + length))
            taken += [r.offset for r in got or ()]
        assert taken == list(range(gate.expected(R, 0) or 0))
