"""Pausing the fetch: what is held waits while a partition waits for a topic still to come."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streams.processor.flow import may_resume, should_pause, waited_for
from streams.processor.model import InputRecord, Role
from streams.processor.sequencer import Sequencer
from streams.processor.tuning import TUNING

HELD_ENOUGH, HELD_MAX = TUNING.held_enough, TUNING.held_max

roles = st.sampled_from([Role.REQUESTS, Role.REPLIES, Role.COMMANDS, Role.TIMERS])
helds = st.integers(min_value=0, max_value=3 * HELD_MAX)


def test_a_topic_holding_enough_pauses_only_while_a_partition_waits_for_the_fetch() -> None:
    assert should_pause(HELD_ENOUGH, Role.REPLIES, waiting=True)
    assert not should_pause(HELD_ENOUGH, Role.REPLIES, waiting=False)
    assert not should_pause(HELD_ENOUGH - 1, Role.REPLIES, waiting=True)
    # The worker's own timer records are released at once: holding them is load, not order.
    assert not should_pause(HELD_ENOUGH, Role.TIMERS, waiting=True)
    assert should_pause(HELD_MAX, Role.TIMERS, waiting=False)  # memory bounds every topic


def test_a_paused_topic_resumes_at_half_what_paused_it_or_once_nothing_is_waited_for() -> None:
    assert not may_resume(HELD_ENOUGH // 2, Role.REPLIES, waiting=True)
    assert may_resume(HELD_ENOUGH // 2 - 1, Role.REPLIES, waiting=True)
    assert may_resume(HELD_ENOUGH, Role.REPLIES, waiting=False)
    assert not may_resume(HELD_MAX // 2, Role.REPLIES, waiting=False)


@given(held=helds, role=roles, waiting=st.booleans())
def test_what_pauses_is_not_resumed_at_once_and_an_empty_topic_always_fetches(
        held: int, role: Role, waiting: bool) -> None:
    if should_pause(held, role, waiting):
        assert not may_resume(held, role, waiting)
    # The topic a partition waits for holds nothing: it is never paused and
    # always resumed, so pausing the others can never stall the partition.
    assert not should_pause(0, role, waiting)
    assert may_resume(0, role, waiting)


def test_partitions_wait_while_one_of_them_waits_for_the_fetch() -> None:
    seq = Sequencer()
    for p in (0, 1):
        seq.assign(p, {r: 0 for r in Role}, stream_time=0)
    seq.add(InputRecord(Role.REQUESTS, "x.requests", 1, 0, b"k", b"v", 1_000, True), wall_ms=0)
    seq.probed(2_000, [(Role.REQUESTS, 1, 1), (Role.REPLIES, 1, 4), (Role.COMMANDS, 1, 0),
                       (Role.REQUESTS, 0, 0), (Role.REPLIES, 0, 0), (Role.COMMANDS, 0, 0)])
    assert waited_for(seq, [0, 1])
    assert not waited_for(seq, [0])
