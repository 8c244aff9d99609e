"""Direct reads of input ranges run beside intake, never in its way.

A topic-partition behind its probed end offset for `Tuning.stuck_s` is read
directly (`Intake._unstick`); a range the fetch passed over (a gap) is read
before the record that revealed it.  Their leader may be a broker that just
died: the read then waits until another leader is elected (about 9 s by
default).  Neither may hold the housekeeping, or the other partitions'
records, meanwhile.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import replace
from typing import Any

from streams.processor.context import WorkerContext
from streams.processor.inputs import InputGate
from streams.processor.intake import Intake
from streams.processor.model import INPUT_ROLES, InputRecord, Role
from streams.processor.sequencer import Sequencer
from streams.processor.tuning import TUNING
from tests.processor.contexts import context

PART = 0


class Reader:
    """The input reader's surface intake touches: which partitions it pauses."""

    def __init__(self) -> None:
        self.paused: set[tuple[str, int]] = set()

    def pause(self, topic: str, partition: int) -> None:
        self.paused.add((topic, partition))

    def resume(self, topic: str, partition: int) -> None:
        self.paused.discard((topic, partition))

    def assign(self, assignment: dict[tuple[str, int], int]) -> None:
        pass


class DeadLeaderGaps:
    """Direct reads that wait until the test says another leader was elected."""

    def __init__(self) -> None:
        self.elected = threading.Event()
        self.reads: list[tuple[Role, int, int, int]] = []

    def read(self, role: Role, topic: str, partition: int, start: int, stop: int,
             limit: int | None = None) -> list[InputRecord]:
        self.reads.append((role, partition, start, stop))
        assert self.elected.wait(10), "never elected"
        return [InputRecord(role, topic, partition, o, b"k", b"{}", 1_000 + o, True)
                for o in range(start, stop)]


def port(fake: object) -> Any:
    return fake


def _ctx() -> WorkerContext:
    return context(tuning=replace(TUNING, stuck_s=0.0), topic_prefix="x")


def test_a_stalled_range_whose_leader_is_away_does_not_hold_the_housekeeping() -> None:
    gaps = DeadLeaderGaps()
    gate, sequencer = InputGate(), Sequencer()
    start = {role: 0 for role in INPUT_ROLES}
    gate.assign(PART, start)
    sequencer.assign(PART, start, 0)
    ctx = _ctx()
    intake = Intake(ctx, port(Reader()), port(gaps), gate, sequencer)
    # The last probe saw five replies the fetch has not delivered.
    sequencer.probed(900, [(Role.REQUESTS, PART, 0), (Role.REPLIES, PART, 5),
                           (Role.COMMANDS, PART, 0)])

    async def run() -> None:
        intake.housekeep()  # notes since when it is behind
        started = time.monotonic()
        intake.housekeep()  # starts the direct read
        intake.housekeep()  # one read at a time: no second one
        assert time.monotonic() - started < 1.0, "the housekeeping waited for the read"
        await asyncio.sleep(0.1)
        assert gaps.reads == [(Role.REPLIES, PART, 0, 5)]
        assert sequencer.held(PART, Role.REPLIES) == 0
        gaps.elected.set()
        for _ in range(100):
            await asyncio.sleep(0.02)
            if sequencer.held(PART, Role.REPLIES) == 5:
                break

    asyncio.run(run())
    assert sequencer.held(PART, Role.REPLIES) == 5, "the records read are taken"
    assert gate.expected(Role.REPLIES, PART) == 5


def _record(role: Role, partition: int, offset: int) -> InputRecord:
    return InputRecord(role, f"x.{role.value}", partition, offset, b"k", b"{}", 1_000 + offset,
                       True)


def test_a_gap_is_read_beside_intake_while_other_partitions_records_are_taken() -> None:
    """The fetch passed over offsets 0-2 of partition 0's replies: they are read directly
    while partition 1's records are taken; partition 0's later records wait behind the
    read, in order, and its fetch pauses meanwhile."""
    gaps = DeadLeaderGaps()
    gate, sequencer = InputGate(), Sequencer()
    start = {role: 0 for role in INPUT_ROLES}
    for p in (0, 1):
        gate.assign(p, start)
        sequencer.assign(p, start, 0)
    ctx = _ctx()
    reader = Reader()
    intake = Intake(ctx, port(reader), port(gaps), gate, sequencer)

    async def run() -> None:
        intake.offer(_record(Role.REPLIES, 0, 3))  # offsets 0-2 never came: a gap
        intake.offer(_record(Role.REPLIES, 0, 4))  # behind it
        intake.offer(_record(Role.REPLIES, 1, 0))  # another partition: taken at once
        await asyncio.sleep(0.05)
        assert gaps.reads == [(Role.REPLIES, 0, 0, 3)]
        assert sequencer.held(1, Role.REPLIES) == 1, "the gap held another partition"
        assert sequencer.held(0, Role.REPLIES) == 0
        assert ("x.replies", 0) in reader.paused, "nothing piles up behind the read"
        gaps.elected.set()
        for _ in range(100):
            await asyncio.sleep(0.02)
            if sequencer.held(0, Role.REPLIES) == 5:
                break

    asyncio.run(run())
    assert sequencer.held(0, Role.REPLIES) == 5, "the gap's records, then those behind it"
    assert gate.expected(Role.REPLIES, 0) == 5
    assert ("x.replies", 0) not in reader.paused
