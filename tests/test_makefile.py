"""`make test`'s set-up installs nothing behind a person's back (issue 31)."""

from __future__ import annotations

import os
import pty
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MISSING = "CHROMIUM=/nonexistent/chromium"
SKIP_LINE = "chromium is not installed: the console's browser tests will be skipped"


def _stub_apt(tmp_path: Path) -> dict[str, str]:
    """A PATH whose apt-get (and sudo) only write down how they were called."""
    calls = tmp_path / "calls"
    for name in ("apt-get", "sudo"):
        stub = tmp_path / name
        stub.write_text(f'#!/bin/sh\necho "{name} $*" >> {calls}\n'
                        + ('exec "$@"\n' if name == "sudo" else ""))
        stub.chmod(0o755)
    return {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}


def test_at_a_terminal_a_missing_browser_is_named_not_installed(tmp_path: Path) -> None:
    env = _stub_apt(tmp_path)
    terminal, other_end = pty.openpty()
    try:
        done = subprocess.run(["make", "--no-print-directory", "browser-check", MISSING],
                              stdin=other_end, capture_output=True, text=True, cwd=REPO,
                              env=env, timeout=60, check=False)
    finally:
        os.close(other_end)
        os.close(terminal)
    assert done.returncode == 0, done.stderr
    assert SKIP_LINE in done.stdout
    assert "make browser" in done.stdout and "apt-get install chromium" in done.stdout
    assert not (tmp_path / "calls").exists(), "nothing was installed"


def test_without_a_terminal_root_installs_it_as_ci_does_and_anyone_else_is_told(
    tmp_path: Path,
) -> None:
    env = _stub_apt(tmp_path)
    done = subprocess.run(["make", "--no-print-directory", "browser-check", MISSING],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "calls").read_text() if (tmp_path / "calls").exists() else ""
    if os.geteuid() == 0:  # CI: `bash .ci/run` as root, no standard input
        assert "apt-get install -y -qq chromium" in calls
    else:
        assert SKIP_LINE in done.stdout and calls == ""
