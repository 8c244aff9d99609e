"""GET /metrics: Prometheus text format, and counters that move with real waits."""

from __future__ import annotations

import re
import time

import pytest

from streams.partitioning import partition_for
from tests.console.conftest import TOKEN, Cluster, eventually, http, new_key

pytestmark = pytest.mark.kafka

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_]+="(?:[^"\\]|\\.)*",?)*\})? '
                    r'(-?[0-9.e+]+|\+Inf|NaN)$')
LABEL = re.compile(r'([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"')


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


def total(cluster: Cluster, name: str, **labels: str) -> float:
    """The sum of a metric over both workers (each reports its own partitions)."""
    value = 0.0
    for w in cluster.workers:
        status, text = http("GET", f"{w.url}/metrics")
        assert status == 200
        for n, lab, v in parse(text):
            if n == name and all(lab.get(k) == x for k, x in labels.items()):
                value += v
    return value


def test_metrics_are_prometheus_text_with_every_family(cluster: Cluster) -> None:
    status, text = http("GET", f"{cluster.w1.url}/metrics")
    assert status == 200
    parse(text)
    for family in ("xwait_parked_waits", "xwait_timers_due", "xwait_timers_emitted_total",
                   "xwait_deadline_lateness_seconds", "xwait_outcomes_total",
                   "xwait_rejections_total", "xwait_misrouted_total", "xwait_consumer_lag"):
        assert f"# TYPE {family} " in text


def test_counters_follow_waits_outcomes_rejections_and_misrouted_records(
        cluster: Cluster) -> None:
    delivered_before = total(cluster, "xwait_outcomes_total", reason="delivered")
    undecodable_before = total(cluster, "xwait_rejections_total", reason="undecodable")
    misrouted_before = total(cluster, "xwait_misrouted_total")

    parked, delivered = new_key(), new_key()
    cluster.start(parked, "slow-approval")
    cluster.start(delivered, "slow-approval")
    cluster.wait_state(delivered, "parked")
    cluster.wait_state(parked, "parked")
    http("POST", f"{cluster.w1.url}/xwait/api/waits/{delivered}/deliver",
         {"responseData": {"decision": "approved"}}, token=TOKEN)
    cluster.client.raw("replies", new_key().encode(), b"\x00garbage")
    wrong_key = new_key()
    right = partition_for(wrong_key.encode(), cluster.settings.partitions)
    cluster.client.send("requests", wrong_key, {
        "correlationKey": wrong_key, "definition": "slow-approval",
        "requestedAt": int(time.time() * 1000)}, partition=(right + 1) % 4)
    cluster.client.flush()
    cluster.wait_state(delivered, "done")
    cluster.wait_state(wrong_key, "parked")  # forwarded to its partition, then parked

    eventually(lambda: total(cluster, "xwait_outcomes_total", reason="delivered"),
               lambda v: v >= delivered_before + 1, 60, "the delivered outcome counted")
    eventually(lambda: total(cluster, "xwait_rejections_total", reason="undecodable"),
               lambda v: v >= undecodable_before + 1, 60, "the rejection counted")
    assert total(cluster, "xwait_misrouted_total") >= misrouted_before + 1
    # The gauge is cached for a few seconds.
    eventually(lambda: total(cluster, "xwait_parked_waits", state="parked",
                             definition="slow-approval"),
               lambda v: v >= 2, 60, "parked waits in the gauge")
    # Lag is reported for the partitions faust has committed since it got them:
    # the one that took the misrouted record and forwarded it, at least.
    lag_line = f'xwait_consumer_lag{{topic="{cluster.settings.topic("requests")}"'
    eventually(lambda: [http("GET", f"{w.url}/metrics")[1] for w in cluster.workers],
               lambda texts: any(lag_line in t for t in texts), 60, "a consumer lag line")


def test_timers_emitted_and_lateness_are_measured(cluster: Cluster) -> None:
    key = new_key()
    cluster.start(key, "fast-approval")  # a reminder every 2 s
    eventually(lambda: cluster.status(key),
               lambda r: r[0] == 200 and r[1].get("remindersSent", 0) >= 1, 60,
               "a reminder sent")
    assert total(cluster, "xwait_timers_emitted_total") >= 1
    count = eventually(
        lambda: total(cluster, "xwait_deadline_lateness_seconds_count", kind="reminder"),
        lambda v: v >= 1, 30, "a reminder's lateness observed")
    inf = total(cluster, "xwait_deadline_lateness_seconds_bucket", kind="reminder", le="+Inf")
    assert inf >= count
    http("POST", f"{cluster.w1.url}/xwait/api/waits/{key}/cancel", {"reason": "test over"},
         token=TOKEN)
