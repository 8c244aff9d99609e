"""The W1 load through a worker while a replicated Kafka cluster loses brokers.

`run_cluster_chaos` runs the load of `streams.testing.chaos` (W1 mix, replies
racing a 6 s deadline, an operator answering reviews) against one worker on a
three-node cluster started by `scripts/kafka start --nodes 3` (topics with
three replicas and min.insync.replicas=2), and meanwhile:

* kills with kill -9 the broker that leads the most input partitions
  (requests, replies, commands), N times, each down for S seconds;
* kills the active controller (found from the nodes' quorum-state files);
* kills a broker, wipes its data folder and starts it again (its replicas
  are copied back from the others);
* kills the worker at the same moment as a broker (both restarted).

Before each action the cluster is whole again (every node up, every replica
in sync), so each is one failure, which min.insync.replicas=2 is sized for.
Every wait is then judged on the contract's clock as in `chaos` (lost,
conflicting, wrong: a reply appended before requestedAt + deadline must win),
and for each action the reply->outcome latency of the waits whose reply was
appended from the kill to 30 s after the node was back (p50, p99, max): what
a user sees during a failover.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

from streams.config import REPO_ROOT, Settings
from streams.testing.chaos import Broker, Load, Report, Stage, Watch
from streams.testing.harness.figures import nearest_rank
from streams.testing.workers import WorkerProcess

INPUTS = ("requests", "replies", "commands")
# After a node is back, replies appended this long still count to its failover:
# the time the worker takes to work off what piled up while leaders moved.
AFTER_S = 30.0


@dataclass
class ClusterPlan:
    """What one run does; the defaults are the issue's long run."""

    waits: int = 90_000
    rate: float = 500.0
    leader_kills: int = 3  # kill -9 of the broker leading the most input partitions
    down_s: float = 60.0  # how long each killed broker stays down
    controller_kill: bool = True
    wipe: bool = True  # a broker killed, its data folder deleted, started again
    worker_with_broker: bool = True  # the worker killed at the same moment as a broker
    whole_timeout_s: float = 180.0  # how long to wait for the cluster to be whole again
    settle_s: float = 600.0
    seed: int = 1


# How long `scripts/kafka start` waits for a node of a test's cluster to answer
# (XWAIT_KAFKA_START_TIMEOUT, unless the environment sets it).
NODE_START_TIMEOUT_S = 240


@dataclass
class KafkaCluster:
    """`scripts/kafka` on a cluster: the node of a port block, in a Kafka home."""

    base: int
    home: Path | None = None  # XWAIT_KAFKA_HOME (None: the checkout's .xwait/kafka)
    nodes: int = 3
    heap: str = "256m"

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.base + i}" for i in range(self.nodes))

    def script(self, *args: str) -> str:
        # A node restarted on a busy machine (load 75) took over 90 s, the script's default,
        # to load its logs and answer: the test failed, and so did every later one on the
        # cluster with a node missing.
        env = {"XWAIT_KAFKA_START_TIMEOUT": str(NODE_START_TIMEOUT_S), **os.environ,
               "XWAIT_KAFKA_HEAP": self.heap}
        if self.home is not None:
            env["XWAIT_KAFKA_HOME"] = str(self.home)
        done = subprocess.run(  # noqa: S603 - the project's own script
            [sys.executable, str(REPO_ROOT / "scripts" / "kafka"), *args, "--port",
             str(self.base)], env=env, capture_output=True, text=True, timeout=600,
            check=False)
        if done.returncode != 0:
            raise RuntimeError(f"scripts/kafka {' '.join(args)}: {done.stdout}{done.stderr}")
        return done.stdout

    def start(self) -> None:
        self.script("start", "--nodes", str(self.nodes))

    def broker(self) -> Broker:
        """A single broker (`nodes` 1) as `run_chaos` stops, starts, freezes and thaws it."""

        def run(command: str) -> Callable[[], None]:
            def call() -> None:
                self.script(command)
            return call

        return Broker(stop=run("stop"), start=run("start"), freeze=run("freeze"),
                      thaw=run("thaw"))

    def controller(self) -> int:
        info = json.loads(self.script("status", "--nodes", str(self.nodes), "--json"))
        return int(info["controller"])

    def leaders(self, topics: list[str]) -> dict[int, int]:
        """Broker id -> how many partitions of `topics` it leads."""
        meta = AdminClient({"bootstrap.servers": self.bootstrap}).list_topics(timeout=15)
        counts = dict.fromkeys(range(1, self.nodes + 1), 0)
        for t in topics:
            for p in meta.topics[t].partitions.values():
                if p.leader in counts:
                    counts[p.leader] += 1
        return counts

    def whole(self, timeout: float) -> float:
        """Wait until every node is listed and every replica is in sync; seconds it took."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            try:
                meta = AdminClient({"bootstrap.servers": self.bootstrap}).list_topics(timeout=5)
            except Exception:  # noqa: BLE001 - not answering yet: ask again
                time.sleep(1)
                continue
            short = [1 for tm in meta.topics.values() for p in tm.partitions.values()
                     if len(p.isrs) < len(p.replicas) or p.leader < 0]
            if len(meta.brokers) == self.nodes and not short:
                return time.monotonic() - started
            time.sleep(1)
        raise RuntimeError(f"the cluster was not whole again within {timeout:.0f}s")


@dataclass
class Failover:
    action: str
    node: int
    at_ms: int  # wall clock of the kill
    back_ms: int = 0  # wall clock when the node answered again (after its start)
    detail: dict[str, Any] = field(default_factory=dict)


class StreamTimes(threading.Thread):
    """Samples the worker's stream time per partition: how far behind the wall clock
    each partition's time stood during a failover (time stands still while a
    partition cannot prove its inputs caught up: records and timers wait)."""

    def __init__(self, worker: WorkerProcess, every_s: float = 0.5) -> None:
        super().__init__(name="stream-times", daemon=True)
        self.worker = worker
        self.every_s = every_s
        self.samples: list[tuple[int, dict[str, int]]] = []  # (wall ms, partition -> time)
        self.stats: list[dict[str, Any]] = []  # the whole of each sample, for a diagnosis
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.every_s):
            stats = self.worker.stats()
            if stats is not None:
                at = int(time.time() * 1000)
                self.samples.append((at, dict(stats.get("streamTime", {}))))
                self.stats.append({"at": at, **{k: stats.get(k) for k in (
                    "streamTime", "held", "counters", "latencyMs", "loopLagMs",
                    "ownedPartitions", "timersInFlight", "commitGraceMs")}})

    def behind_max_ms(self, since_ms: int, until_ms: int) -> int | None:
        """The most any owned partition's stream time was behind the wall clock."""
        worst = [at - t for at, times in self.samples if since_ms <= at <= until_ms
                 for t in times.values() if t > 0]
        return max(worst, default=None)


# The latency a reply really had at rank q (0..1): streams.testing.rolling reads it from here.
percentile = nearest_rank


def failover_latencies(failovers: list[Failover], load: Load, watch: Watch,
                       times: StreamTimes | None = None) -> list[dict[str, Any]]:
    """Per failover: reply->outcome of the waits whose reply was appended during it."""
    rows = []
    for f in failovers:
        until = int(f.back_ms + AFTER_S * 1000)
        # The longest the load could append nothing at all (its producer waits for
        # the leaders to move): replies not appended are not held by the worker.
        appends = sorted(t for w in load.waits for t in (w.request_appended, w.reply_appended)
                         if t is not None and f.at_ms <= t <= until)
        silent = max((b - a for a, b in zip(appends, appends[1:], strict=False)), default=None)
        lat = []
        for w in load.waits:
            if w.reply_appended is None or not f.at_ms <= w.reply_appended <= until:
                continue
            got = watch.where.get(w.key)
            if got:
                lat.append(max(0, got[0][2] - w.reply_appended))
        rows.append({"action": f.action, "node": f.node, "away_s": round(
            (f.back_ms - f.at_ms) / 1000, 1), "replies": len(lat),
            "p50_ms": percentile(lat, 0.5), "p99_ms": percentile(lat, 0.99),
            "max_ms": max(lat, default=None), "no_append_max_ms": silent,
            **({} if times is None else {"stream_time_behind_max_ms": times.behind_max_ms(
                f.at_ms, until)}), **f.detail})
    return rows


def run_cluster_chaos(settings: Settings, folder: Path, plan: ClusterPlan,
                      cluster: KafkaCluster, log: Callable[[str], None] = print,
                      samples: Path | None = None) -> Report:
    """Run the plan against one worker of `settings` (topics made by the caller, RF 3);
    `samples`: a file for the worker's stats every half second (JSON lines)."""
    stage = Stage(settings, plan, log)
    report, load, watch, event = stage.report, stage.load, stage.watch, stage.event
    worker = WorkerProcess(settings, folder, "w1")
    inputs = [settings.topic(t) for t in INPUTS]
    failovers: list[Failover] = []

    actions = (["leader"] * plan.leader_kills + (["controller"] if plan.controller_kill else [])
               + (["wipe"] if plan.wipe else [])
               + (["worker+broker"] if plan.worker_with_broker else []))
    worker.start(timeout=180)
    times = StreamTimes(worker)
    times.start()
    watch.start()
    load.start()
    try:
        gap = plan.waits / plan.rate / (len(actions) + 1)
        for action in actions:
            load.idle(max(1.0, gap - plan.down_s))
            event("cluster whole", after_s=round(cluster.whole(plan.whole_timeout_s), 1))
            leads = cluster.leaders(inputs)
            node = (cluster.controller() if action == "controller"
                    else max(leads, key=lambda n: (leads[n], -n)))
            f = Failover(action, node, int(time.time() * 1000),
                         detail={"input_partitions_led": leads[node]})
            cluster.script("kill", str(node))
            if action == "worker+broker":
                worker.kill9()
            if action == "wipe":
                cluster.script("wipe", str(node))
            event(f"kill -9 ({action})", node=node, leads=leads)
            load.idle(plan.down_s)
            if action == "worker+broker":
                worker.start(timeout=300)
                event("worker restarted")
            starting = time.monotonic()
            cluster.script("start", str(node))
            f.back_ms = int(time.time() * 1000)
            failovers.append(f)
            event("broker started", node=node, start_s=round(time.monotonic() - starting, 1))
        stage.settle(worker, plan.settle_s)
        event("settled", ended=watch.ended())
    finally:
        load.close()
        times.stopped.set()
        worker.stop()
        stage.close()
    report = stage.judged()
    report.worker_grace_ms = sorted({s["commitGraceMs"] for s in times.stats
                                     if s.get("commitGraceMs") is not None})
    report.failovers = failover_latencies(failovers, load, watch, times)
    if samples is not None:
        samples.write_text("\n".join(json.dumps(x) for x in times.stats) + "\n")
    for row in report.failovers:
        log(json.dumps({"failover": row}))
    return report


__all__ = ["NODE_START_TIMEOUT_S", "ClusterPlan", "Failover", "KafkaCluster", "StreamTimes",
           "failover_latencies", "percentile", "run_cluster_chaos"]
