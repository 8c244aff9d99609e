"""`/healthz` and `/readyz`: what an orchestrator asks a worker before it kills or trusts it.

    GET /healthz   200 while the process serves and its event loop turns; 503 when the
                   loop was held longer than LOOP_STALL_S (or its heartbeat ended)
    GET /readyz    200 once the worker has taken its assigned partitions over and caught
                   up with their input (each input partition at most XWAIT_READY_MAX_LAG
                   records behind); 503 with the reasons while it has not

Liveness is the loop, not the partitions: a worker that owns nothing (more
workers than partitions) or waits for a rebalance is alive, and killing it
would only start another rebalance.  A loop held for seconds shows twice: the
probe itself is answered late (an orchestrator's probe time-out), and a
heartbeat task that should run every BEAT_S finds, when it finally runs, how
long it was held; the handler reports the time since that task last ran.

Readiness latches: once caught up after a takeover, the worker stays ready
until its partitions move again, so a burst of input does not take every
worker out of a Service at once; a new assignment makes it prove it again.
Both read only what `ConsoleHost` offers (`ready`, `owned_partitions()`,
`input_lag()`); neither needs a token (they carry counts, no keys).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from streams.console.host import ConsoleHost

# How often the heartbeat task runs: a tenth of a second of loop time per
# minute, and a held loop is seen to within a second.
BEAT_S = 1.0
# A loop held longer than this is not coming back by itself: /healthz says 503
# and an orchestrator restarts the worker (after its own failure threshold).
# The longest holds measured on an overloaded 2-core machine were 7-9 s (faust's
# "Timer livelock" warnings at 500 waits/s); shorter would restart workers that
# are merely slow, and every restart moves partitions and adds load.
LOOP_STALL_S = 30.0


class Health:
    """The heartbeat of the worker's event loop and the readiness latch."""

    def __init__(self, host: ConsoleHost, max_lag: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.host = host
        self.max_lag = max_lag
        self.clock = clock
        self.last_beat = clock()
        self.longest_hold_s = 0.0  # the longest the heartbeat was held past its time
        self.beating = False  # the heartbeat task runs
        self.caught_up = False  # since the last takeover

    def beat(self) -> None:
        """One heartbeat: note how late it came, and look at readiness."""
        now = self.clock()
        self.longest_hold_s = max(self.longest_hold_s, now - self.last_beat - BEAT_S)
        self.last_beat = now
        self.look()

    async def beat_forever(self) -> None:
        self.beating = True
        try:
            while True:
                await asyncio.sleep(BEAT_S)
                self.beat()
        finally:
            self.beating = False

    def reassigned(self) -> None:
        """Partitions moved: readiness must be shown again."""
        self.caught_up = False

    def look(self) -> list[str]:
        """Why the worker is not ready (empty: it is), updating the latch."""
        if not self.host.ready.is_set():
            self.caught_up = False
            return ["its assigned partitions are not taken over yet (starting, or a "
                    "rebalance is under way)"]
        if self.caught_up:
            return []
        behind = sorted(((lag, topic, p) for (topic, p), lag in self.host.input_lag().items()
                         if lag > self.max_lag), reverse=True)
        if behind:
            lag, topic, p = behind[0]
            return [f"catching up: {len(behind)} input partition(s) more than "
                    f"{self.max_lag} records behind (XWAIT_READY_MAX_LAG), the furthest "
                    f"{topic}[{p}] at {lag}"]
        self.caught_up = True
        return []

    def healthz(self) -> tuple[int, dict[str, Any]]:
        since = self.clock() - self.last_beat
        body: dict[str, Any] = {"sinceBeatS": round(since, 3),
                                "longestHoldS": round(self.longest_hold_s, 3)}
        if not self.beating:
            return 503, {"status": "stuck", "reason": "the event loop's heartbeat task is "
                                                       "not running", **body}
        if since > LOOP_STALL_S:
            return 503, {"status": "stuck", "reason": f"the event loop was held {since:.0f} s "
                                                       f"(more than {LOOP_STALL_S:.0f} s)",
                         **body}
        return 200, {"status": "ok", **body}

    def readyz(self) -> tuple[int, dict[str, Any]]:
        reasons = self.look()
        lag = self.host.input_lag()
        body = {"ready": not reasons, "reasons": reasons,
                "ownedPartitions": sorted(self.host.owned_partitions()),
                "maxLag": max(lag.values(), default=0), "maxLagAllowed": self.max_lag}
        return (503 if reasons else 200), body


__all__ = ["BEAT_S", "LOOP_STALL_S", "Health"]
