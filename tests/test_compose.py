"""docker-compose.yml stays runnable where a Docker engine exists."""

from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path
from typing import Any

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


BROKERS = ("kafka-1", "kafka-2", "kafka-3")


def _services() -> dict[str, Any]:
    services: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())["services"]
    return services


def test_every_broker_sets_everything_a_kraft_node_needs() -> None:
    # The apache/kafka image drops all its defaults once any KAFKA_* is set.
    for name in BROKERS:
        env = _services()[name]["environment"]
        for required in ("KAFKA_NODE_ID", "KAFKA_PROCESS_ROLES", "KAFKA_LISTENERS",
                         "KAFKA_ADVERTISED_LISTENERS", "KAFKA_CONTROLLER_QUORUM_VOTERS",
                         "KAFKA_CONTROLLER_LISTENER_NAMES",
                         "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP",
                         "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR",
                         "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
                         "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"):
            assert required in env, f"{required} missing from {name}"


def test_three_brokers_form_one_quorum_with_production_replication() -> None:
    envs = [_services()[name]["environment"] for name in BROKERS]
    assert sorted(e["KAFKA_NODE_ID"] for e in envs) == ["1", "2", "3"]
    assert len({e["CLUSTER_ID"] for e in envs}) == 1, "one cluster id, formatted once"
    voters = {e["KAFKA_CONTROLLER_QUORUM_VOTERS"] for e in envs}
    assert voters == {"1@kafka-1:29093,2@kafka-2:29093,3@kafka-3:29093"}
    for e in envs:
        assert e["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"] == "3"
        assert e["KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"] == "2"
        assert e["KAFKA_MIN_INSYNC_REPLICAS"] == "2"
        assert e["KAFKA_UNCLEAN_LEADER_ELECTION_ENABLE"] == "false"
    host_ports = [_services()[name]["ports"][0] for name in BROKERS]
    assert host_ports == ["127.0.0.1:9092:9092", "127.0.0.1:9093:9093", "127.0.0.1:9094:9094"]
    for name, e in zip(BROKERS, envs, strict=True):
        assert f"PLAINTEXT://{name}:19092" in e["KAFKA_ADVERTISED_LISTENERS"]


def test_topics_and_workers_use_every_broker_and_three_replicas() -> None:
    services = _services()
    for name in ("topics", "worker"):
        env = services[name]["environment"]
        assert env["XWAIT_BOOTSTRAP"] == "kafka-1:19092,kafka-2:19092,kafka-3:19092"
        assert env["XWAIT_REPLICATION_FACTOR"] == "3"
        assert env["XWAIT_MIN_INSYNC_REPLICAS"] == "2"
    assert set(services["topics"]["depends_on"]) == set(BROKERS)


def test_compose_keeps_the_broker_data_and_runs_two_workers() -> None:
    services = _services()
    for name in BROKERS:
        kafka = services[name]
        cluster_id = kafka["environment"]["CLUSTER_ID"]
        assert len(base64.urlsafe_b64decode(cluster_id + "==")) == 16, "a Kafka Uuid"
        assert any(v.endswith(":" + kafka["environment"]["KAFKA_LOG_DIRS"])
                   for v in kafka["volumes"]), "the broker's log dirs are on a named volume"
    worker = services["worker"]
    assert worker["deploy"]["replicas"] == 2
    # `--scale worker=N`: no fixed host port, no data folder shared between replicas
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
