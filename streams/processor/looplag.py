"""How late the event loop runs what is due: the worker's own stall detector.

Everything of a worker but librdkafka's threads runs on one asyncio loop;
a callback that holds it (a long batch, a synchronous RocksDB write, a
garbage-collector pass) delays every other: the stream clock's tick, the
applier's next batch, the web API.  faust's "Timer livelock" warnings were
the only sign of it, and they say nothing of how often or how long.  A task
sleeps `interval_s` again and again and records by how much each sleep
overran: the loop's lag.  Per window of `window_s`, its p99 and maximum are
kept for /xwait/stats and /metrics, and the worst since the start.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from streams.processor.tuning import TUNING


class LoopLag:
    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 interval_s: float = TUNING.loop_lag_interval_s,
                 window_s: float = TUNING.loop_lag_window_s) -> None:
        self._clock = clock
        self.interval_s = interval_s
        self.window_s = window_s
        self._samples: list[float] = []
        self._window_started = self._clock()
        self.p99_ms = 0.0  # of the last complete window
        self.max_ms = 0.0  # of the last complete window
        self.worst_ms = 0.0  # since the start
        self.windows = 0

    def add(self, lag_ms: float) -> None:
        """One sample; closes the window once `window_s` has passed."""
        self._samples.append(lag_ms)
        if lag_ms > self.worst_ms:
            self.worst_ms = lag_ms
        now = self._clock()
        if now - self._window_started >= self.window_s:
            samples = sorted(self._samples)
            self.p99_ms = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
            self.max_ms = samples[-1]
            self.windows += 1
            self._samples = []
            self._window_started = now

    async def run(self) -> None:
        clock = self._clock
        while True:
            started = clock()
            await asyncio.sleep(self.interval_s)
            self.add(max(0.0, (clock() - started - self.interval_s) * 1000))

    def summary(self) -> dict[str, float]:
        return {"p99_5s": round(self.p99_ms, 1), "max_5s": round(self.max_ms, 1),
                "max": round(self.worst_ms, 1)}


__all__ = ["LoopLag"]
