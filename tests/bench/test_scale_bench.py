"""The scale bench's report: the targets it judges, the table and the plot (no broker)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from streams.testing.scale import report
from streams.testing.scale import waits as mix
from tests.bench.loading import load_bench

scale_bench = load_bench("scale_bench")


def checkpoint(n: int, *, rss: float = 300.0, parks: float = 2000.0, tick: int = 4,
               scan: int = 300, status: float = 5.0, listing: float = 80.0,
               restart: float | None = 8.0, restore: float | None = 20000.0,
               standby: float | None = 3.0, once: bool | None = True) -> dict[str, Any]:
    cp: dict[str, Any] = {
        "n": n, "skipped": {}, "errors": [], "loadavg_measured": [1.5, 1.2, 1.0],
        "memory": {"rss_mib": rss, "vmhwm_mib": rss + 10},
        "disk": {"bytes_per_wait": 700.0},
        "segment": {"parks_per_s": parks, "census": {"missing": 0}},
        "tick_under_load": {"tick_p50_ms": 50, "tick_p99_ms": 500, "scan_us_p50": 900,
                            "scan_us_p99": 2000},
        "tick_idle": {"tick_p50_ms": tick, "tick_p99_ms": tick * 10, "scan_us_p50": scan,
                      "scan_us_p99": scan * 3},
        "api": {"status_ms": {"p50": status / 2, "p99": status},
                "list_ms": {"p50": listing / 2, "p99": listing}},
    }
    if restart is not None:
        cp["restart"] = {"ready_s": restart}
    else:
        cp["skipped"]["restart"] = "above"
    if restore is not None:
        cp["restore"] = {"rows_per_s": restore, "ready_s": n / restore}
    else:
        cp["skipped"]["restore"] = f"N={n} above --skip-restore-above 1000000"
    if standby is not None:
        cp["standby"] = {"ready_s": standby}
    if once is not None:
        cp["sample"] = {"exactly_once": once}
    return cp


def result(*checkpoints: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": "2026-11-30T12:00:00+00:00", "checkpoints": list(checkpoints),
            "parameters": {"partitions": 8},
            "machine": {"nproc": 2, "mem_total_mib": 24000, "cpu": "x86_64"},
            "versions": {"git_commit": "abc"}}


def verdicts(res: dict[str, Any]) -> dict[str, Any]:
    return {t["target"]: t for t in report.targets(res)}


def test_every_target_holds_when_10m_stays_within_the_issue_limits() -> None:
    got = verdicts(result(checkpoint(10_000), checkpoint(10_000_000, rss=1400.0, parks=1700.0,
                                                          tick=7, scan=550, restore=None,
                                                          standby=None)))

    assert {name: t["ok"] for name, t in got.items()} == dict.fromkeys(got, True)
    assert all(t["final"] for t in got.values() if t["target"] != "failover")
    assert got["parks_ratio"]["value"] == 0.85
    assert got["tick_ratio"]["value"] == {"tick_p50": 1.75, "scan_us_p50": 1.833}
    # restore was skipped at 10M: the failover target is judged where it was measured
    assert got["failover"]["at_n"] == 10_000
    assert got["failover"]["value"]["restore_at_n"] == 10_000


def test_a_slower_park_rate_a_dearer_tick_and_a_slow_list_at_scale_are_missed() -> None:
    got = verdicts(result(checkpoint(10_000), checkpoint(1_000_000, parks=1500.0, tick=9,
                                                         listing=4000.0, restore=6000.0,
                                                         standby=12.0, once=False)))

    assert got["parks_ratio"]["ok"] is False and got["parks_ratio"]["value"] == 0.75
    assert got["tick_ratio"]["ok"] is False
    assert got["list"]["ok"] is False and got["status"]["ok"] is True
    assert got["failover"]["ok"] is False
    assert got["timers_exactly_once"]["ok"] is False
    assert got["timers_exactly_once"]["value"] == [1_000_000]
    assert not any(t["final"] for t in got.values())  # 10M was not run


def test_a_single_checkpoint_cannot_judge_a_ratio_and_a_skipped_phase_is_not_a_miss() -> None:
    got = verdicts(result(checkpoint(10_000, restart=None, restore=None, standby=None,
                                     once=None)))

    assert got["parks_ratio"]["ok"] is None and got["tick_ratio"]["ok"] is None
    assert got["restart"]["ok"] is None and got["failover"]["ok"] is None
    assert got["timers_exactly_once"]["ok"] is None


def test_a_wait_the_census_lacks_after_a_takeover_is_reported_lost() -> None:
    fine = checkpoint(10_000)
    fine["segment"]["census"] = {"missing": 0}
    lossy = checkpoint(100_000)
    lossy["restart"]["census"] = {"missing": 0}
    lossy["standby"]["census"] = {"missing": 1}

    got = verdicts(result(fine, lossy))

    assert got["no_lost_waits"]["ok"] is False
    assert got["no_lost_waits"]["value"] == {"100000/standby": 1}
    assert "| 1 |" in report.table(result(fine, lossy)).splitlines()[3]


def test_the_table_has_a_row_per_checkpoint_and_names_each_verdict() -> None:
    res = result(checkpoint(10_000), checkpoint(100_000, listing=900.0, restore=None))

    text = report.table(res)

    lines = text.splitlines()
    assert lines[0].startswith("| N |") and lines[1].startswith("| --- |")
    assert lines[0].count("|") == lines[1].count("|") == lines[2].count("|")
    assert lines[2].startswith("| 10,000 |") and lines[3].startswith("| 100,000 |")
    assert "* list: MISSED at N=100,000 (10M not run)" in text
    assert "1.5/1.2/1.0" in text


def test_the_plot_is_drawn_from_a_result_file_and_published(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "scale-x.json"
    path.write_text(json.dumps(result(checkpoint(10_000), checkpoint(100_000),
                                      checkpoint(1_000_000, restore=None))))
    published = tmp_path / "docs" / "scale.png"

    code = scale_bench.main(["--plot-only", str(path), "--publish", str(published)])

    assert code == 0
    png = path.with_suffix(".png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert published.read_bytes() == png.read_bytes()


def test_the_mix_is_the_same_for_a_seed_and_keeps_its_shares() -> None:
    waits = [mix.planned(1, i, 0.02, 0.02) for i in range(20_000)]

    assert waits[:50] == [mix.planned(1, i, 0.02, 0.02) for i in range(50)]
    assert len({w.key for w in waits}) == len(waits)
    fates = {f: sum(w.fate == f for w in waits) / len(waits) for f in ("review", "suspend")}
    assert 0.015 < fates["review"] < 0.025 and 0.015 < fates["suspend"] < 0.025
    assert {w.definition for w in waits if w.fate == "review"} == set(mix.REVIEWABLE)
    assert {w.definition for w in waits} == set(mix.SHIPPED)


def test_only_the_timers_a_wait_arms_when_it_parks_are_stretched() -> None:
    doc: dict[str, Any] = {
        "name": "probe", "poll": "PT5M", "deadline": "PT2H", "reminder": "R3/PT8H",
        "escalation": [{"target": "x", "deadline": "PT1H"}],
        "stages": [{"name": "a", "deadline": "P2D", "reminder": {"every": "PT1H", "limit": 1}}]}

    changes = mix.stretch_topology(doc, 86_400_000, "P1D")

    assert doc["poll"] == "P1D" and doc["deadline"] == "P1D" and doc["reminder"] == "R3/P1D"
    assert doc["escalation"][0]["deadline"] == "PT1H"
    assert doc["stages"][0]["deadline"] == "P2D"
    assert doc["stages"][0]["reminder"]["every"] == "P1D"
    assert len(changes) == 4
