"""Nothing lost, ever: waits survive kill -9 while behind, new and leaving workers, and the broker.

Each test runs `streams.testing.chaos` at a size fit for CI: a steady W1 load
whose replies race a 6 s deadline, an operator answering reviews, and a
worker killed with SIGKILL while it has a backlog (restarted on its own disk
and on an empty one), a second worker joining and leaving, or the broker
restarting.  Every wait is then judged against the broker's clock (see the
module docstring there).  The counts are written to
.xwait/reports/crash-<name>.json; `bench/crash_bench.py` runs the long version.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from streams import topics
from streams.config import Guarantee, Settings
from streams.processor.batch import Batch, PartitionBatch
from streams.processor.commit import ExactlyOnce
from streams.processor.gaps import EndOffsets
from streams.processor.model import OutRecord, Role
from streams.processor.positions import POSITIONS_KEY, Positions
from streams.processor.tuning import TUNING
from streams.testing.chaos import Broker, Plan, Report, chaos_settings, run_chaos
from streams.testing.workers import free_broker_port
from tests.made_topics import create_topics, read_keys
from tests.prefixes import unique_prefix
from tests.processor.contexts import context

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def _settings(bootstrap: str, folder: Path, guarantee: Guarantee) -> Settings:
    prefix = unique_prefix("c")
    base = Settings(bootstrap=bootstrap, topic_prefix=prefix, app_id=f"{prefix}-processor",
                    partitions=4)
    settings = chaos_settings(base, folder, guarantee)
    topics.create(settings, topics.load_specs(settings))
    return settings


def _save(name: str, report: Report) -> None:
    out = REPO / ".xwait" / "reports"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"crash-{name}.json").write_text(json.dumps(report.as_dict(), indent=2) + "\n")
    print(json.dumps({k: v for k, v in report.as_dict().items() if k != "events"}))


def _assert_clean(report: Report) -> None:
    # Which side stood still: the load's producer (requests never acknowledged) or the
    # worker (acknowledged input never applied); see chaos.input_sides.
    assert report.lost == 0, (
        f"{report.lost} waits never ended; stalled: {report.stalled}; inputs "
        f"(acknowledged/applied): {report.inputs}; load: {report.load}; {report.examples}")
    assert report.conflicting == 0, f"{report.conflicting} waits ended twice: {report.examples}"
    assert report.wrong == 0, f"{report.wrong} waits ended the wrong way: {report.examples}"


def _assert_reviewed(report: Report) -> None:
    """The run raced invalid replies against their deadlines, and the workers opened their
    reviews; a test's last check (it may skip)."""
    if report.reviewable == 0:
        # Beside two suites (load ~100) every reply of a run was once appended after its
        # 6 s deadline: nothing lost or wrong, and no review to open.
        pytest.skip(f"no invalid reply reached the log before its deadline (received "
                    f"{report.received}, escalated {report.escalated}): the review flow "
                    "was not exercised; nothing was lost, ended twice or ended wrong")
    assert report.reviews > 0, f"{report.reviewable} invalid replies came in time: no review"


@pytest.mark.parametrize("guarantee", list(Guarantee))
def test_kill_9_while_behind_and_a_worker_joining_and_leaving_lose_nothing(
    kafka_bootstrap: str, tmp_path: Path, guarantee: Guarantee
) -> None:
    settings = _settings(kafka_bootstrap, tmp_path, guarantee)
    plan = Plan(waits=3_200, rate=320.0, kills=3, empty_disk=1, joins=1)
    report = run_chaos(settings, tmp_path, plan)
    _save(guarantee.value, report)

    _assert_clean(report)
    backlogs = [e.get("backlog") or 0 for e in report.events if e["event"] == "kill -9"]
    assert len(backlogs) == plan.kills
    assert max(backlogs) >= 200, f"some kill came while the worker was behind: {backlogs}"
    if guarantee is Guarantee.EXACTLY_ONCE:
        assert report.duplicate_outcomes == 0, "read_committed sees each outcome once"
        assert report.duplicate_actions == 0, "read_committed sees each action once"
    _assert_reviewed(report)


@pytest.mark.parametrize("guarantee", list(Guarantee))
def test_a_worker_frozen_past_its_session_timeout_wakes_fenced_and_corrupts_nothing(
    kafka_bootstrap: str, tmp_path: Path, guarantee: Guarantee
) -> None:
    """Issue 48: w1 frozen (SIGSTOP) while behind, past its session timeout, as w2 joins
    and takes every partition over; w1 wakes a zombie, is fenced, rejoins (keeping
    standby copies of w2's partitions); then w2 leaves and w1 takes every partition
    back, restoring from its own changelog offsets.  Nothing lost or decided twice,
    and the woken worker never stops itself."""
    settings = _settings(kafka_bootstrap, tmp_path, guarantee)
    plan = Plan(waits=3_000, rate=150.0, kills=0, empty_disk=0, joins=0, zombies=1)
    report = run_chaos(settings, tmp_path, plan)
    _save(f"zombie-{guarantee.value}", report)

    _assert_clean(report)
    events = {e["event"]: e for e in report.events}
    assert "worker exited" not in events, "being fenced must not stop the worker"
    woken = events["frozen worker woken"]
    assert woken["peer_owns"] == list(range(settings.partitions)), (
        f"the second worker took every partition while w1 was frozen: {woken}")
    assert "woken worker rejoined" in events, report.events
    assert "second worker left" in events
    if guarantee is Guarantee.EXACTLY_ONCE:
        assert report.duplicate_outcomes == 0, "read_committed sees each outcome once"
        assert report.duplicate_actions == 0, "read_committed sees each action once"
    _assert_reviewed(report)
    if report.fenced == 0:
        # Woken, the zombie races its heartbeat (which tells it it left the group) against
        # its next batch; beside two suites (load 40-60) it heard first twice in 20 runs,
        # committed nothing, and had nothing to fence.  Everything above still held; the
        # fence itself was not exercised, so the run says so instead of passing.
        rejoined = events["woken worker rejoined"]
        pytest.skip("the woken worker committed nothing before it heard it had left the "
                    f"group: no commit to fence ({woken}; {rejoined})")


@pytest.fixture
def own_broker() -> Iterator[tuple[str, Broker]]:
    """A broker of this test's own (scripts/kafka on a free port), free to be restarted.

    The test's clients are destroyed before the broker stops: some are still held by
    reference cycles when the test returns, and would otherwise go on reconnecting to
    its port until the garbage collector came by (librdkafka's "Connect to
    ipv4#127.0.0.1:<port> failed: Connection refused" on stderr, later in the run).
    An exception a confluent-kafka admin future raises again keeps the frames it
    passed through: `EndOffsets.get`'s, and the test's that called it, with its
    clients.
    """
    port = str(free_broker_port())
    env = {**os.environ, "XWAIT_KAFKA_HEAP": "256m"}

    def kafka(*args: str) -> None:
        done = subprocess.run([sys.executable, str(REPO / "scripts" / "kafka"), *args,
                               "--port", port], env=env, capture_output=True, text=True,
                              timeout=300, check=False)
        assert done.returncode == 0, f"scripts/kafka {args}: {done.stdout}\n{done.stderr}"

    kafka("start")
    try:
        yield f"127.0.0.1:{port}", Broker(stop=lambda: kafka("stop"),
                                          start=lambda: kafka("start"),
                                          freeze=lambda: kafka("freeze"),
                                          thaw=lambda: kafka("thaw"))
    finally:
        gc.collect()  # here, in the main thread, while the broker still answers
        kafka("reset")  # stops it and deletes its data


def test_end_offsets_are_answered_across_a_broker_restart(
    own_broker: tuple[str, Broker]
) -> None:
    """An admin client made before a broker restart answers FENCED_LEADER_EPOCH for
    good (librdkafka keeps its stale leader epochs): the takeover and the probes ask
    through `EndOffsets`, which asks again through a new client."""
    bootstrap, broker = own_broker
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap}
    topic = f"{unique_prefix('eo')}.ends"
    admin = AdminClient(conf)  # kept: a client destroyed mid-request fails its futures
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(timeout=30)
    topics.wait_visible(admin, [topic])
    producer = Producer(conf)
    for i in range(3):
        producer.produce(topic, value=b"x", partition=i % 2)
    producer.flush(30)
    ends = EndOffsets(conf)
    partitions = [(topic, 0), (topic, 1)]
    assert ends.get(partitions) == {(topic, 0): 2, (topic, 1): 1}

    broker.stop()
    broker.start()
    assert ends.get(partitions, timeout=30) == {(topic, 0): 2, (topic, 1): 1}


@pytest.mark.parametrize("guarantee", [Guarantee.AT_LEAST_ONCE, Guarantee.EXACTLY_ONCE])
def test_a_worker_never_restarted_lives_through_a_broker_restart(
    own_broker: tuple[str, Broker], tmp_path: Path, guarantee: Guarantee
) -> None:
    """No kill, no join: the same worker before and after the broker restart must go
    on deciding and firing timers (its probes once failed for good after one; under
    exactly_once its transactional producers stood still after one)."""
    bootstrap, broker = own_broker
    settings = _settings(bootstrap, tmp_path, guarantee)
    plan = Plan(waits=600, rate=100.0, kills=0, empty_disk=0, joins=0, broker_restarts=1,
                settle_s=90.0)
    report = run_chaos(settings, tmp_path, plan, broker=broker)
    _save(f"broker-restart-live-worker-{guarantee.value}", report)

    _assert_clean(report)
    assert [e["event"] for e in report.events].count("broker started") == 1
    assert not [e for e in report.events if e["event"] in ("kill -9", "worker exited")]
    _assert_reviewed(report)


def test_broker_restarts_mid_run_lose_nothing(
    own_broker: tuple[str, Broker], tmp_path: Path
) -> None:
    bootstrap, broker = own_broker
    settings = _settings(bootstrap, tmp_path, Guarantee.AT_LEAST_ONCE)
    plan = Plan(waits=1_000, rate=100.0, kills=1, empty_disk=0, joins=0, broker_restarts=2)
    report = run_chaos(settings, tmp_path, plan, broker=broker)
    _save("broker-restarts", report)

    _assert_clean(report)
    assert [e["event"] for e in report.events].count("broker started") == 2
    _assert_reviewed(report)


@pytest.mark.parametrize("guarantee", list(Guarantee))
def test_a_broker_frozen_mid_run_loses_nothing(
    own_broker: tuple[str, Broker], tmp_path: Path, guarantee: Guarantee
) -> None:
    """SIGSTOP, not a kill: the broker's sockets stay open and nothing answers, longer
    than the workers' session timeout; then it wakes and the run goes on."""
    bootstrap, broker = own_broker
    settings = _settings(bootstrap, tmp_path, guarantee)
    plan = Plan(waits=1_000, rate=100.0, kills=0, empty_disk=0, joins=0, broker_freezes=1,
                broker_frozen_s=15.0, settle_s=120.0)
    report = run_chaos(settings, tmp_path, plan, broker=broker)
    _save(f"broker-freeze-{guarantee.value}", report)

    _assert_clean(report)
    assert [e["event"] for e in report.events].count("broker thawed") == 1
    assert "worker exited" not in [e["event"] for e in report.events]
    _assert_reviewed(report)


class _Watched:
    """A real transactional producer that tells the test when the committer purges it."""

    made: list[_Watched] = []
    purged = threading.Event()

    def __init__(self, conf: dict[str, Any]) -> None:
        self._producer = Producer(conf)
        _Watched.made.append(self)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._producer, name)

    def purge(self, *args: Any, **kwargs: Any) -> None:
        self._producer.purge(*args, **kwargs)
        _Watched.purged.set()


def test_an_exactly_once_commit_held_by_a_frozen_broker_is_purged_and_committed_once(
    own_broker: tuple[str, Broker]
) -> None:
    """A transaction's records that cannot leave librdkafka's queue (the broker frozen
    with SIGSTOP here; after a broker restart, a partition leader the producer lost
    track of) are purged after `Tuning.stall_s`: the transaction is aborted and committed on a
    new producer, and a read_committed consumer sees the batch once."""
    bootstrap, _broker = own_broker
    port = bootstrap.rsplit(":", 1)[1]
    status = subprocess.run([sys.executable, str(REPO / "scripts" / "kafka"), "status",
                             "--port", port], capture_output=True, text=True, check=True)
    found = re.search(r"\(pid (\d+)\)", status.stdout)
    assert found is not None, status.stdout
    pid = int(found.group(1))
    prefix = unique_prefix("f")
    outcomes, changelog = f"{prefix}.outcomes", f"{prefix}.changelog"
    create_topics(bootstrap, NewTopic(outcomes, 1, 1), NewTopic(changelog, 1, 1))
    _Watched.made, _Watched.purged = [], threading.Event()
    ctx = context(topic_prefix=prefix, app_id=prefix, changelog=changelog, partitions=1,
                  tuning=replace(TUNING, stall_s=1.0))
    committer = ExactlyOnce(ctx, {"bootstrap.servers": bootstrap}, make_producer=_Watched)
    batch = Batch(parts={0: PartitionBatch(
        0, Positions(next_offset={Role.REPLIES: 1}),
        out=[OutRecord(Role.OUTCOMES, b"wait-1", b"outcome", partition=0)],
        rows={b"wait-1": b"row"})})

    async def scenario() -> dict[int, int]:
        await committer.assign([0])
        os.kill(pid, signal.SIGSTOP)
        try:
            committing = asyncio.ensure_future(committer.commit(batch))
            purged = await asyncio.get_running_loop().run_in_executor(
                None, _Watched.purged.wait, 120)
            assert purged, "the stalled records were never purged"
        finally:
            os.kill(pid, signal.SIGCONT)
        try:
            return (await asyncio.wait_for(committing, 240)).offsets
        finally:
            await committer.close()

    offsets = asyncio.run(scenario())
    made, _Watched.made = len(_Watched.made), []  # none outlives the test's broker

    assert made == 2, "the batch was committed on a new producer"
    assert committer.counters["transactions.retried"] == 1
    assert [k for k, _ in read_keys(bootstrap, outcomes)] == [b"wait-1"]
    stored = read_keys(bootstrap, changelog)
    assert [k for k, _ in stored] == [b"wait-1", POSITIONS_KEY]
    assert offsets[0] == stored[-1][1]
