"""A stalled input range is read beside the applier, not in its way.

A topic-partition behind its probed end offset for STUCK_S is read directly
(`Intake._unstick`).  Its leader may be a broker that just died: the read then
waits until another leader is elected (about 9 s by default).  The applier
calls the housekeeping that starts the read, so it must not wait for it, or
every partition of the worker stands still meanwhile.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from typing import Any

import pytest

from streams.processor import intake as intake_module
from streams.processor.inputs import InputGate
from streams.processor.intake import Intake
from streams.processor.latency import Latencies
from streams.processor.model import INPUT_ROLES, InputRecord, Role
from streams.processor.sequencer import Sequencer

TOPICS = {role: f"x.{role.value}" for role in Role}
PART = 0


class Reader:
    """The input reader's surface the housekeeping touches."""

    def pause(self, topic: str, partition: int) -> None:
        pass

    def resume(self, topic: str, partition: int) -> None:
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


def test_a_stalled_range_whose_leader_is_away_does_not_hold_the_housekeeping(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(intake_module, "STUCK_S", 0.0)
    gaps = DeadLeaderGaps()
    gate, sequencer = InputGate(), Sequencer()
    start = {role: 0 for role in INPUT_ROLES}
    gate.assign(PART, start)
    sequencer.assign(PART, start, 0)

    async def fail(exc: BaseException, what: str) -> None:
        raise AssertionError(f"{what}: {exc}")

    intake = Intake(port(Reader()), port(gaps), gate, sequencer, TOPICS, Counter(),
                    Latencies(), asyncio.Event(), fail)
    # The last probe saw five replies the fetch has not delivered.
    sequencer.probed(900, [(Role.REQUESTS, PART, 0), (Role.REPLIES, PART, 5),
                           (Role.COMMANDS, PART, 0)])

    async def run() -> None:
        await intake.housekeep()  # notes since when it is behind
        started = time.monotonic()
        await intake.housekeep()  # starts the direct read
        await intake.housekeep()  # one read at a time: no second one
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
