"""After each assignment the member asks its assignment partitions' end offsets, one question
at a time (`streams.frame.app.LeaderCheck`).

The question is what refreshes a member's metadata that still names a former
leader (issue 48: a worker logged NotLeaderForPartitionError 975-1,773 times
after a broker freeze); tests/frame/test_faust_canary.py pins why it does, and
tests/cluster/test_cluster_freeze.py shows it on a three-node cluster.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import pytest
from faust.types import TP

from streams.frame.app import LeaderCheck

TOPIC = "app-assignment"


class _Consumer:
    """faust's consumer, as far as `LeaderCheck` uses it: `highwaters`."""

    def __init__(self) -> None:
        self.asked: list[tuple[TP, ...]] = []
        self.answer = asyncio.Event()
        self.answer.set()
        self.fail: Exception | None = None

    async def highwaters(self, *partitions: TP) -> dict[TP, int]:
        self.asked.append(partitions)
        await self.answer.wait()
        if self.fail is not None:
            raise self.fail
        return dict.fromkeys(partitions, 0)


def _tps(*partitions: int) -> set[TP]:
    return {TP(TOPIC, p) for p in partitions}


def _run(scenario: Callable[[LeaderCheck, _Consumer, Counter[str]], Awaitable[None]]) -> None:
    async def main() -> None:
        consumer = _Consumer()
        counters: Counter[str] = Counter()
        check = LeaderCheck(SimpleNamespace(consumer=consumer), counters)  # type: ignore[arg-type]
        await scenario(check, consumer, counters)

    asyncio.run(main())


async def _settled(check: LeaderCheck) -> None:
    for _ in range(100):
        await asyncio.sleep(0)
    running: Any = check._running  # noqa: SLF001 - the question in flight, if any
    if running is not None:
        await asyncio.wait_for(running, 5)


def test_after_an_assignment_the_member_asks_the_end_offsets_of_its_assignment_partitions(
) -> None:
    async def scenario(check: LeaderCheck, consumer: _Consumer, counters: Counter[str]) -> None:
        check.ask(_tps(2, 0, 1))
        await _settled(check)
        assert consumer.asked == [(TP(TOPIC, 0), TP(TOPIC, 1), TP(TOPIC, 2))]
        assert counters["assignment.leader_checks"] == 1

    _run(scenario)


def test_an_assignment_of_nothing_asks_nothing() -> None:
    async def scenario(check: LeaderCheck, consumer: _Consumer, counters: Counter[str]) -> None:
        check.ask(set())
        await _settled(check)
        assert consumer.asked == []

    _run(scenario)


def test_assignments_while_a_question_is_unanswered_ask_once_more_for_the_last_one() -> None:
    """A frozen leader holds the question (and one of the two threads that serve faust's
    consumer) for up to the request timeout: the assignments meanwhile do not take the
    other thread; the last one is asked once the first is answered."""
    async def scenario(check: LeaderCheck, consumer: _Consumer, counters: Counter[str]) -> None:
        consumer.answer.clear()
        check.ask(_tps(0, 1, 2, 3))
        for _ in range(10):
            await asyncio.sleep(0)
        check.ask(_tps(0, 1))
        check.ask(_tps(2, 3))
        for _ in range(10):
            await asyncio.sleep(0)
        assert len(consumer.asked) == 1
        consumer.answer.set()
        await _settled(check)
        assert consumer.asked == [tuple(sorted(_tps(0, 1, 2, 3))), tuple(sorted(_tps(2, 3)))]
        assert counters["assignment.leader_checks"] == 2

    _run(scenario)


def test_a_question_that_fails_is_logged_and_the_next_assignment_asks_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario(check: LeaderCheck, consumer: _Consumer, counters: Counter[str]) -> None:
        consumer.fail = TimeoutError("no answer within the request timeout")
        check.ask(_tps(0))
        await _settled(check)
        assert counters["assignment.leader_checks"] == 0
        consumer.fail = None
        check.ask(_tps(0))
        await _settled(check)
        assert len(consumer.asked) == 2
        assert counters["assignment.leader_checks"] == 1

    with caplog.at_level(logging.INFO, logger="streams.frame.app"):
        _run(scenario)
    assert "could not ask the assignment topic's end offsets" in caplog.text
