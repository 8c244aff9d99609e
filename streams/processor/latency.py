"""How long records take through a worker, by stage, over the last few thousand.

    taken     append time -> taken from the fetch (the fetch and faust's queue)
    released  append time -> released by the sequencer (waiting for older input)
    durable   append time -> its batch committed (what a downstream consumer waits)
    commit    one batch's commit: outputs and changelog acknowledged, RocksDB written
    tick      one stream clock tick: the end-offset probe (stream time of quiet partitions)
    scan_us   taking what is due from the stored timer index before a batch, in microseconds
    gc_us     one pass of Python's cyclic garbage collector, in microseconds
              (streams.processor.collector; workers started by `xwait worker`)

Only records stamped by the broker (LogAppendTime) count: a producer's clock
says nothing about the worker.  Read in /xwait/stats (p50, p99, max).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from streams.processor.tuning import TUNING

STAGES = ("taken", "released", "durable", "commit", "tick", "scan_us", "gc_us")


class Latencies:
    def __init__(self, window: int = TUNING.latency_window) -> None:
        """`window`: samples kept per stage (`Tuning.latency_window`)."""
        self._samples: dict[str, deque[int]] = {s: deque(maxlen=window) for s in STAGES}

    def add(self, stage: str, ms: int) -> None:
        self._samples[stage].append(max(0, ms))

    def add_all(self, stage: str, values: Iterable[int]) -> None:
        samples = self._samples[stage]
        samples.extend(max(0, v) for v in values)

    def summary(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for stage, samples in self._samples.items():
            if not samples:
                continue
            ordered = sorted(samples)
            n = len(ordered)
            out[stage] = {"n": n, "p50": ordered[n // 2], "p99": ordered[min(n - 1, n * 99 // 100)],
                          "max": ordered[-1]}
        return out


__all__ = ["STAGES", "Latencies"]
