"""Which test runs use a broker, so that the run that launched it stops it after the last.

Two checkouts' `make test` side by side share the broker on one port: the
first to ask launches it, the other finds it answering and reuses it.  The
launcher used to stop it when its own run ended, while the other run still
had tests to go (every one of them then lost its broker).  Now each run
registers in a folder of the machine's temporary directory shared by every
checkout (a file per run holding its controller's pid); the launcher, at its
end, waits until no other live run is registered, then stops the broker.  A
run killed without its clean-up leaves a file whose pid is gone: it counts
for nothing.  A lock held across "does it answer / register" and "anyone
left / stop" makes the two steps exclusive: a run arriving while the broker
is being stopped waits, then finds none and launches its own.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

POLL_S = 2.0
"""How often a launcher waiting for other runs looks again."""


def folder(port: str, root: Path | None = None) -> Path:
    """Where the runs using the broker on `port` register (one per machine)."""
    base = Path(tempfile.gettempdir()) if root is None else root
    path = base / f"xwait-test-broker-{port}"
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def exclusive(port: str, root: Path | None = None) -> Iterator[None]:
    """Held while a run probes-and-registers, or counts-and-stops."""
    with open(folder(port, root) / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def register(port: str, run: str, pid: int, root: Path | None = None) -> None:
    """Run `run` (its controller `pid`) uses the broker on `port`; call under `exclusive`."""
    (folder(port, root) / f"run-{run}").write_text(str(pid))


def unregister(port: str, run: str, root: Path | None = None) -> None:
    (folder(port, root) / f"run-{run}").unlink(missing_ok=True)


def others(port: str, run: str, root: Path | None = None) -> list[int]:
    """The pids of the other live runs registered for `port` (stale files removed)."""
    live = []
    for entry in folder(port, root).glob("run-*"):
        if entry.name == f"run-{run}":
            continue
        try:
            pid = int(entry.read_text() or "0")
        except (OSError, ValueError):
            continue
        if _alive(pid):
            live.append(pid)
        else:
            entry.unlink(missing_ok=True)
    return sorted(live)


def stop_after_the_others(port: str, run: str, stop: Callable[[], object],
                          say: Callable[[str], None], root: Path | None = None,
                          poll_s: float = POLL_S) -> None:
    """Run `run` launched the broker on `port`: unregister, wait for every other live run
    to end, then `stop` it (with no run able to register meanwhile)."""
    unregister(port, run, root)
    told = False
    while True:
        with exclusive(port, root):
            waiting = others(port, run, root)
            if not waiting:
                stop()
                return
        if not told:
            say(f"the broker on port {port} that this run started is still used by "
                f"another test run (pid {', '.join(map(str, waiting))}): stopping it "
                "when that ends")
            told = True
        time.sleep(poll_s)


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    return True


__all__ = ["exclusive", "folder", "others", "register", "stop_after_the_others",
           "unregister"]
