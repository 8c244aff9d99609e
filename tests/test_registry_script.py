"""scripts/registry's failures are clear, one line, non-zero (its success: the registry tests)."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.harness import free_port
from tests.scripts import PATH, start_on_a_taken_port, status_and_stop


def test_status_and_stop_of_a_registry_never_started_say_so(tmp_path: Path) -> None:
    port = free_port()
    status, stop = status_and_stop("registry", port, {"PATH": PATH,
                                                      "XWAIT_REGISTRY_HOME": str(tmp_path)})
    assert status.returncode == 1
    assert f"registry not running on port {port}" in status.stdout
    assert stop.returncode == 0
    assert "no registry started by this script is running" in stop.stdout


def test_start_fails_in_one_line_when_the_port_is_taken(tmp_path: Path) -> None:
    port, result = start_on_a_taken_port("registry", {"PATH": PATH,
                                                      "XWAIT_REGISTRY_HOME": str(tmp_path)})
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"scripts/registry: error: port {port} on 127.0.0.1 is taken by another process; "
        "choose another with --port or XWAIT_REGISTRY_PORT"]
