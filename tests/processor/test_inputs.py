"""The input gate: each offset taken once, and never one passed over unread."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streams.processor.inputs import MARKERS_MAX, InputGate, Verdict
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


def test_a_record_after_offsets_the_fetch_passed_over_is_the_next_one() -> None:
    gate = _gate(10)
    # librdkafka delivered 9, then 11: offset 10 is a transaction marker.
    assert gate.check(R, 0, 11, follows=10) is Verdict.APPLY
    assert gate.check(R, 0, 10 + MARKERS_MAX, follows=10) is Verdict.APPLY


def test_the_fetchs_word_is_not_taken_for_a_long_run_or_one_beginning_above() -> None:
    gate = _gate(10)
    assert gate.check(R, 0, 11 + MARKERS_MAX, follows=10) is Verdict.GAP  # read it directly
    assert gate.check(R, 0, 14, follows=12) is Verdict.GAP  # 10 and 11 were never delivered
    assert gate.check(R, 0, 14) is Verdict.GAP  # a run's first record claims nothing


def test_a_passed_range_moves_the_expected_offset_only_when_it_covers_it() -> None:
    gate = _gate(10)
    assert not gate.passed(R, 0, 11, 13)  # 10 itself is not covered
    assert not gate.passed(R, 0, 10, 11 + MARKERS_MAX)
    assert not gate.passed(R, 0, 5, 9)  # wholly below: taken already
    assert gate.expected(R, 0) == 10
    assert gate.passed(R, 0, 9, 12) == 2  # offsets 10 and 11
    assert gate.expected(R, 0) == 12
    assert not InputGate().passed(R, 0, 0, 1)  # a partition not owned


@given(log=st.lists(st.booleans(), min_size=1, max_size=60),
       restarts=st.lists(st.integers(min_value=0, max_value=59), max_size=4),
       unseen=st.lists(st.integers(min_value=0, max_value=59), max_size=4))
def test_what_the_fetch_passes_over_never_hides_a_record(
        log: list[bool], restarts: list[int], unseen: list[int]) -> None:
    """A log of records and markers (False), fetched in order with runs cut anywhere
    (a pause, an assignment), some records delivered but never offered (fetched for an
    assignment given up meanwhile), gaps read directly: every record is taken once, in order."""
    records = [o for o, is_record in enumerate(log) if is_record]
    gate = _gate(0)
    taken: list[int] = []
    at: int | None = None
    for offset in records:
        if offset in restarts:
            at = None  # a new run: the first record claims nothing
        if offset in unseen:
            at = offset + 1
            continue
        verdict = gate.check(R, 0, offset, follows=at)
        if verdict is Verdict.GAP:
            want = gate.expected(R, 0) or 0
            found = [r for r in _records(want, offset) if log[r.offset]]
            taken += [r.offset for r in gate.read_directly(R, 0, want, offset, found) or ()]
            verdict = gate.check(R, 0, offset)
        if verdict is Verdict.APPLY:
            gate.advance(R, 0, offset)
            taken.append(offset)
        at = offset + 1
    if at is not None:
        gate.passed(R, 0, at, len(log))  # the markers after the last record
    last = gate.expected(R, 0) or 0
    found = [r for r in _records(last, len(log)) if log[r.offset]]
    taken += [r.offset for r in gate.read_directly(R, 0, last, len(log), found) or ()]
    assert taken == records
    assert gate.expected(R, 0) == len(log)
