"""`xwait worker` processes, started and stopped the way a user (or an orchestrator) does."""

from __future__ import annotations

import fcntl
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from streams.config import Settings

XWAIT = Path(sys.executable).parent / "xwait"


# Never handed out by free_port: below, well-known services and the single broker
# (9092, its controller 10092); the default three-node cluster's block
# (`scripts/kafka start --nodes 3`: 29092-29094, controllers 1000 up) when
# it is not running yet.
LOWEST_FREE_PORT = 20000
_DEFAULT_CLUSTER_PORTS = frozenset(p + off for p in (29092, 29093, 29094) for off in (0, 1000))


def ephemeral_ports() -> range:
    """The kernel's ephemeral range (ip_local_port_range): the source ports it gives clients."""
    try:
        low, high = (int(v) for v in
                     Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999  # Linux's default
    return range(low, high + 1)


# A port handed out is claimed for this long by a file of that name here, so that
# free_port in another process (pytest-xdist's workers, a benchmark beside the
# suite) does not hand it out again before its server binds it: a port is free
# when checked, and a worker binds its web port a second or two later, a broker
# its port up to a minute later on a busy machine.  Once bound, the server holds it.
CLAIMS = Path(tempfile.gettempdir()) / f"xwait-ports-{os.getuid()}"
CLAIM_S = 300.0


def _claimable(port: int) -> bool:
    """No claim younger than CLAIM_S holds the port (an older one's server has bound
    it or never will)."""
    try:
        return time.time() - (CLAIMS / str(port)).stat().st_mtime >= CLAIM_S
    except FileNotFoundError:
        return True


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))  # no SO_REUSEADDR: a port in TIME_WAIT is taken too
        except OSError:
            return False
    return True


def _rng() -> random.Random:
    return random.Random()  # noqa: S311 - a port, not a secret


def free_port(*offsets: int) -> int:
    """A free loopback port outside the kernel's ephemeral range; with `offsets`, each
    port + offset is free and outside that range too (free_port(1): two in a row).

    Outside the ephemeral range because the tests poll a port before its server
    listens (a worker's web port, a broker's): a client connecting to a port of
    that range can be given the very same port as its own source port, and TCP
    then connects the socket to itself (the "simultaneous open").  The poller
    reads its own request back (http.client.BadStatusLine: GET /xwait/stats
    HTTP/1.1), and while it holds the port the server cannot bind it.  The
    kernel never picks a source port outside the range, so that cannot happen
    here.  A port the kernel chose (bind to port 0) is always inside it.

    Each port is claimed (CLAIMS) before it is handed out, under a lock, so that
    two processes looking at once do not both get it.
    """
    if any(off < 0 for off in offsets):
        raise ValueError(f"offsets must not be negative: {offsets}")
    span = max(offsets, default=0)
    ephemeral = ephemeral_ports()
    bases = [range(LOWEST_FREE_PORT, ephemeral.start - span),
             range(max(ephemeral.stop, LOWEST_FREE_PORT), 65536 - span)]
    total = sum(len(r) for r in bases)
    rng = _rng()
    CLAIMS.mkdir(parents=True, exist_ok=True)
    with open(CLAIMS / "lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when closed
        for _ in range(500 if total else 0):
            i = rng.randrange(total)
            port = bases[0][i] if i < len(bases[0]) else bases[1][i - len(bases[0])]
            ports = [port, *(port + off for off in offsets)]
            if (not _DEFAULT_CLUSTER_PORTS.intersection(ports) and all(map(_bindable, ports))
                    and all(map(_claimable, ports))):
                for p in ports:
                    (CLAIMS / str(p)).touch()  # a new claim, or an old one's time renewed
                return port
    raise RuntimeError(
        f"no free port (offsets {offsets}) between {LOWEST_FREE_PORT} and 65535 outside the "
        f"ephemeral range {ephemeral.start}-{ephemeral.stop - 1} (ip_local_port_range)")


KAFKA_CONTROLLER_OFFSET = 1000
"""scripts/kafka's controller listener: the broker's port + this."""


def free_broker_port() -> int:
    """A port for a broker of its own (`scripts/kafka start --port`): free, with its
    controller's port (+1000) free and within 65535 too."""
    return free_port(KAFKA_CONTROLLER_OFFSET)


def proc_status_kib(pid: int, field: str) -> int | None:
    """A ``kB`` field (VmRSS, VmHWM, ...) of /proc/<pid>/status; None once the process is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def settings_env(settings: Settings) -> dict[str, str]:
    """The XWAIT_* variables that give a worker these settings."""
    return {
        "XWAIT_BOOTSTRAP": settings.bootstrap,
        "XWAIT_TOPIC_PREFIX": settings.topic_prefix,
        "XWAIT_APP_ID": settings.app_id,
        "XWAIT_PARTITIONS": str(settings.partitions),
        "XWAIT_TOPOLOGY": str(settings.topology),
        "XWAIT_GUARANTEE": settings.guarantee.value,
        "XWAIT_TIMER_TICK": str(settings.timer_tick),
        "XWAIT_SESSION_TIMEOUT": str(settings.session_timeout),
        "XWAIT_BATCH_LINGER": str(settings.batch_linger),
        "XWAIT_COMMIT_GRACE": ("auto" if settings.commit_grace is None
                               else str(settings.commit_grace)),
        "XWAIT_CLOCK": settings.clock,
        **({"XWAIT_SCHEMA_REGISTRY_URL": settings.schema_registry_url}
           if settings.schema_registry_url else {}),
    }


def standing(stats: dict[str, Any] | None) -> dict[str, Any] | None:
    """What says where a worker stands still: its input, stream time, timers and commits."""
    if stats is None:
        return None
    keep = ("ownedPartitions", "ready", "held", "streamTime", "positions", "armedTimers",
            "timersInFlight", "latencyMs", "loopLagMs", "counters")
    return {k: stats.get(k) for k in keep}


class WorkerProcess:
    """One `xwait worker` subprocess with its own data folder and web port."""

    def __init__(self, settings: Settings, folder: Path, name: str = "w1",
                 log_level: str = "info", env: dict[str, str] | None = None,
                 command: tuple[str, ...] = (str(XWAIT), "worker")) -> None:
        self.settings = settings
        self.name = name
        self.command = command
        self.data_dir = folder / f"data-{name}"
        self.log_path = folder / f"worker-{name}.log"
        self.web_port = free_port()
        self.log_level = log_level
        self.env = env or {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at: float | None = None  # time.monotonic() of the last start

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def environment(self) -> dict[str, str]:
        """The XWAIT_* variables this worker is started with (on top of os.environ)."""
        return {**settings_env(self.settings),
                "XWAIT_DATA_DIR": str(self.data_dir), "XWAIT_WEB_PORT": str(self.web_port),
                "XWAIT_LOG_LEVEL": self.log_level, **self.env}

    def command_line(self) -> list[str]:
        """`env K=V ... <command>`: this worker, for a launcher that takes one command
        (a load generator's start command). The launcher owns that process, not this object."""
        return ["env", *(f"{k}={v}" for k, v in self.environment().items()), *self.command]

    def start(self, wait_owned: bool = True, timeout: float = 90) -> WorkerProcess:
        env = {**os.environ, **self.environment()}
        with open(self.log_path, "ab") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(list(self.command), env=env, stdout=log,  # noqa: S603
                                         stderr=subprocess.STDOUT, start_new_session=True)
        self.started_at = time.monotonic()
        if wait_owned:
            try:
                # Each partition is owned once its own restore is done: wait for all.
                self.wait_until(lambda s: bool(s["ownedPartitions"]) and s.get("ready", True),
                                timeout, "owns no partition")
            except BaseException:
                self.kill9()  # a worker that never got going must not outlive its caller
                raise
        return self

    def stats(self, child: int = 0) -> dict[str, Any] | None:
        """/xwait/stats; of child `child` under `xwait worker --processes N` (its web port
        is this one + child); None while it does not answer."""
        try:
            with urllib.request.urlopen(  # noqa: S310 - loopback test server
                f"http://127.0.0.1:{self.web_port + child}/xwait/stats", timeout=2
            ) as resp:
                data: dict[str, Any] = json.loads(resp.read())
                return data
        except (OSError, ValueError):
            return None

    def readyz(self) -> int | None:
        """The status of `GET /readyz` (200 ready, 503 not yet); None while it does not answer."""
        try:
            with urllib.request.urlopen(  # noqa: S310 - loopback test server
                f"{self.url}/readyz", timeout=2
            ) as resp:
                status: int = resp.status
                return status
        except urllib.error.HTTPError as exc:
            return exc.code
        except (OSError, ValueError):
            return None

    def wait_ready(self, timeout: float) -> float:
        """Until `/readyz` answers 200 (as an orchestrator waits); the seconds it took."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"worker {self.name} exited:\n{self.log_tail()}")
            if self.readyz() == 200:
                return time.monotonic() - started
            time.sleep(0.2)
        raise AssertionError(f"worker {self.name} not ready after {timeout}s:\n"
                             f"{self.log_tail()}")

    def counter(self, name: str) -> int:
        """One of the worker's `/xwait/stats` counters; 0 while it does not answer."""
        stats = self.stats()
        return 0 if stats is None else int(stats.get("counters", {}).get(name, 0))

    def wait_until(self, check: Callable[[dict[str, Any]], bool], timeout: float,
                   what: str) -> dict[str, Any]:
        """Until `check(stats)` holds.  Otherwise the error says where the worker stood
        (`standing`), and its threads' stacks go to its log: a worker that took a
        partition over in a busy run then decided nothing for 60 s, and its log, at
        INFO, said nothing of why."""
        deadline = time.monotonic() + timeout
        stats = None
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"worker {self.name} exited:\n{self.log_tail()}")
            stats = self.stats()
            if stats is not None and check(stats):
                return stats
            time.sleep(0.3)
        self.dump_threads()
        raise AssertionError(f"worker {self.name} {what} after {timeout}s; it stood at "
                             f"{json.dumps(standing(stats))}; its threads are in "
                             f"{self.log_path}:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return "(no log)"
        text = self.log_path.read_bytes().decode(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 30) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill9()

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def dump_threads(self) -> None:
        """SIGUSR1: the worker writes every thread's stack to its log and goes on."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGUSR1)

    def freeze(self) -> None:
        """SIGSTOP: the worker holds still (no fetch, no heartbeat) while input piles up."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGCONT)

    def wipe(self) -> None:
        """Forget the worker's disk: the next start restores from the changelog."""
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def rss_kib(self) -> int | None:
        """Resident memory now (VmRSS), KiB; None when not running."""
        return None if self.proc is None else proc_status_kib(self.proc.pid, "VmRSS")

    def peak_rss_kib(self) -> int | None:
        """The highest resident memory so far (VmHWM), KiB; None when not running."""
        return None if self.proc is None else proc_status_kib(self.proc.pid, "VmHWM")


__all__ = ["KAFKA_CONTROLLER_OFFSET", "XWAIT", "WorkerProcess", "ephemeral_ports",
           "free_broker_port", "free_port", "proc_status_kib", "settings_env"]
