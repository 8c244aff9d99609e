"""The loop lag monitor: p99 and max per 5-second window, and the worst since the start."""

from __future__ import annotations

import asyncio
import time

from streams.processor.looplag import LoopLag
from streams.processor.tuning import TUNING

INTERVAL_S, WINDOW_S = TUNING.loop_lag_interval_s, TUNING.loop_lag_window_s


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_window_reports_its_p99_and_max_and_the_next_starts_afresh() -> None:
    clock = Clock()
    lag = LoopLag(clock)
    for i in range(150):  # 149 quick samples and one stall of 900 ms
        clock.now += INTERVAL_S
        lag.add(900.0 if i == 50 else 1.0)
    assert lag.windows == 0  # the window is not over yet
    clock.now = WINDOW_S + 0.01
    lag.add(2.0)
    assert (lag.windows, lag.max_ms, lag.worst_ms) == (1, 900.0, 900.0)
    assert lag.p99_ms == 2.0  # one stall in 151 samples is above the 99th percentile
    clock.now = 2 * WINDOW_S + 0.02
    lag.add(3.0)
    assert (lag.max_ms, lag.p99_ms, lag.worst_ms) == (3.0, 3.0, 900.0)
    assert lag.summary() == {"p99_5s": 3.0, "max_5s": 3.0, "max": 900.0}


def test_a_callback_that_holds_the_loop_shows_as_lag() -> None:
    lag = LoopLag()

    async def scenario() -> None:
        monitor = asyncio.ensure_future(lag.run())
        await asyncio.sleep(INTERVAL_S * 2)
        time.sleep(0.2)  # a synchronous call on the loop
        await asyncio.sleep(INTERVAL_S * 2)
        monitor.cancel()

    asyncio.run(scenario())
    assert lag.worst_ms >= 150
