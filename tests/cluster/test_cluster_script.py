"""`scripts/kafka --nodes 3`: a cluster whose nodes a test can kill, wipe and start again."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from tests.cluster.conftest import KafkaCluster

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def test_three_nodes_answer_and_agree_on_one_active_controller(
    kafka_cluster: KafkaCluster,
) -> None:
    info = kafka_cluster.status()
    assert [n["brokersSeen"] for n in info["nodes"].values()] == [[1, 2, 3]] * 3
    assert info["controller"] in (1, 2, 3)
    assert info["bootstrap"] == kafka_cluster.bootstrap
    for node in info["nodes"].values():
        assert node["data"].startswith(str(kafka_cluster.home / f"cluster-{kafka_cluster.base}"))


def test_killing_the_controller_elects_another_and_the_node_comes_back(
    kafka_cluster: KafkaCluster,
) -> None:
    old = kafka_cluster.controller()
    assert "killed" in kafka_cluster.run("kill", str(old))
    info = kafka_cluster.status()
    assert info["nodes"][str(old)]["pid"] is None
    # The two survivors are a majority of the three voters: they elect one of them
    # (once the old leader's fetch timeout has passed, seconds).
    deadline = time.monotonic() + 60
    while (new := kafka_cluster.controller()) == old and time.monotonic() < deadline:
        time.sleep(0.5)
    assert new != old
    kafka_cluster.run("start", str(old))
    kafka_cluster.wait_whole()


def test_a_wiped_node_rejoins_with_the_clusters_id_and_catches_its_replicas_up(
    kafka_cluster: KafkaCluster,
) -> None:
    topic = f"wipe-{uuid.uuid4().hex[:8]}"
    admin = kafka_cluster.admin()
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap, "acks": "all"})
    for i in range(300):
        producer.produce(topic, value=str(i).encode(), partition=i % 3)
    assert producer.flush(30) == 0

    wiped = 2
    kafka_cluster.run("kill", str(wiped))
    refused = kafka_cluster.script("wipe", str(wiped))
    assert refused.returncode == 0, refused.stderr
    data = kafka_cluster.home / f"cluster-{kafka_cluster.base}" / f"node-{wiped}" / "data"
    assert not data.exists()
    kafka_cluster.run("start", str(wiped))
    kafka_cluster.wait_whole()
    meta = admin.list_topics(topic, timeout=15).topics[topic]
    assert all(wiped in p.isrs for p in meta.partitions.values()), "its replicas are back"
    saved = json.loads((data.parent.parent / "cluster.json").read_text())
    assert f"cluster.id={saved['clusterId']}" in (data / "meta.properties").read_text()
    admin.delete_topics([topic])


def test_wiping_a_running_node_is_refused(kafka_cluster: KafkaCluster) -> None:
    done = kafka_cluster.script("wipe", "1")
    assert done.returncode == 1
    assert "is running" in done.stderr and "stop or kill it first" in done.stderr
