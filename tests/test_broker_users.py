"""Two checkouts' test runs on one broker: the one that launched it stops it after the other.

Busy rounds of issue 49 run two clones' `make test` side by side; the run
that launched the shared broker stopped it when it ended, while the other's
tests still needed it.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from tests import broker_users

PORT = "9092"


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])


def test_the_launcher_stops_its_broker_only_once_the_other_run_has_ended(tmp_path: Path) -> None:
    other = _sleeper()
    try:
        broker_users.register(PORT, "mine", 1, tmp_path)
        broker_users.register(PORT, "theirs", other.pid, tmp_path)
        stopped, said = threading.Event(), threading.Event()
        lines: list[str] = []

        def say(line: str) -> None:
            lines.append(line)
            said.set()

        launcher = threading.Thread(target=broker_users.stop_after_the_others, args=(
            PORT, "mine", stopped.set, say, tmp_path, 0.02))
        launcher.start()
        assert said.wait(30), "the launcher says it waits"
        assert not stopped.is_set(), "stopped while another run used it"
        assert f"pid {other.pid}" in lines[0]
    finally:
        other.kill()
        other.wait()
    launcher.join(30)
    assert stopped.is_set() and not launcher.is_alive()
    assert broker_users.others(PORT, "mine", tmp_path) == []


def test_a_run_killed_without_its_clean_up_holds_nothing(tmp_path: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    broker_users.register(PORT, "killed", int(gone.stdout), tmp_path)
    stops: list[bool] = []

    broker_users.stop_after_the_others(PORT, "mine", lambda: stops.append(True),
                                       say=lambda line: None, root=tmp_path)

    assert stops == [True]
    assert not list(broker_users.folder(PORT, tmp_path).glob("run-*")), "stale file removed"


def test_a_run_arriving_while_the_broker_stops_waits_for_the_stop(tmp_path: Path) -> None:
    """It then finds no broker answering and launches its own, instead of registering
    for one about to go."""
    stopping, release = threading.Event(), threading.Event()

    def stop() -> None:
        stopping.set()
        release.wait(30)

    launcher = threading.Thread(target=broker_users.stop_after_the_others, args=(
        PORT, "mine", stop, lambda line: None, tmp_path))
    launcher.start()
    assert stopping.wait(30)
    entered = threading.Event()

    def arrive() -> None:
        with broker_users.exclusive(PORT, tmp_path):
            entered.set()

    arriving = threading.Thread(target=arrive)
    arriving.start()
    assert not entered.wait(0.5), "got in while the broker was being stopped"
    release.set()
    assert entered.wait(30)
    launcher.join(30)
    arriving.join(30)
