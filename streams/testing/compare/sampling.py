"""What a comparison samples while a system runs: the CPU of its processes (`CpuSampler`),
and xwait's own view of itself from /xwait/stats (`StatsPoller`)."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from streams.testing.workers import WorkerProcess

# How often xwait's /xwait/stats is read during a run (its last answer counts).  The loop lag
# it reports is that of the last complete 5-s window, so a read every 2 s sees every window.
# Answering costs the worker's event loop (the latency summaries sort 7 x 4,096 samples): read
# every 0.5 s, it was 2.5-2.8% of the loop's thread in open runs and storms (py-spy), charged to
# xwait's CPU per event; every 2 s, a quarter of that.
STATS_POLL_S = 2.0

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# How often CpuSampler reads /proc: a process that exits between two reads loses at most
# this much of its CPU time (a drain's processor is stopped by loadgen at the end).
CPU_POLL_S = 0.2


def _cpu_ticks(pid: str) -> tuple[int, int] | None:
    """(utime + stime of every thread of the process, its start time) in clock ticks."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # after the command name, which may hold spaces
    return int(fields[11]) + int(fields[12]), int(fields[19])


class CpuSampler(threading.Thread):
    """CPU seconds (utime + stime, all threads) of the processor's processes over a run.

    The processor is whatever carries the run's prefix in its command line or environment,
    but the load generator and the kit's tools.  A process started before the sampler counts
    from the sampler's start (open runs: the load window only); one started after it, from
    its own start (drains: start-up included, see `startup_cpu_s` of the open runs).
    """

    EXCLUDE = (b"loadgen.py", b"mktopics.py")

    def __init__(self, marker: str) -> None:
        super().__init__(name="cpu-sampler", daemon=True)
        self.marker = marker.encode()
        self.base: dict[str, int] = {}
        self.last: dict[str, int] = {}
        self.names: dict[str, str] = {}
        self._done = threading.Event()
        with open("/proc/uptime", encoding="ascii") as f:
            self._born_after = int(float(f.read().split()[0]) * CLOCK_TICKS)

    def _sample(self) -> None:
        me = str(os.getpid())
        for d in Path("/proc").iterdir():
            pid = d.name
            if not pid.isdigit() or pid == me:
                continue
            if pid not in self.last:
                try:
                    cmdline = (d / "cmdline").read_bytes()
                    text = cmdline + (d / "environ").read_bytes()
                except OSError:
                    continue
                if self.marker not in text or any(x in cmdline for x in self.EXCLUDE):
                    continue
                self.names[pid] = cmdline.replace(b"\0", b" ").decode(errors="replace")[:80]
            got = _cpu_ticks(pid)
            if got is None:
                continue
            ticks, started = got
            if pid not in self.base:
                self.base[pid] = 0 if started >= self._born_after else ticks
            self.last[pid] = ticks

    @classmethod
    def since_start(cls, marker: str) -> float:
        """CPU seconds the processor's processes spent from their own starts until now."""
        sampler = cls(marker)
        sampler._born_after = 0  # every process was started after it
        sampler._sample()
        return sum(sampler.last.values()) / CLOCK_TICKS

    def run(self) -> None:
        while not self._done.is_set():
            self._sample()
            self._done.wait(CPU_POLL_S)

    def stop(self) -> float:
        """CPU seconds of the processor's processes since the start (their sum)."""
        self._sample()
        self._done.set()
        self.join(5)
        return sum(self.last[p] - self.base[p] for p in self.last) / CLOCK_TICKS


def child_stats(worker: WorkerProcess, processes: int) -> list[dict[str, Any] | None]:
    """/xwait/stats of each worker process (`xwait worker --processes N`: child i serves on
    the web port + i); None for one that does not answer."""
    return [worker.stats(i) for i in range(processes)]


RECORD_STAGES = ("taken", "released", "durable")


class StatsPoller(threading.Thread):
    """Keeps the last /xwait/stats answer of each of xwait's worker processes while they run
    (loadgen stops them), and the worst event-loop lag any reported: p99 and max of a
    5-second window (`loopLagMs`)."""

    def __init__(self, worker: WorkerProcess, processes: int = 1) -> None:
        super().__init__(name="stats-poller", daemon=True)
        self.worker = worker
        self.last: list[dict[str, Any] | None] = [None] * processes
        self.loop_lag_p99_ms: float | None = None
        self.loop_lag_max_ms: float | None = None
        # The worker's own view of a record's path (`latencyMs`, ms from its broker append):
        # fetched (`taken`), released in append order, decided and durable. Per stage the
        # worst p99 and max any answer showed (each covers the stage's last 4,096 records).
        self.stages: dict[str, dict[str, float]] = {}
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            for i, stats in enumerate(child_stats(self.worker, len(self.last))):
                if stats is None:
                    continue
                self.last[i] = stats
                lag = stats.get("loopLagMs") or {}
                if "p99_5s" in lag:
                    self.loop_lag_p99_ms = max(self.loop_lag_p99_ms or 0.0, lag["p99_5s"])
                    self.loop_lag_max_ms = max(self.loop_lag_max_ms or 0.0, lag["max_5s"])
                self._worst_stages(stats.get("latencyMs") or {})
            self._done.wait(STATS_POLL_S)

    def _worst_stages(self, latency: dict[str, Any]) -> None:
        for stage in RECORD_STAGES:
            got = latency.get(stage) or {}
            if not got.get("n"):
                continue
            worst = self.stages.setdefault(stage, {"p99": 0.0, "max": 0.0})
            for figure in ("p99", "max"):
                worst[figure] = max(worst[figure], float(got.get(figure) or 0.0))

    def stop(self) -> dict[str, Any]:
        """The counters of the last answers, summed over the processes."""
        self._done.set()
        self.join(5)
        total: dict[str, Any] = {}
        for stats in self.last:
            for name, value in (stats or {}).get("counters", {}).items():
                total[name] = total.get(name, 0) + value if isinstance(value, int) else value
        return total


def owned(worker: WorkerProcess, processes: int) -> int:
    """Partitions xwait's worker processes own between them (those that answer)."""
    return sum(len((s or {}).get("ownedPartitions", [])) for s in child_stats(worker, processes))


def startup_cpu(pid: int | None) -> float | None:
    """CPU seconds a processor spent from its start until now (it is ready, idle)."""
    got = _cpu_ticks(str(pid)) if pid is not None else None
    return None if got is None else round(got[0] / CLOCK_TICKS, 2)


__all__ = ["CLOCK_TICKS", "CPU_POLL_S", "RECORD_STAGES", "STATS_POLL_S", "CpuSampler",
           "StatsPoller", "child_stats", "owned", "startup_cpu"]
