"""The documented upgrade from the previous release, under load: nothing lost, nothing mixed.

A CI-sized run of `streams.testing.upgrade` (bench/upgrade_bench.py runs the
long one): the previous release (0.1.0, CHANGELOG.md), installed from this
repository's history into a virtualenv of its own, runs two workers under the
W1 load; a worker of this build started beside them refuses with one line;
then every old worker is stopped and two of this build start on the same
data folders; an old worker started again later makes both stop with that line.
Every wait - those the old fleet parked included - ends once,
the way the broker's clock says.  Skipped in a checkout without that commit
(a shallow clone).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streams.config import Guarantee, Settings
from streams.testing.chaos import chaos_settings
from streams.testing.releases import PREVIOUS, ReleaseUnavailable, install_release, release_commit
from streams.testing.upgrade import REFUSED, UpgradePlan, run_upgrade
from tests.prefixes import unique_prefix

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def test_a_fleet_of_the_previous_release_replaced_under_load_loses_no_wait(
    kafka_bootstrap: str, tmp_path: Path,
) -> None:
    try:
        commit = release_commit(PREVIOUS)
    except ReleaseUnavailable as exc:
        pytest.skip(f"{PREVIOUS} is not in this checkout's history: {exc}")
    release = install_release(PREVIOUS, commit)
    prefix = unique_prefix("u")
    base = Settings(bootstrap=kafka_bootstrap, topic_prefix=prefix,
                    app_id=f"{prefix}-processor", partitions=4)
    settings = chaos_settings(base, tmp_path, Guarantee.AT_LEAST_ONCE)
    plan = UpgradePlan(waits=3_000, rate=50.0, warmup_s=20.0, settle_s=180.0)
    report = run_upgrade(settings, tmp_path, release, plan)
    out = REPO / ".xwait" / "reports"
    out.mkdir(parents=True, exist_ok=True)
    (out / "upgrade.json").write_text(json.dumps(report.as_dict(), indent=2) + "\n")

    assert report.refusal["exit_code"] == 2, report.refusal
    assert REFUSED in report.refusal["line"] and "stop every worker" in report.refusal["line"]
    chaos = report.chaos
    assert chaos.lost == 0, f"{chaos.lost} waits never ended: {chaos.examples}"
    assert chaos.conflicting == 0, f"{chaos.conflicting} ended twice: {chaos.examples}"
    assert chaos.wrong == 0, f"{chaos.wrong} waits ended the wrong way: {chaos.examples}"
    carried = report.carried["by_outcome"]
    assert report.carried["waits"] > 0 and any(k.startswith("RECEIVED") for k in carried) \
        and any(k.startswith("ESCALATED") for k in carried), \
        f"waits parked by {PREVIOUS} go on to be received and escalated: {carried}"
    assert sum(report.upgrade["restored_records"].values()) > 0, \
        "the new workers restored what the old release wrote to the changelog"
    assert report.late_join["all_refused"], \
        f"an old worker joining later stops every new one, which says why: {report.late_join}"
