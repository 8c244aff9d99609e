"""A rolling restart under load: each worker of three restarted in turn loses nothing.

A CI-sized run of `streams.testing.rolling` (bench/rolling_bench.py runs the
issue's 500 waits/s): three workers, each with standbys, under the W1 load;
each in turn gets SIGTERM, is started again on its own disk, and the next
waits until every worker's `/readyz` answers 200, as a StatefulSet's rolling
update does.  The load runs until the whole roll is done and a tail after it,
however long the restarts take to be ready (a fixed 4,500 waits at 75/s ended
before the third restart on a busy machine, where each took 21-28 s), so that
every restart has replies to judge.  Every wait is judged on the contract's
clock; the report (.xwait/reports/rolling.json) has the reply->outcome latency
before, during and per restart.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streams import topics
from streams.config import Guarantee, Settings
from streams.testing.chaos import chaos_settings
from streams.testing.rolling import RollPlan, run_rolling
from tests.prefixes import unique_prefix

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
# The load's rate, and how long it goes on after the last restart's window: replies
# (sent up to 7.8 s after their requests) to requests offered during the last restart.
RATE = 75.0
TAIL_S = 10.0
# The most waits the load may offer: 15 minutes of it, more than a roll that has not
# failed its readiness timeouts takes.
WAITS_CAP = int(RATE * 900)


def test_each_worker_restarted_in_turn_under_load_loses_nothing_and_keeps_replies_flowing(
    kafka_bootstrap: str, tmp_path: Path,
) -> None:
    prefix = unique_prefix("r")
    base = Settings(bootstrap=kafka_bootstrap, topic_prefix=prefix,
                    app_id=f"{prefix}-processor", partitions=6)
    settings = chaos_settings(base, tmp_path, Guarantee.AT_LEAST_ONCE)
    topics.create(settings, topics.load_specs(settings))
    plan = RollPlan(waits=WAITS_CAP, rate=RATE, workers=3, warmup_s=8.0, pause_s=3.0,
                    settle_s=180.0, tail_s=TAIL_S)
    report = run_rolling(settings, tmp_path, plan)
    out = REPO / ".xwait" / "reports"
    out.mkdir(parents=True, exist_ok=True)
    (out / "rolling.json").write_text(json.dumps(report.as_dict(), indent=2) + "\n")

    chaos = report.chaos
    assert chaos.lost == 0, (f"{chaos.lost} waits never ended (stalled: {chaos.stalled}): "
                             f"{chaos.examples}")
    assert chaos.conflicting == 0, f"{chaos.conflicting} ended twice: {chaos.examples}"
    assert chaos.wrong == 0, f"{chaos.wrong} waits ended the wrong way: {chaos.examples}"
    assert chaos.reviews > 0
    assert [r.worker for r in report.restarts] == ["w1", "w2", "w3"]
    assert not report.load_ended_early and report.load_ended_ms >= report.restarts[-1].end_ms, (
        "the load ran until the roll was done, whatever the restarts took: "
        f"{[(r.worker, r.ready_s, r.fleet_ready_s) for r in report.restarts]}")
    assert all(r.exit_code == 0 for r in report.restarts), \
        "SIGTERM stops a worker cleanly (no SIGKILL after the grace period)"
    roll = report.window("roll")
    assert roll["replies"] > 0 and all(
        report.window(f"restart {i + 1} ({r.worker})")["replies"] > 0
        for i, r in enumerate(report.restarts))
    # How long replies wait during a restart is a figure, the rolling bench's
    # (bench/rolling_bench.py: its target 5 s at 500 waits/s), not asserted here: beside
    # the rest of the suite on a busy machine the roll's p99 was 19 s, its p50 0.15 s.
