"""Watching a bench's worker: its stats polled until a condition holds, its memory sampled.

A bench never sleeps a fixed time for the worker: it asks `/xwait/stats`
(`WorkerProcess.stats`) until what it waits for is true, and gives up with a
`BenchError` saying what it waited for when the worker exits, stops making
progress, or takes too long.
"""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from streams import topics
from streams.config import Settings
from streams.testing.harness import BenchError, Stopped
from streams.testing.workers import WorkerProcess, proc_status_kib

STATS_POLL_S = 0.1
RSS_SAMPLE_S = 0.5
MIB = 1024 * 1024


def check_alive(worker: WorkerProcess) -> None:
    if worker.proc is not None and worker.proc.poll() is not None:
        raise BenchError(f"worker {worker.name} exited with code {worker.proc.returncode}")


def counters(worker: WorkerProcess) -> Counter[str]:
    """The worker's counters now (empty while it does not answer)."""
    stats = worker.stats() or {}
    return Counter({k: int(v) for k, v in stats.get("counters", {}).items()})


def counter(name: str) -> Callable[[dict[str, Any] | None], int]:
    """A reader of one counter of a stats answer (0 while there is none)."""
    return lambda stats: int((stats or {}).get("counters", {}).get(name, 0))


def owned(stats: dict[str, Any] | None) -> int:
    """How many partitions a stats answer says the worker owns."""
    return len((stats or {}).get("ownedPartitions", []))


def wait_for(check: Callable[[], bool], timeout: float, what: str, worker: WorkerProcess,
             idle: Callable[[float], Any] | None = None, interval: float = STATS_POLL_S) -> float:
    """Poll `check` until true; the monotonic time it became true.  Between two polls
    `idle(interval)` (consuming outcomes, say) or a sleep."""
    deadline = time.monotonic() + timeout
    while True:
        check_alive(worker)
        if check():
            return time.monotonic()
        if time.monotonic() >= deadline:
            raise BenchError(f"timed out after {timeout:.0f}s waiting for {what}")
        if idle is not None:
            idle(interval)
        else:
            time.sleep(interval)


def watch(worker: WorkerProcess, done: Callable[[dict[str, Any] | None], bool],
          progress: Callable[[dict[str, Any] | None], Any], what: str, stall_s: float = 180.0,
          interval: float = 0.2) -> float:
    """Poll the worker's stats until `done`; fail when `progress` stops changing for
    `stall_s` (a long phase has no fixed timeout, only a stall).  The monotonic time
    `done` first held."""
    last: Any = None
    moved = time.monotonic()
    while True:
        if worker.proc is not None and worker.proc.poll() is not None:
            raise BenchError(f"worker {worker.name} exited with code "
                             f"{worker.proc.returncode} while waiting for {what}")
        stats = worker.stats()
        now = time.monotonic()
        if done(stats):
            return now
        mark = progress(stats)
        if mark != last:
            last, moved = mark, now
        elif now - moved > stall_s:
            raise BenchError(f"no progress for {stall_s:.0f}s waiting for {what} "
                             f"(last: {mark!r})")
        time.sleep(interval)


class RssSampler(threading.Thread):
    """Reads VmRSS of one pid every RSS_SAMPLE_S seconds until stopped."""

    def __init__(self, pid: int) -> None:
        super().__init__(name="rss-sampler", daemon=True)
        self.pid = pid
        self.samples: list[tuple[float, int]] = []  # (seconds since start, KiB)
        self._stop_event = threading.Event()
        self._t0 = time.monotonic()

    def run(self) -> None:
        while not self._stop_event.is_set():
            kib = proc_status_kib(self.pid, "VmRSS")
            if kib is not None:
                self.samples.append((time.monotonic() - self._t0, kib))
            self._stop_event.wait(RSS_SAMPLE_S)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(5)

    @property
    def peak_kib(self) -> int | None:
        return max((k for _, k in self.samples), default=None)


def start_worker(settings: Settings, worker: WorkerProcess) -> RssSampler:
    """Create the run's topics, start its worker, sample its RSS, and wait until the
    worker owns every partition.  The sampler is the caller's to stop."""
    topics.create(settings, topics.load_specs(settings))
    worker.start(wait_owned=False)
    assert worker.pid is not None  # noqa: S101 - set by start()
    rss = RssSampler(worker.pid)
    rss.start()
    wait_for(lambda: owned(worker.stats()) == settings.partitions, 180,
             "the worker to own every partition", worker)
    return rss


def mib(kib: int | None) -> float | None:
    return None if not kib else round(kib / 1024, 1)


def _stop(signum: int, _frame: FrameType | None) -> None:
    raise Stopped(f"signal {signum}")


@contextmanager
def stoppable() -> Iterator[None]:
    """SIGTERM raises `Stopped` inside, so that a run stopped from outside still writes
    what it measured and cleans up (as Ctrl-C does)."""
    signal.signal(signal.SIGTERM, _stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


__all__ = ["MIB", "RssSampler", "check_alive", "counter", "counters", "mib", "owned",
           "start_worker", "stoppable", "wait_for", "watch"]
