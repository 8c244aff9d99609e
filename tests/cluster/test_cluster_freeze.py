"""A worker after a broker froze and thawed: it asks the partitions' new leaders, and
taking its partitions back at once after the thaw does not stop it.

Issue 48, item 5: after a broker was frozen with SIGSTOP for 30 s, a worker's
faust member logged ``Failed fetch offsets from <node>: NotLeaderForPartitionError``
for its assignment topic 975-1,773 times, until the end of each run.  A member
refreshes its metadata when a fetch meets a former leader, and otherwise every
5 minutes; a member that fetched nothing from the frozen broker still names it
as the leader after the thaw.  When such a member is then given the partition,
aiokafka sets its position with a ListOffsets request to that former leader,
and that path asks it again every 100 ms and never refreshes the metadata
(`streams.frame.app.LeaderCheck`; tests/frame/test_faust_canary.py pins it).

The first test stages exactly that: with one partition, w1 owns it and w2
keeps only a standby of it (faust gives the consumer only the actives: w2
fetches nothing).  The node leading the assignment partition is frozen until
its leadership moved, thawed, and the cluster made whole again; then w1 is
stopped and w2 takes the partition over: w2 must stop asking the former
leader at once and decide the waits started after that.  Without the check,
w2 logs the line 8 times a second until the end.

The second freezes the group's coordinator, which leads assignment partitions
too, until the group expels the member; the member takes all its partitions
back the moment the node thaws.  The changelog reader's watermark question
was then answered "Unknown partition" or "Not leader for partition" (its
metadata right after the thaw) and the worker stopped itself with
RestoreFailed, in every run: the reader must ask again
(`streams.processor.restore.watermarks`), and the worker go on deciding.
Without the check, this member too logs the line 8 times a second.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from streams import topics
from streams.client import WaitSpec, XwaitClient
from streams.config import Guarantee, Settings
from streams.testing.chaos import chaos_settings
from streams.testing.workers import WorkerProcess
from streams.topics import assignment_topic
from tests.cluster.conftest import KafkaCluster
from tests.prefixes import unique_prefix
from tests.waiting import until

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

STALE_LEADER = ("Failed fetch offsets from", "NotLeaderForPartitionError")
# With the check, about a second of aiokafka's 100 ms retries at most (1 line for the
# takeover, 1-8 for the member taking everything back, in the runs measured): faust
# sends the assignment signal once its own handlers are done.  Without it, 8 a second
# until the member's next periodic metadata refresh (5 min): 63-65 more lines during
# the second round of waits below.
HANDFUL = 20
WAITS = 10  # of each kind a round, started once the worker owns its partitions again


def _others(cluster: KafkaCluster, node: int) -> AdminClient:
    """A client of the nodes other than the frozen `node`, made for each question: a
    client that knew the frozen node keeps sending it requests, which it holds."""
    return AdminClient({"bootstrap.servers": ",".join(
        f"127.0.0.1:{cluster.base + i}" for i in range(cluster.nodes) if i + 1 != node)})


def _led_elsewhere(cluster: KafkaCluster, names: list[str], node: int) -> bool:
    """Every partition of `names` has a leader, and it is not the frozen `node`."""
    try:
        meta = _others(cluster, node).list_topics(timeout=5).topics
    except Exception:  # noqa: BLE001 - not answering yet: ask again
        return False
    return all(p.leader not in (node, -1) for name in names
               for p in meta[name].partitions.values())


def _coordinator(log: Path) -> int:
    """The group coordinator the member found last, from its log (aiokafka's INFO line)."""
    found = re.findall(r"Discovered coordinator (\d+) for group", log.read_text(errors="replace"))
    assert found, "the member found no coordinator"
    return int(found[-1])


def _stale_leader_lines(log: Path, since: int) -> int:
    text = log.read_bytes()[since:].decode(errors="replace")
    return sum(all(s in line for s in STALE_LEADER) for line in text.splitlines())


def _outcomes(stats: dict[str, object], kind: str) -> int:
    counters = stats.get("counters")
    return int(counters.get(f"outcomes.{kind}", 0)) if isinstance(counters, dict) else 0


def _chaos_topics(cluster: KafkaCluster, folder: Path, partitions: int,
                  session_timeout: float | None = None) -> tuple[Settings, str]:
    """A chaos worker's settings on the cluster (three replicas, at least once; the chaos
    session timeout unless given), its topics created; and its assignment topic."""
    prefix = unique_prefix("z")
    base = Settings(bootstrap=cluster.bootstrap, topic_prefix=prefix,
                    app_id=f"{prefix}-processor", partitions=partitions, replication_factor=3)
    settings = chaos_settings(base, folder, Guarantee.AT_LEAST_ONCE).with_overrides(
        session_timeout=session_timeout)
    topics.create(settings, topics.load_specs(settings))
    return settings, assignment_topic(settings)


def _decide_a_round(settings: Settings, worker: WorkerProcess, replied: int) -> None:
    """Start 2 x WAITS waits, reply to `replied` of them, and wait until each is decided:
    the replies at once, the others at their deadline (6 s)."""
    stats = worker.stats() or {}
    valid, escalated = _outcomes(stats, "reply_valid"), _outcomes(stats, "deadline_exhausted")
    with XwaitClient(settings) as client:
        keys = client.start_many([WaitSpec("chaos") for _ in range(2 * WAITS)])
        for key in keys[:replied]:
            client.reply(key, {"approved": True}, channel="portal", force=True)
    worker.wait_until(lambda s: _outcomes(s, "reply_valid") >= valid + replied, 60,
                      "decided no reply")
    worker.wait_until(lambda s: _outcomes(s, "deadline_exhausted")
                      >= escalated + 2 * WAITS - replied, 60, "escalated no wait")


def _decides_without_asking_the_former_leader(
    settings: Settings, worker: WorkerProcess, since: int, node: int,
) -> int:
    """Waits started now are decided, replies and deadlines, and the worker's stale-leader
    lines since `since` have stopped by then: none during a second round of waits run to
    their deadline.  How many there were."""
    # At least 6 s (the deadline): the check, one question asked at the assignment,
    # was answered long before (a second at most in the runs measured).
    _decide_a_round(settings, worker, replied=WAITS)
    first = _stale_leader_lines(worker.log_path, since)
    _decide_a_round(settings, worker, replied=0)
    last = _stale_leader_lines(worker.log_path, since)
    assert last == first, (f"{last - first} more stale-leader errors while waits ran to "
                           f"their deadline: {worker.name} still asks the former leader {node}")
    assert last <= HANDFUL, f"{last} stale-leader errors"
    return last


def test_a_worker_taking_a_partition_over_after_its_leader_froze_stops_asking_the_former_leader(
    kafka_cluster: KafkaCluster, tmp_path: Path,
) -> None:
    # The default session timeout (20 s): the freeze below must not expel the members
    # even when the frozen node is also the group's coordinator.
    settings, assignment = _chaos_topics(kafka_cluster, tmp_path, 1, session_timeout=20.0)

    w1 = WorkerProcess(settings, tmp_path, name="w1").start(timeout=120)
    w2 = WorkerProcess(settings, tmp_path, name="w2")
    try:
        w2.start(wait_owned=False)
        w2.wait_until(lambda s: s["standbyPartitions"] == [0], 120, "keeps no standby")
        w1.wait_until(lambda s: s["ownedPartitions"] == [0], 60, "lost its partition")
        (node,) = set(kafka_cluster.leaders([assignment]).values())

        kafka_cluster.run("freeze", str(node))
        try:
            until(lambda: _led_elsewhere(kafka_cluster, [assignment], node),
                  f"{assignment} led by another node than the frozen {node}", 60, every=0.5)
        finally:
            kafka_cluster.run("thaw", str(node))
        kafka_cluster.wait_whole()

        taken = w2.log_path.stat().st_size
        w1.stop()
        w2.wait_until(lambda s: s["ownedPartitions"] == [0] and s.get("ready", True), 90,
                      "did not take the partition over")
        _decides_without_asking_the_former_leader(settings, w2, taken, node)
        assert w2.counter("assignment.leader_checks") >= 1  # the takeover (it owned nothing)
    finally:
        w1.stop()
        w2.stop()
        kafka_cluster.wait_whole()


def test_a_worker_expelled_while_its_coordinator_froze_takes_its_partitions_back_at_the_thaw(
    kafka_cluster: KafkaCluster, tmp_path: Path,
) -> None:
    settings, assignment = _chaos_topics(kafka_cluster, tmp_path, 4)

    worker = WorkerProcess(settings, tmp_path).start(timeout=120)
    try:
        node = _coordinator(worker.log_path)
        # Kafka spreads a new topic's leaders over the nodes: 4 partitions, 3 nodes.
        led = [tp for tp, leader in kafka_cluster.leaders([assignment]).items() if leader == node]
        assert led, f"node {node}, the coordinator, leads no partition of {assignment}"

        frozen = time.monotonic()
        kafka_cluster.run("freeze", str(node))
        try:
            # The controller fences it: its leaderships move, the group's among them...
            until(lambda: _led_elsewhere(kafka_cluster, [assignment, "__consumer_offsets"],
                                          node), "led by other nodes", 60, every=0.5)
            # ...and the coordinator that took the group over expels the member one
            # session timeout after it loaded the group: the member's heartbeats wait on
            # the frozen node.  The fault is a freeze past the session timeout (a
            # duration, not a wait for something: checked after the thaw).  No client
            # sees the group meanwhile: asked from the other nodes, describing it timed
            # out every time while a node was frozen.
            time.sleep(2 * settings.session_timeout)
        finally:
            thawed = worker.log_path.stat().st_size
            kafka_cluster.run("thaw", str(node))
        until(lambda: b"Setting newly assigned partitions" in worker.log_path.read_bytes()[thawed:],
              "the member back in the group", 60, every=0.5)
        assert b"member_id was not recognized" in worker.log_path.read_bytes()[thawed:], (
            f"the member was not expelled while node {node} was frozen "
            f"{time.monotonic() - frozen:.0f} s: it took nothing back after the thaw")
        worker.wait_until(lambda s: len(s["ownedPartitions"]) == settings.partitions
                          and s.get("ready", True), 60, "owns no partition after the thaw")
        _decides_without_asking_the_former_leader(settings, worker, thawed, node)
        assert worker.running
        assert worker.counter("assignment.leader_checks") >= 2  # at the start, after the thaw
    finally:
        worker.stop()
        kafka_cluster.wait_whole()
