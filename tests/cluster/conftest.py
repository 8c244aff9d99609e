"""One three-node KRaft cluster (`scripts/kafka start --nodes 3`) for the tests of this package.

Started once for the package on free loopback ports (never 9092 or the
single node's controller port), in a home of its own under the test's
temporary folder; its nodes share the checkout's broker jars when they
exist.  Small heaps: three JVMs and a worker share two cores.  Each test
leaves every node running when it ends (a test that kills one starts it
again), so the next finds the cluster whole.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from streams.testing.cluster_chaos import NODE_START_TIMEOUT_S
from streams.testing.workers import KAFKA_CONTROLLER_OFFSET, free_port
from tests.conftest import KAFKA_SCRIPT

NODES = 3
CONTROLLER_OFFSET = KAFKA_CONTROLLER_OFFSET


def free_base(nodes: int = NODES) -> int:
    """A first client port whose N client ports and N controller ports are all free.

    Outside the kernel's ephemeral range (streams.testing.workers.free_port): a
    client that keeps connecting to a killed node's port in that range may be
    given that very port as its own source port (TCP connects to itself), and
    the node can then not listen there again ("port taken").  Never the
    default cluster's block (scripts/kafka --nodes 3) either.
    """
    return free_port(*(i + off for i in range(nodes) for off in (0, CONTROLLER_OFFSET)))


@dataclass
class KafkaCluster:
    base: int
    home: Path
    nodes: int = NODES

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.base + i}" for i in range(self.nodes))

    def script(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        env = {"XWAIT_KAFKA_START_TIMEOUT": str(NODE_START_TIMEOUT_S), **os.environ,
               "XWAIT_KAFKA_HOME": str(self.home), "XWAIT_KAFKA_HEAP": "256m"}
        return subprocess.run([sys.executable, str(KAFKA_SCRIPT), *args, "--port",
                               str(self.base)], env=env, capture_output=True, text=True,
                              timeout=timeout, check=False)

    def run(self, *args: str) -> str:
        done = self.script(*args)
        assert done.returncode == 0, f"scripts/kafka {args}: {done.stdout}\n{done.stderr}"
        return done.stdout

    def status(self) -> dict[str, Any]:
        done = self.script("status", "--nodes", str(self.nodes), "--json")
        info: dict[str, Any] = json.loads(done.stdout)
        return info

    def controller(self) -> int:
        controller = self.status()["controller"]
        assert isinstance(controller, int)
        return controller

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap})

    def leaders(self, topics: list[str]) -> dict[tuple[str, int], int]:
        meta = self.admin().list_topics(timeout=15)
        return {(t, p.id): p.leader for t in topics for p in meta.topics[t].partitions.values()}

    def wait_whole(self, timeout: float = 120) -> None:
        """Until every node answers and every partition has its replicas back in sync."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                meta = self.admin().list_topics(timeout=5)
            except Exception:  # noqa: BLE001 - not answering yet
                time.sleep(0.5)
                continue
            short = [(t, p.id) for t, tm in meta.topics.items()
                     for p in tm.partitions.values() if len(p.isrs) < len(p.replicas)]
            if len(meta.brokers) == self.nodes and not short:
                return
            time.sleep(0.5)
        raise AssertionError(f"the cluster was not whole again within {timeout}s")


@pytest.fixture(scope="package")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    home = tmp_path_factory.mktemp("cluster")  # the jars are the user cache's, shared
    cluster = KafkaCluster(free_base(), home)
    cluster.run("start", "--nodes", str(NODES))
    try:
        yield cluster
    finally:
        # The tests' clients first, while the nodes answer: a client still held by a
        # reference cycle (an exception an admin future raised keeps the frames it
        # passed through, a test's among them) would go on reconnecting to the nodes'
        # ports after they are gone, printing librdkafka's "Connection refused" later
        # in the run.
        gc.collect()
        # Killed first: stopped one after another, the last node's controlled shutdown
        # waited for a quorum already gone, 30 s until the script killed it anyway.
        for node in range(1, NODES + 1):
            cluster.script("kill", str(node))
        cluster.script("reset", "--nodes", str(NODES))
