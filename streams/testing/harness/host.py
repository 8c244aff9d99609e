"""The machine and the code a run was measured on: beside every figure a bench writes.

Machines here differ up to four times in speed from day to day, so a figure
without the machine, its load and the commit it measured says little.
"""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
from importlib import metadata
from typing import Any

from confluent_kafka import libversion

from streams.config import REPO_ROOT

# The distributions whose versions a result names: the client, the worker's frame and stores.
DISTRIBUTIONS = ("confluent-kafka", "xwait", "faust-streaming", "aiokafka", "rocksdict",
                 "fastavro")


def _meminfo_mib() -> int | None:
    with contextlib.suppress(OSError, ValueError, IndexError), open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024)
    return None


def _cpu_model() -> str | None:
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return None


def machine() -> dict[str, Any]:
    """Host, cores, CPU, memory, platform, Python and the load average now."""
    return {"host": platform.node(), "nproc": os.cpu_count(),
            "cpu": platform.processor() or platform.machine(), "cpu_model": _cpu_model(),
            "mem_total_mib": _meminfo_mib(), "platform": platform.platform(),
            "python": platform.python_version(), "loadavg": list(os.getloadavg())}


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=REPO_ROOT,  # noqa: S603, S607 - git itself
                              capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def commit() -> str:
    """The checkout's commit, short (``unknown`` outside a git checkout)."""
    return _git("rev-parse", "--short", "HEAD") or "unknown"


def versions() -> dict[str, Any]:
    """Python, librdkafka, the distributions that matter, and the checkout's commit (full,
    with whether it had local changes)."""
    found: dict[str, Any] = {"python": platform.python_version(),
                             "librdkafka": libversion()[0]}
    for dist in DISTRIBUTIONS:
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = None
    head = _git("rev-parse", "HEAD")
    found["git_commit"] = head or None
    if head:
        found["git_dirty"] = bool(_git("status", "--porcelain", "--untracked-files=no"))
    return found


def cores(m: dict[str, Any]) -> Any:
    """The core count of a `machine()`, also from results written before it had one name
    (``cpus`` in the crash benches' files)."""
    return m.get("nproc", m.get("cpus"))


__all__ = ["commit", "cores", "machine", "versions"]
