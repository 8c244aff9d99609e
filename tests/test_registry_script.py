"""scripts/registry's failures are clear, one line, non-zero (its success: the registry tests)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from tests.e2e.harness import free_port

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "registry"


def test_status_and_stop_of_a_registry_never_started_say_so(tmp_path: Path) -> None:
    port = str(free_port())
    env = {"PATH": "/usr/bin:/bin", "XWAIT_REGISTRY_HOME": str(tmp_path)}
    status = subprocess.run([sys.executable, str(SCRIPT), "status", "--port", port],
                            capture_output=True, text=True, env=env, check=False)
    assert status.returncode == 1
    assert f"registry not running on port {port}" in status.stdout
    stop = subprocess.run([sys.executable, str(SCRIPT), "stop", "--port", port],
                          capture_output=True, text=True, env=env, check=False)
    assert stop.returncode == 0
    assert "no registry started by this script is running" in stop.stdout


def test_start_fails_in_one_line_when_the_port_is_taken(tmp_path: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        result = subprocess.run(
            [sys.executable, str(SCRIPT), "start", "--port", str(port)],
            capture_output=True, text=True, timeout=60, check=False,
            env={"PATH": "/usr/bin:/bin", "XWAIT_REGISTRY_HOME": str(tmp_path)})
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"scripts/registry: error: port {port} on 127.0.0.1 is taken by another process; "
        "choose another with --port or XWAIT_REGISTRY_PORT"]
