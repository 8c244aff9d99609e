"""docker-compose.yml stays runnable where a Docker engine exists."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

COMPOSE = Path(__file__).resolve().parent.parent / "docker-compose.yml"


def _compose_available() -> bool:
    if not shutil.which("docker"):
        return False
    probe = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
    return probe.returncode == 0


@pytest.mark.skipif(not _compose_available(), reason="no `docker compose` client here")
def test_docker_compose_config_parses() -> None:
    result = subprocess.run(["docker", "compose", "-f", str(COMPOSE), "config", "-q"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_compose_broker_sets_everything_a_single_node_kraft_broker_needs() -> None:
    # The apache/kafka image drops all its defaults once any KAFKA_* is set.
    env = yaml.safe_load(COMPOSE.read_text())["services"]["kafka"]["environment"]
    for required in ("KAFKA_NODE_ID", "KAFKA_PROCESS_ROLES", "KAFKA_LISTENERS",
                     "KAFKA_ADVERTISED_LISTENERS", "KAFKA_CONTROLLER_QUORUM_VOTERS",
                     "KAFKA_CONTROLLER_LISTENER_NAMES", "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP",
                     "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR",
                     "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
                     "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"):
        assert required in env, f"{required} missing from the kafka service"
    worker = yaml.safe_load(COMPOSE.read_text())["services"]["worker"]
    assert worker["environment"]["XWAIT_BOOTSTRAP"] == "kafka:19092"
