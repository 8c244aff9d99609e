"""A worker whose group coordinator froze and thawed asks the new leaders, not the former one.

Issue 48, item 5: after a broker was frozen with SIGSTOP for 30 s, a worker's
faust member logged ``Failed fetch offsets from <node>: NotLeaderForPartitionError``
for its assignment topic 975-1,773 times, until the end of each run.  The
member rejoins the group after the thaw; aiokafka then sets each assignment
partition's position with a ListOffsets request to the leader its metadata
names, the frozen node, which led those partitions before the freeze; that
path asks the same node again every 100 ms and never refreshes the metadata
(`streams.frame.app.LeaderCheck`, and the canary tests in
tests/frame/test_faust_canary.py).

Here the frozen node is the group's coordinator, which leads some of the
assignment partitions too (Kafka spreads a new topic's leaders over the
nodes), so that the freeze moves both; it stays frozen past the session
timeout, so that the group expels the member: the member must rejoin after
the thaw, the step that meets the stale metadata.  The worker must then have
stopped asking the former leader while it decides waits started after the
thaw.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from streams import topics
from streams.client import WaitSpec, XwaitClient
from streams.config import Guarantee, Settings
from streams.processor.worker import assignment_topic
from streams.testing.chaos import chaos_settings
from streams.testing.workers import WorkerProcess
from tests.cluster.conftest import KafkaCluster
from tests.prefixes import unique_prefix

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

STALE_LEADER = ("Failed fetch offsets from", "NotLeaderForPartitionError")
# With the check, about 1 s of aiokafka's 100 ms retries (10 lines in the runs that
# measured it): faust sends the assignment signal once its own handlers are done.
# Without it, 8 a second until the member's next periodic refresh (5 min).
HANDFUL = 20
WAITS = 10  # of each kind, started once the member is back
# A defect of the takeover, not of this check: taking the partitions back right after
# the thaw, the changelog reader's `get_watermark_offsets` answered "Unknown partition"
# and the worker stopped itself (4 of 5 runs on a loaded machine).  Until the restore
# asks again on that answer, such a run says nothing about the stale leaders.
_RESTORE_DEFECT = b"_UNKNOWN_PARTITION"
RESTORE_DEFECT_REASON = ("the worker stopped itself taking its partitions back after the thaw "
                         "(RestoreFailed: get_watermark_offsets: Unknown partition), a defect "
                         "of streams/processor/restore.py reported with issue 48")


def _until(condition: Callable[[], bool], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not {what} within {timeout:.0f} s")
        time.sleep(0.5)


def _coordinator(log: Path) -> int:
    """The group coordinator the member found last, from its log (aiokafka's INFO line)."""
    found = re.findall(r"Discovered coordinator (\d+) for group", log.read_text(errors="replace"))
    assert found, "the member found no coordinator"
    return int(found[-1])


def _led_elsewhere(cluster: KafkaCluster, names: list[str], node: int) -> bool:
    """Every partition of `names` has a leader, and it is not the frozen `node`.

    Asked by a client of the other nodes, made for each question: a client that
    knew the frozen node keeps sending it its metadata requests, which it holds."""
    others = ",".join(f"127.0.0.1:{cluster.base + i}" for i in range(cluster.nodes)
                      if i + 1 != node)
    try:
        meta = AdminClient({"bootstrap.servers": others}).list_topics(timeout=5).topics
    except Exception:  # noqa: BLE001 - not answering yet: ask again
        return False
    return all(p.leader not in (node, -1) for name in names
               for p in meta[name].partitions.values())


def _stale_leader_lines(log: Path, since: int) -> int:
    text = log.read_bytes()[since:].decode(errors="replace")
    return sum(all(s in line for s in STALE_LEADER) for line in text.splitlines())


def _outcomes(worker: WorkerProcess, kind: str) -> int:
    return worker.counter(f"outcomes.{kind}")


def test_a_worker_rejoining_after_its_frozen_coordinator_thawed_stops_asking_the_former_leader(
    kafka_cluster: KafkaCluster, tmp_path: Path,
) -> None:
    prefix = unique_prefix("z")
    base = Settings(bootstrap=kafka_cluster.bootstrap, topic_prefix=prefix,
                    app_id=f"{prefix}-processor", partitions=4, replication_factor=3)
    settings = chaos_settings(base, tmp_path, Guarantee.AT_LEAST_ONCE)
    topics.create(settings, topics.load_specs(settings))
    assignment = assignment_topic(settings)

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
            _until(lambda: _led_elsewhere(kafka_cluster, [assignment, "__consumer_offsets"], node),
                   "led by other nodes", 60)
            # ...and the coordinator that took the group over expels the member one
            # session timeout after it loaded the group.  The fault is a freeze past the
            # session timeout (a duration, not a wait for something; checked below).
            time.sleep(2 * settings.session_timeout)
        finally:
            thawed = worker.log_path.stat().st_size
            kafka_cluster.run("thaw", str(node))
        _until(lambda: b"Setting newly assigned partitions"
               in worker.log_path.read_bytes()[thawed:], "the member back in the group", 60)
        after = worker.log_path.read_bytes()[thawed:]
        assert b"member_id was not recognized" in after, (
            f"the member was not expelled while node {node} was frozen "
            f"{time.monotonic() - frozen:.0f} s: it never met the stale leaders")
        try:
            worker.wait_until(lambda s: len(s["ownedPartitions"]) == settings.partitions
                              and s.get("ready", True), 60, "owns no partition after the thaw")
        except AssertionError:
            if not worker.running and _RESTORE_DEFECT in worker.log_path.read_bytes()[thawed:]:
                pytest.xfail(RESTORE_DEFECT_REASON)
            raise

        valid, escalated = _outcomes(worker, "reply_valid"), _outcomes(worker, "deadline_exhausted")
        with XwaitClient(settings) as client:
            answered = client.start_many([WaitSpec("chaos") for _ in range(WAITS)])
            client.start_many([WaitSpec("chaos") for _ in range(WAITS)])  # left to the deadline
            for key in answered:
                client.reply(key, {"approved": True}, channel="portal", force=True)
        worker.wait_until(lambda s: s["counters"].get("outcomes.reply_valid", 0) >= valid + WAITS,
                          60, "decided no reply after the thaw")
        first = _stale_leader_lines(worker.log_path, thawed)
        # The deadline (6 s) of the unanswered waits: the worker went on meanwhile.
        worker.wait_until(lambda s: s["counters"].get("outcomes.deadline_exhausted", 0)
                          >= escalated + WAITS, 60, "escalated no wait after the thaw")
        last = _stale_leader_lines(worker.log_path, thawed)

        assert last == first, (f"{last - first} more stale-leader errors while the waits ran "
                               f"to their deadline: the member still asks the former leader")
        assert last <= HANDFUL, f"{last} stale-leader errors after the thaw"
        assert worker.counter("assignment.leader_checks") >= 2  # at the start, after the thaw
    finally:
        worker.stop()
        kafka_cluster.wait_whole()
