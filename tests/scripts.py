"""The development scripts (scripts/kafka, scripts/registry) run as a person runs them: a
process of their own, its exit status and its two outputs."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
PATH = "/usr/bin:/bin"  # no JAVA_HOME, no virtualenv: what a fresh machine has


def run(script: str, *args: str, env: dict[str, str],
        timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """scripts/<script> with `args`, in `env` only."""
    return subprocess.run([sys.executable, str(SCRIPTS / script), *args], capture_output=True,
                          text=True, env=env, timeout=timeout, check=False)


def start_on_a_taken_port(script: str, env: dict[str, str]
                          ) -> tuple[int, subprocess.CompletedProcess[str]]:
    """`start --port P` while another process listens on P: (P, what the start did)."""
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        return port, run(script, "start", "--port", str(port), env=env)


def status_and_stop(script: str, port: int, env: dict[str, str]
                    ) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    """`status` and `stop` on `port`."""
    return (run(script, "status", "--port", str(port), env=env),
            run(script, "stop", "--port", str(port), env=env))
