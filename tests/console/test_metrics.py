"""GET /metrics: prometheus_client's text format, counters that move with real waits, and a
Grafana dashboard that queries only what is exported."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from streams.partitioning import partition_for
from tests.console.conftest import Cluster, eventually, http, new_key

pytestmark = pytest.mark.kafka

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "deploy" / "grafana" / "xwait-dashboard.json"
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_]+="(?:[^"\\]|\\.)*",?)*\})? '
                    r'(-?[0-9.e+-]+|\+Inf|NaN)$')
LABEL = re.compile(r'([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"')
METRIC_NAME = re.compile(r"\b((?:xwait|process|python)_[a-z0-9_]+)\b")


def parse(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Every line is a HELP/TYPE comment or a sample; anything else fails the test."""
    samples = []
    for line in text.splitlines():
        if line.startswith(("# HELP ", "# TYPE ")):
            continue
        m = SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        samples.append((m.group(1), dict(LABEL.findall(m.group(2) or "")), float(m.group(4))))
    return samples


def scrape(cluster: Cluster) -> list[tuple[str, dict[str, str], float]]:
    samples = []
    for w in cluster.workers:
        status, text = http("GET", f"{w.url}/metrics", token=None)  # counts only: no token
        assert status == 200
        samples += parse(text)
    return samples


def total(cluster: Cluster, name: str, **labels: str) -> float:
    """The sum of a metric over both workers (each reports its own partitions)."""
    return sum(v for n, lab, v in scrape(cluster)
               if n == name and all(lab.get(k) == x for k, x in labels.items()))


def test_metrics_are_prometheus_text_with_every_family(cluster: Cluster) -> None:
    status, text = http("GET", f"{cluster.w1.url}/metrics", token=None)
    assert status == 200
    names = {n for n, _, _ in parse(text)}
    for family in ("process_resident_memory_bytes", "process_cpu_seconds_total",
                   "python_gc_collections_total",
                   "xwait_build_info", "xwait_ready", "xwait_parked_waits",
                   "xwait_finished_waits", "xwait_timers_due", "xwait_timers_emitted_total",
                   "xwait_timer_lateness_seconds_bucket", "xwait_actions_total",
                   "xwait_outcomes_total", "xwait_wait_duration_seconds_count",
                   "xwait_record_latency_seconds_bucket", "xwait_rejections_total",
                   "xwait_misrouted_total", "xwait_rebalances_total",
                   "xwait_commit_failures_total", "xwait_transactions_retried_total",
                   "xwait_producer_failures_total",
                   "xwait_consumer_lag", "xwait_owned_partitions"):
        assert family in names, family
    assert "xwait_deadline_lateness_seconds" not in text  # renamed: it measures every timer
    assert "_created" not in text


def test_a_worker_times_the_garbage_collector_it_tuned(cluster: Cluster) -> None:
    stats = cluster.w1.stats()
    assert stats is not None
    assert stats["gcThreshold"][0] == 20_000  # XWAIT_GC_THRESHOLD's default
    passes = sum(stats["gcPasses"])
    assert passes == stats["latencyMs"].get("gc_us", {}).get("n", 0)


def test_series_known_in_advance_are_zero_not_missing(cluster: Cluster) -> None:
    samples = scrape(cluster)
    parked = {(lab["state"], lab["definition"]) for n, lab, _ in samples
              if n == "xwait_parked_waits"}
    for definition in ("fast-approval", "slow-approval", "fast-two-stage"):
        for state in ("parked", "in_review", "suspended"):
            assert (state, definition) in parked
    outcomes = {(lab["outcome"], lab["reason"], lab["definition"]) for n, lab, _ in samples
                if n == "xwait_outcomes_total"}
    assert ("ESCALATED", "deadline_exhausted", "fast-probe") in outcomes
    actions = {lab["action"] for n, lab, _ in samples if n == "xwait_actions_total"}
    assert actions >= {"SEND_REQUEST", "SEND_REMINDER", "RUN_ESCALATION", "CLOSE_OUT", "POLL"}
    reasons = {lab["reason"] for n, lab, _ in samples if n == "xwait_rejections_total"}
    assert reasons >= {"late", "unmatched", "undecodable", "deadline_passed", "too_large"}
    # Consumer lag for every owned input partition, on each worker.
    for w in cluster.workers:
        owned = set(w.stats()["ownedPartitions"])  # type: ignore[index]
        _, text = http("GET", f"{w.url}/metrics", token=None)
        lag = {(lab["topic"], int(lab["partition"])) for n, lab, _ in parse(text)
               if n == "xwait_consumer_lag"}
        topics = {cluster.settings.topic(t) for t in ("requests", "replies", "commands",
                                                      "timers")}
        assert lag == {(t, p) for t in topics for p in owned}
        ready = [v for n, _, v in parse(text) if n == "xwait_ready"]
        assert ready == [1.0]


def test_counters_follow_waits_outcomes_rejections_and_misrouted_records(
        cluster: Cluster) -> None:
    delivered_before = total(cluster, "xwait_outcomes_total", outcome="RECEIVED",
                             reason="delivered", definition="slow-approval")
    durations_before = total(cluster, "xwait_wait_duration_seconds_count", outcome="RECEIVED",
                             definition="slow-approval")
    undecodable_before = total(cluster, "xwait_rejections_total", reason="undecodable")
    misrouted_before = total(cluster, "xwait_misrouted_total")
    requests_before = total(cluster, "xwait_actions_total", action="SEND_REQUEST")

    parked, delivered = new_key(), new_key()
    cluster.start(parked, "slow-approval")
    cluster.start(delivered, "slow-approval")
    cluster.wait_state(delivered, "parked")
    cluster.wait_state(parked, "parked")
    http("POST", f"{cluster.w1.url}/xwait/api/waits/{delivered}/deliver",
         {"responseData": {"decision": "approved"}, "operator": "mo"})
    cluster.client.raw("replies", new_key().encode(), b"\x00garbage")
    wrong_key = new_key()
    right = partition_for(wrong_key.encode(), cluster.settings.partitions)
    cluster.client.send("requests", wrong_key, {
        "correlationKey": wrong_key, "definition": "slow-approval",
        "requestedAt": int(time.time() * 1000)}, partition=(right + 1) % 4)
    cluster.client.flush()
    cluster.wait_state(delivered, "done")
    cluster.wait_state(wrong_key, "parked")  # forwarded to its partition, then parked

    eventually(lambda: total(cluster, "xwait_outcomes_total", outcome="RECEIVED",
                             reason="delivered", definition="slow-approval"),
               lambda v: v >= delivered_before + 1, 60, "the delivered outcome counted")
    assert total(cluster, "xwait_wait_duration_seconds_count", outcome="RECEIVED",
                 definition="slow-approval") >= durations_before + 1
    eventually(lambda: total(cluster, "xwait_rejections_total", reason="undecodable"),
               lambda v: v >= undecodable_before + 1, 60, "the rejection counted")
    assert total(cluster, "xwait_misrouted_total") >= misrouted_before + 1
    assert total(cluster, "xwait_actions_total", action="SEND_REQUEST") >= requests_before + 3
    assert total(cluster, "xwait_record_latency_seconds_count",
                 topic="requests") >= 3
    assert total(cluster, "xwait_rebalances_total") >= 2  # each worker took an assignment
    # The gauge is cached for a few seconds.
    eventually(lambda: total(cluster, "xwait_parked_waits", state="parked",
                             definition="slow-approval"),
               lambda v: v >= 2, 60, "parked waits in the gauge")


def test_timers_emitted_and_their_lateness_are_measured(cluster: Cluster) -> None:
    key = new_key()
    cluster.start(key, "fast-approval")  # a reminder every 2 s
    eventually(lambda: cluster.status(key),
               lambda r: r[0] == 200 and r[1].get("remindersSent", 0) >= 1, 60,
               "a reminder sent")
    assert total(cluster, "xwait_timers_emitted_total") >= 1
    count = eventually(
        lambda: total(cluster, "xwait_timer_lateness_seconds_count", kind="reminder"),
        lambda v: v >= 1, 30, "a reminder's lateness observed")
    inf = total(cluster, "xwait_timer_lateness_seconds_bucket", kind="reminder", le="+Inf")
    assert inf >= count
    http("POST", f"{cluster.w1.url}/xwait/api/waits/{key}/cancel",
         {"reason": "test over", "operator": "tess"})


def test_the_grafana_dashboard_queries_only_exported_metrics(cluster: Cluster) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    queried = {name for panel in dashboard["panels"] for target in panel["targets"]
               for name in METRIC_NAME.findall(target["expr"])}
    queried |= set(METRIC_NAME.findall(json.dumps(dashboard["templating"])))
    assert len(queried) >= 15
    exported = {n for n, _, _ in scrape(cluster)}
    assert sorted(queried - exported) == []


def test_every_outcome_reason_has_its_exit_so_its_series_is_exported_at_zero() -> None:
    from streams.console.metrics import OUTCOME_OF
    from streams.core import OutcomeReason

    assert set(OUTCOME_OF) == set(OutcomeReason)
