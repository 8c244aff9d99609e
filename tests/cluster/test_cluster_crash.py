"""Nothing lost and the race kept while the brokers of a three-node cluster fail under load.

A CI-sized run of `streams.testing.cluster_chaos` (bench/cluster_bench.py
runs the long one): one worker, the W1 load, topics with three replicas and
min.insync.replicas=2; the broker leading the most input partitions killed
with kill -9 at the same moment as the worker, or the active controller.  Every wait is judged on
the contract's clock.  The counts and each failover's reply->outcome
latency go to .xwait/reports/crash-cluster-<guarantee>.json.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streams import topics
from streams.config import Guarantee, Settings
from streams.testing.chaos import chaos_settings
from streams.testing.cluster_chaos import ClusterPlan, KafkaCluster, run_cluster_chaos
from tests.cluster.conftest import KafkaCluster as ScriptCluster
from tests.prefixes import unique_prefix

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("guarantee", list(Guarantee))
def test_broker_failures_under_load_lose_nothing_and_decide_every_wait_by_the_contracts_clock(
    kafka_cluster: ScriptCluster, tmp_path: Path, guarantee: Guarantee,
) -> None:
    prefix = unique_prefix("k")
    base = Settings(bootstrap=kafka_cluster.bootstrap, topic_prefix=prefix,
                    app_id=f"{prefix}-processor", partitions=4, replication_factor=3)
    settings = chaos_settings(base, tmp_path, guarantee)
    topics.create(settings, topics.load_specs(settings))
    # One failure a run, sized for CI (60-90 s on two cores beside three brokers,
    # whose restarts took 8-45 s there): at_least_once loses the broker leading
    # the most input partitions and the worker at the same moment; exactly_once
    # (its transaction coordinators on the brokers) the active controller.  The
    # leader kills, the wiped disk and both guarantees through each are the
    # long run's (bench/cluster_bench.py).
    first = guarantee is Guarantee.AT_LEAST_ONCE
    plan = ClusterPlan(waits=3_000, rate=50.0, leader_kills=0, down_s=8.0,
                       controller_kill=not first, wipe=False, worker_with_broker=first,
                       settle_s=240.0)
    report = run_cluster_chaos(settings, tmp_path, plan,
                               KafkaCluster(kafka_cluster.base, kafka_cluster.home))
    out = REPO / ".xwait" / "reports"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"crash-cluster-{guarantee.value}.json").write_text(
        json.dumps(report.as_dict(), indent=2) + "\n")

    assert report.lost == 0, f"{report.lost} waits never ended: {report.examples}"
    assert report.conflicting == 0, f"{report.conflicting} ended twice: {report.examples}"
    assert report.wrong == 0, f"{report.wrong} waits ended the wrong way: {report.examples}"
    # Three replicas: a record may be committed a while after its append, and the
    # worker's probes allow for it (XWAIT_COMMIT_GRACE, auto).
    assert report.worker_grace_ms == [report.commit_grace_ms] == [200], (
        report.worker_grace_ms, report.commit_grace_ms)
    assert report.reviews > 0
    kills = [e for e in report.events if e["event"].startswith("kill -9")]
    assert len(kills) == 1
    assert all(f["replies"] > 0 for f in report.failovers), report.failovers
    if guarantee is Guarantee.EXACTLY_ONCE:
        assert report.duplicate_outcomes == 0, "read_committed sees each outcome once"
