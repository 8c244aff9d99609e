"""Commands fail within seconds, in one line, with their exit code, when Kafka or a port is missing.

Before: `topics describe|create` took 15 s and printed ~290 lines of librdkafka
retries; a worker with the broker down or its web port taken died with a
35-line traceback and exit 1.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streams.cli import main

XWAIT = Path(sys.executable).parent / "xwait"


@pytest.mark.parametrize("command", ["describe", "create"])
def test_topics_against_a_broker_that_is_down_exit_3_in_one_line_within_seconds(
    command: str, capfd: pytest.CaptureFixture[str],
) -> None:
    began = time.monotonic()
    code = main(["topics", command, "--bootstrap", "127.0.0.1:1", "--prefix", "down"])
    took = time.monotonic() - began
    captured = capfd.readouterr()  # file descriptors: librdkafka would write to fd 2 itself
    assert code == 3
    assert took < 8
    assert captured.err.startswith("xwait: Kafka unreachable: 127.0.0.1:1 did not answer")
    assert len(captured.err.strip().splitlines()) == 1
    assert captured.out == ""


def _worker(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(XWAIT), "worker"], capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "XWAIT_DATA_DIR": str(tmp_path / "data"), **env})


@pytest.mark.slow
def test_a_worker_with_the_broker_down_exits_3_in_one_line(tmp_path: Path) -> None:
    began = time.monotonic()
    done = _worker({"XWAIT_BOOTSTRAP": "127.0.0.1:1", "XWAIT_TOPIC_PREFIX": "down"}, tmp_path)
    assert done.returncode == 3, done.stderr
    assert time.monotonic() - began < 15
    assert done.stderr.startswith("xwait: Kafka unreachable: 127.0.0.1:1 did not answer")
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.slow
@pytest.mark.kafka
def test_a_worker_whose_web_port_is_taken_exits_2_in_one_line(
    kafka_bootstrap: str, tmp_path: Path,
) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        done = _worker({"XWAIT_BOOTSTRAP": kafka_bootstrap, "XWAIT_TOPIC_PREFIX": "portcheck",
                        "XWAIT_WEB_PORT": str(port)}, tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        f"xwait: configuration error: Expected web port {port} on 127.0.0.1 to be free, but "
        "another process listens there; choose another with --web-port or XWAIT_WEB_PORT")


def test_a_healthy_first_start_logs_no_error_for_the_coordinator_that_is_still_loading(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # What aiokafka logs (at ERROR, then retries and succeeds) when a group's first
    # start finds its coordinator not yet loaded; seen on every fresh broker.
    from aiokafka.errors import GroupCoordinatorNotAvailableError

    from streams.cli.worker import NOISY_LOGGERS, ExpectedNoise

    assert "aiokafka.consumer.group_coordinator" in NOISY_LOGGERS  # prepare() filters it
    noise = ExpectedNoise()
    logger = logging.getLogger("aiokafka.consumer.group_coordinator")
    logger.addFilter(noise)
    try:
        with caplog.at_level(logging.INFO, logger="aiokafka"):
            logger.error("Group Coordinator Request failed: %s",
                         GroupCoordinatorNotAvailableError())
            logger.error("Heartbeat failed: %r", "a real problem")
    finally:
        logger.removeFilter(noise)
    assert [r.getMessage() for r in caplog.records] == ["Heartbeat failed: 'a real problem'"]
