"""How the worker sets Python's cyclic garbage collector, and how long its passes take.

Deciding a record allocates a few dozen short-lived objects (dataclasses,
tuples, dicts), almost none of them in reference cycles: reference counting
frees them.  With Python's default threshold (a young-generation pass every
700 net allocations) the collector still ran about once per 40 records;
every tenth pass also walked the middle generation and about every hundredth
all of them: faust's and the clients' objects, the census, the in-memory
timer index.  On the decision
path alone (bench/decide_bench.py, 17,600 records): 393 passes, the longest
48-60 ms; with a threshold of 20,000, 2 passes.  On a real worker
(compare.py, two interleaved rounds each): drain 1,772 and 1,906 events/s
with 700, 1,980 and 2,015 with 20,000; the timer storm 612 and 720
escalations/s against 756 and 764.

So the worker (1) freezes what exists once it is built (modules, the app,
its services: alive for the process's life, no use scanning them again), and
(2) raises the young-generation threshold (`XWAIT_GC_THRESHOLD`).  Cyclic
garbage is still collected, only in fewer, larger passes.  `GcWatch` times
every pass, so an operator sees in /xwait/stats what the collector costs.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from streams.processor.latency import Latencies


def tune(threshold: int) -> None:
    """Freeze the objects alive now and set the young-generation threshold.

    Call once the worker's app is built and before it runs: what is frozen is
    never scanned again (nor collected, should it become cyclic garbage), so
    only what lives as long as the process belongs there.  The older
    generations keep Python's ratios (a pass of each every tenth pass of the
    one below it).  No collection first: on a worker about to run a drain it
    took 104 ms of every start and found 81 unreachable objects among 84,150
    to spare from the freeze.
    """
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(threshold, older, oldest)


class GcWatch:
    """Times each collector pass into a `Latencies` stage (``gc_us``) and counts them.

    The callback is process-wide: `install` adds one per watch and `remove`
    takes it away (tests build several workers in one process).
    """

    def __init__(self, latency: Latencies) -> None:
        self.latency = latency
        self.passes = [0, 0, 0]  # per generation
        self._started = 0.0

    def install(self) -> None:
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)

    def remove(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        self.passes[info["generation"]] += 1
        self.latency.add("gc_us", round((time.perf_counter() - self._started) * 1e6))


__all__ = ["GcWatch", "tune"]
