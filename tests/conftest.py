"""Shared fixtures: the real Kafka broker, and an isolated topic prefix per test.

The broker comes from `scripts/kafka`, the same script a user runs: a broker
already answering on XWAIT_KAFKA_PORT (default 9092) is reused, otherwise one
is started for the session and stopped at its end.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from streams.config import Settings

REPO = Path(__file__).resolve().parent.parent
KAFKA_SCRIPT = REPO / "scripts" / "kafka"


def _kafka(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(KAFKA_SCRIPT), *args],
        capture_output=True, text=True, check=False, timeout=300,
    )


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    port = os.environ.get("XWAIT_KAFKA_PORT", "9092")
    bootstrap = f"127.0.0.1:{port}"
    probe = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 2000})
    try:
        probe.list_topics(timeout=3)
        started = False
    except Exception:  # noqa: BLE001 - any failure means: no broker there yet
        result = _kafka("start", "--port", port)
        if result.returncode != 0:
            pytest.fail(f"scripts/kafka start failed:\n{result.stdout}\n{result.stderr}")
        started = True
    yield bootstrap
    if started:
        _kafka("stop", "--port", port)


@pytest.fixture
def settings(kafka_bootstrap: str, tmp_path: Path) -> Settings:
    """Settings with a topic prefix of its own, so tests never share topics."""
    prefix = f"t{uuid.uuid4().hex[:10]}"
    return Settings(
        bootstrap=kafka_bootstrap,
        topic_prefix=prefix,
        app_id=f"{prefix}-processor",
        partitions=4,
        data_dir=tmp_path / "data",
    )
