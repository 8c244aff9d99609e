"""`xwait topics create|describe` on a three-node cluster: replicas, min ISR, failures seen."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from confluent_kafka.admin import NewTopic

from streams import topics
from streams.cli import main
from streams.config import Settings
from tests.cluster.conftest import KafkaCluster
from tests.prefixes import unique_prefix

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _cli(settings: Settings, *args: str) -> list[str]:
    return [*args, "--json", "--bootstrap", settings.bootstrap, "--prefix",
            settings.topic_prefix, "--partitions", str(settings.partitions)]


def _describe(settings: Settings, capsys: pytest.CaptureFixture[str]) -> tuple[int, Any]:
    code = main(_cli(settings, "topics", "describe"))
    return code, json.loads(capsys.readouterr().out)


def _describe_until(settings: Settings, capsys: pytest.CaptureFixture[str],
                    done: Callable[[int, Any], bool], timeout: float = 60) -> tuple[int, Any]:
    """`topics describe` again every second until `done(code, described)`, or the timeout:
    the last answer either way (the test's own asserts say what was expected)."""
    deadline = time.monotonic() + timeout
    while True:
        code, described = _describe(settings, capsys)
        if done(code, described) or time.monotonic() > deadline:
            return code, described
        time.sleep(1)


@contextmanager
def _node_down(cluster: KafkaCluster, node: str) -> Iterator[None]:
    """The node killed for the block, then started again and the cluster whole."""
    cluster.run("kill", node)
    try:
        yield
    finally:
        cluster.run("start", node)
    cluster.wait_whole()


@pytest.fixture(autouse=True)
def _app_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XWAIT_APP_ID", raising=False)


@pytest.fixture
def settings(kafka_cluster: KafkaCluster, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Fresh topic names on the cluster, to be made with three replicas."""
    monkeypatch.setenv("XWAIT_REPLICATION_FACTOR", "3")
    prefix = unique_prefix("r")
    return Settings(bootstrap=kafka_cluster.bootstrap, topic_prefix=prefix,
                    app_id=f"{prefix}-processor", partitions=3)


def test_three_replicas_and_min_insync_two_are_created_and_described_healthy(
    settings: Settings, capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(_cli(settings, "topics", "create")) == 0
    assert json.loads(capsys.readouterr().out)["problems"] == []
    code, described = _describe(settings, capsys)
    assert code == 0, described["problems"]
    rows = described["topics"]
    assert {r["replicationFactor"] for r in rows} == {3}
    assert {r["config"]["min.insync.replicas"] for r in rows} == {"2"}
    assert all(r["underReplicated"] == [] and r["leaderless"] == [] for r in rows)


def test_a_node_down_shows_as_under_replicated_partitions_until_it_is_back(
    kafka_cluster: KafkaCluster, settings: Settings, capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(_cli(settings, "topics", "create")) == 0
    capsys.readouterr()
    with _node_down(kafka_cluster, "3"):
        # The controller shrinks the ISRs once the dead node's session expires.
        code, described = _describe_until(settings, capsys, lambda code, _: code == 1)
        assert code == 1
        assert any("under-replicated partitions 0, 1, 2" in p for p in described["problems"])
        # Still writable: two in sync is min.insync.replicas, so nothing says no leader.
        assert not any("no leader" in p for p in described["problems"])
    assert _describe(settings, capsys)[0] == 0


def test_one_replica_without_its_broker_is_a_leaderless_and_wrongly_replicated_topic(
    kafka_cluster: KafkaCluster, settings: Settings, capsys: pytest.CaptureFixture[str],
) -> None:
    replies = settings.topic("replies")
    admin = kafka_cluster.admin()
    # Made by hand, the way a default-configured tool would: one replica, on node 2.
    # (librdkafka wants the partition count beside an assignment, not the factor.)
    admin.create_topics([NewTopic(replies, settings.partitions,
                                  replica_assignment=[[2]] * settings.partitions,
                                  config={"message.timestamp.type": "LogAppendTime"})]
                        )[replies].result(timeout=30)
    topics.wait_visible(admin, [replies])
    assert main(_cli(settings, "topics", "create")) == 1
    problems = json.loads(capsys.readouterr().out)["problems"]
    assert any(p.startswith(f"{replies}: replication factor 1, expected 3") for p in problems)
    assert f"{replies}: min.insync.replicas=2, expected 2" not in problems
    with _node_down(kafka_cluster, "2"):
        _, described = _describe_until(
            settings, capsys, lambda _, d: any("no leader" in p for p in d["problems"]))
        assert f"{replies}: no leader for partitions 0, 1, 2: nothing is written or read " \
               "there until one of their replicas is back" in described["problems"]
