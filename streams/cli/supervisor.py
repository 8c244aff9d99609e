"""`xwait worker --processes N`: N workers of one app under one supervisor process.

One worker is one Python thread deciding (its main thread at 69-100% of a
core while every other thread is under 7%), so a host with more cores runs
more workers.  The supervisor starts N `xwait worker` children with the
same settings, each with its own RocksDB folder (`<data-dir>/<i>`) and web
port (`<web-port> + i`), i = 0..N-1; they join the app's consumer group like
workers on separate hosts, and the console of any child forwards a key to
the child that owns it.

* A child that exits while the supervisor is not stopping is started again
  after a back-off (1, 2, 4 ... 30 s; back to 1 s once a child ran a minute):
  a worker exits 70 rather than go past a failure it cannot make durable,
  and 3 when the broker does not answer.  A child that exits 2 (bad
  configuration, a web port taken) would fail the same way again: the
  supervisor stops the others and exits 2.
* SIGTERM or SIGINT is passed to every child; the supervisor waits for all
  of them (each gives its partitions up first, up to the worker's
  STOP_COMMIT_WAIT_S) and kills what is left after STOP_WAIT_S.  Under
  Kubernetes, terminationGracePeriodSeconds must cover that.
* The checks a single worker makes before it starts (the broker answers,
  the web ports are free) are made once here for every child.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType

from streams.cli.worker import check_web_port
from streams.client._kafka import probe
from streams.config import LIBRDKAFKA_LOGGER, Settings
from streams.errors import ConfigError

log = logging.getLogger(__name__)

EXIT_USAGE = 2
# Back-off before a crashed child is started again, by how many times in a
# row it crashed: quick for a one-off crash, slow for one that crashes at
# start-up (each start costs the group a rebalance).
BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0)
# A child that ran this long is healthy again: its next crash starts at 1 s.
STABLE_S = 60.0
# How long the supervisor waits for its children after passing SIGTERM on:
# above the worker's STOP_COMMIT_WAIT_S (20 s, the batch it is committing),
# with time for faust to leave the group.  Then SIGKILL.
STOP_WAIT_S = 30.0
POLL_S = 0.2


@dataclass
class Child:
    index: int
    data_dir: Path
    web_port: int
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    crashes: int = 0  # in a row
    start_at: float = 0.0  # monotonic time of the next start, while waiting to restart

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def child_argv(argv: Sequence[str]) -> list[str]:
    """The `xwait` arguments without `--processes N` (a child is one worker)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == "--processes":
            skip = True
            continue
        if arg.startswith("--processes="):
            continue
        out.append(arg)
    return out


class Supervisor:
    def __init__(self, settings: Settings, argv: Sequence[str], processes: int) -> None:
        self.settings = settings
        self.argv = child_argv(argv)
        self.children = [Child(i, settings.data_dir / str(i), settings.web_port + i)
                         for i in range(processes)]
        self.stopping = False

    def check(self) -> None:
        """The broker answers (else exit 3), every child's web port is free (else exit 2)."""
        quiet, LIBRDKAFKA_LOGGER.propagate = LIBRDKAFKA_LOGGER.propagate, False
        try:
            probe(self.settings)
        finally:
            LIBRDKAFKA_LOGGER.propagate = quiet
        for child in self.children:
            check_web_port(replace(self.settings, web_port=child.web_port))

    def command(self, child: Child) -> list[str]:
        # Flags given last win: the child's own folder and port over the shared ones.
        return [sys.executable, "-m", "streams.cli", *self.argv,
                "--data-dir", str(child.data_dir), "--web-port", str(child.web_port)]

    def start(self, child: Child) -> None:
        child.data_dir.mkdir(parents=True, exist_ok=True)
        child.proc = subprocess.Popen(self.command(child))  # noqa: S603 - our own CLI
        child.started_at = time.monotonic()
        log.info("supervisor: worker started child=%d pid=%d web_port=%d data_dir=%s",
                 child.index, child.proc.pid, child.web_port, child.data_dir)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        if not self.stopping:
            log.info("supervisor: %s: stopping %d workers", signal.Signals(signum).name,
                     len(self.children))
        self.stopping = True

    def run(self) -> int:
        self.check()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        for child in self.children:
            self.start(child)
        code = 0
        while not self.stopping:
            time.sleep(POLL_S)
            for child in self.children:
                if self.stopping or child.proc is None:
                    continue
                status = child.proc.poll()
                if status is None:
                    continue
                if status == EXIT_USAGE:
                    log.error("supervisor: worker child=%d exited %d (configuration): "
                              "stopping all", child.index, status)
                    self.stopping, code = True, EXIT_USAGE
                    break
                if time.monotonic() - child.started_at >= STABLE_S:
                    child.crashes = 0
                delay = BACKOFF_S[min(child.crashes, len(BACKOFF_S) - 1)]
                child.crashes += 1
                child.start_at = time.monotonic() + delay
                log.warning("supervisor: worker child=%d pid=%d exited code=%d: starting it "
                            "again in %.0f s", child.index, child.proc.pid, status, delay)
                child.proc = None
            for child in self.children:
                if not self.stopping and child.proc is None and \
                        time.monotonic() >= child.start_at:
                    self.start(child)
        return self.stop_all(code)

    def stop_all(self, code: int) -> int:
        for child in self.children:
            if child.running:
                assert child.proc is not None  # noqa: S101 - running says so
                child.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_WAIT_S
        for child in self.children:
            if child.proc is None:
                continue
            try:
                child.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("supervisor: worker child=%d still running after %.0f s: killed",
                            child.index, STOP_WAIT_S)
                child.proc.kill()
                child.proc.wait()
                code = code or 1
        log.info("supervisor: every worker stopped")
        return code


def supervise(settings: Settings, argv: Sequence[str], processes: int) -> int:
    if processes < 1:
        raise ConfigError(f"--processes {processes}: expected 1 or more")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s",
                        force=True)
    return Supervisor(settings, argv, processes).run()


__all__ = ["BACKOFF_S", "STABLE_S", "STOP_WAIT_S", "Child", "Supervisor", "child_argv",
           "supervise"]
