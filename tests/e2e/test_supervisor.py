"""`xwait worker --processes 2`: two workers of one app under a supervisor, end to end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streams.cli.supervisor import STOP_WAIT_S, child_argv
from streams.config import Settings
from streams.partitioning import partition_for
from tests.e2e.conftest import new_e2e
from tests.e2e.harness import XWAIT, Client, WorkerProcess, free_port, new_key
from tests.waiting import until

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _json(url: str) -> Any:
    import json

    try:
        with urllib.request.urlopen(url, timeout=3) as resp:  # noqa: S310 - loopback
            return json.loads(resp.read())
    except (OSError, ValueError):
        return None


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(c) for c in text.split()]


@pytest.fixture(scope="module")
def settings(kafka_bootstrap: str, e2e_folder: Path) -> Settings:
    return new_e2e(kafka_bootstrap, e2e_folder, "s")


@pytest.fixture(scope="module")
def supervisor(settings: Settings, e2e_folder: Path) -> Iterator[WorkerProcess]:
    sup = WorkerProcess(settings, e2e_folder, "sup",
                        command=(str(XWAIT), "worker", "--processes", "2"))
    sup.web_port = free_port(1)  # the children listen on web_port and web_port + 1
    sup.start(wait_owned=False)
    try:
        yield sup
    finally:
        sup.stop(timeout=STOP_WAIT_S + 15)


def _urls(sup: WorkerProcess) -> list[str]:
    return [f"http://127.0.0.1:{sup.web_port + i}" for i in (0, 1)]


def test_each_child_owns_partitions_in_a_folder_of_its_own_and_serves_any_key(
    supervisor: WorkerProcess, settings: Settings,
) -> None:
    urls = _urls(supervisor)

    def split() -> list[set[int]] | None:
        stats = [_json(f"{u}/xwait/stats") for u in urls]
        if all(s and len(s["ownedPartitions"]) == 2 for s in stats):
            return [set(s["ownedPartitions"]) for s in stats]
        return None

    owned = until(split, "both children to own two of the four partitions", 120, every=0.3)
    assert owned[0] | owned[1] == {0, 1, 2, 3}
    assert sorted(p.name for p in supervisor.data_dir.iterdir()) == ["0", "1"]

    key = until(lambda: k if partition_for((k := new_key()).encode(), 4) in owned[1] else None,
                "a key of the second child", 10, every=0.3)
    client = Client(settings)
    client.start(key, "slow-approval")
    client.flush()
    # Started through Kafka, read through the first child's console: it forwards the key.
    status = until(lambda: _json(f"{urls[0]}/xwait/api/waits/{key}"), "the wait via child 0",
                   60, every=0.3)
    assert status["state"] == "parked"
    assert status["worker"].endswith(str(supervisor.web_port + 1))
    assert all(_json(f"{u}/readyz")["ready"] for u in urls)


def test_a_child_killed_with_kill_9_is_started_again(supervisor: WorkerProcess) -> None:
    assert supervisor.pid is not None
    before = until(lambda: c if len(c := _children(supervisor.pid or 0)) == 2 else None,
                   "two children", 30, every=0.3)
    os.kill(before[1], signal.SIGKILL)
    after = until(lambda: c if len(c := _children(supervisor.pid or 0)) == 2
                  and before[1] not in c else None, "the killed child started again", 60,
                  every=0.3)
    assert before[0] in after, "the other child was left alone"
    url = _urls(supervisor)[1]
    until(lambda: (s := _json(f"{url}/xwait/stats")) and s["ownedPartitions"],
          "the new child to own partitions", 120, every=0.3)


def test_sigterm_to_the_supervisor_stops_every_child_and_exits_0(
    supervisor: WorkerProcess,
) -> None:
    assert supervisor.proc is not None
    children = _children(supervisor.proc.pid)
    assert len(children) == 2
    supervisor.proc.send_signal(signal.SIGTERM)  # the supervisor only, not its group
    assert supervisor.proc.wait(STOP_WAIT_S + 15) == 0
    for pid in children:
        assert not Path(f"/proc/{pid}").exists() or \
            "zombie" in Path(f"/proc/{pid}/status").read_text()
    assert "every worker stopped" in supervisor.log_tail()


def test_processes_is_removed_from_what_each_child_is_given() -> None:
    assert child_argv(["worker", "--processes", "4", "--guarantee", "exactly_once"]) == \
        ["worker", "--guarantee", "exactly_once"]
    assert child_argv(["worker", "--processes=3"]) == ["worker"]


def test_a_taken_web_port_of_any_child_is_refused_before_anything_starts(
    settings: Settings, tmp_path: Path,
) -> None:
    import socket

    base = free_port(1)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", base + 1))
        squatter.listen()
        env = {**os.environ, "XWAIT_BOOTSTRAP": settings.bootstrap,
               "XWAIT_TOPIC_PREFIX": settings.topic_prefix, "XWAIT_WEB_PORT": str(base),
               "XWAIT_DATA_DIR": str(tmp_path)}
        done = subprocess.run([sys.executable, "-m", "streams.cli", "worker", "--processes",
                               "2"], env=env, capture_output=True, text=True, timeout=60,
                              check=False)
    assert done.returncode == 2
    assert f"Expected web port {base + 1}" in done.stderr
    assert not list(tmp_path.iterdir()), "no child was started"
