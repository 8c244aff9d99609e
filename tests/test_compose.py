"""docker-compose.yml stays runnable where a Docker engine exists."""

from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

COMPOSE = Path(__file__).resolve().parent.parent / "docker-compose.yml"
DOCKERFILE = COMPOSE.with_name("Dockerfile")


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


def test_compose_keeps_the_broker_data_and_lets_workers_scale() -> None:
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    kafka = services["kafka"]
    cluster_id = kafka["environment"]["CLUSTER_ID"]
    assert len(base64.urlsafe_b64decode(cluster_id + "==")) == 16, "a Kafka Uuid"
    assert any(v.endswith(":" + kafka["environment"]["KAFKA_LOG_DIRS"])
               for v in kafka["volumes"]), "the broker's log dirs are on a named volume"
    worker = services["worker"]
    # `--scale worker=2`: no fixed host port, no data folder shared between replicas
    assert all("-" in str(p).split(":")[-2] for p in worker["ports"]), worker["ports"]
    assert worker["volumes"] == ["/data"], "an anonymous volume per replica"
    # A worker that stopped on a failure (exit code 70) is started again.
    assert worker["restart"] == "on-failure"


def test_the_image_installs_a_wheel_runs_unprivileged_and_reports_health() -> None:
    text = DOCKERFILE.read_text()
    instructions = [line.split(None, 1) for line in text.splitlines()
                    if line.strip() and not line.startswith((" ", "#"))]
    verbs = [i[0] for i in instructions]
    assert "HEALTHCHECK" in verbs
    users = [i[1] for i in instructions if i[0] == "USER"]
    assert users and users[-1] not in ("root", "0")
    assert "pip install -e" not in text and "--editable" not in text
    assert "pip wheel" in text
