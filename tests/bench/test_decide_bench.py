"""bench/decide_bench.py decides every wait of its drain and reports each run (no broker)."""

from __future__ import annotations

import gc
import json
from pathlib import Path

from tests.bench.loading import load_bench

decide = load_bench("decide_bench")


def test_every_wait_of_the_drain_ends_in_every_run_and_the_collector_is_restored(
        tmp_path: Path) -> None:
    before = gc.get_threshold()
    out = tmp_path / "decide.json"
    assert decide.main(["--waits", "120", "--rounds", "1", "--gc-threshold", "700,20000",
                        "--out", str(out)]) == 0

    runs = json.loads(out.read_text())["runs"]
    assert [r["gc_threshold"] for r in runs] == [700, 20000]
    for run in runs:
        assert run["outcomes"] == 120  # a reply or a review ended each wait
        assert run["counters"]["outcomes.reply_valid"] + run["counters"].get(
            "outcomes.review_accepted", 0) == 120
        assert run["records"] == 240 + run["counters"]["processed.commands"]
        assert run["counters"]["processed.commands"] > 0  # the invalid replies were reviewed
        assert 0 < run["cpu_us_per_record"] <= run["us_per_record"] * 1.05  # one thread's CPU
    assert gc.get_threshold() == before


def test_the_storm_escalates_every_wait_after_both_its_reminders_from_one_timer_each(
        tmp_path: Path) -> None:
    out = tmp_path / "storm.json"
    assert decide.main(["--workload", "storm", "--waits", "90", "--rounds", "1",
                        "--gc-threshold", "20000", "--out", str(out)]) == 0

    report = json.loads(out.read_text())
    assert report["workload"] == "storm"
    counters = report["runs"][0]["counters"]
    assert counters["timers.fired"] == 90  # one per wait, its last due timer
    assert "processed.timers" not in counters  # no timer record
    assert counters["outcomes.deadline_exhausted"] == 90
    assert counters["actions.SEND_REMINDER"] == 180  # the earlier timers fired on the way
    assert counters["actions.RUN_ESCALATION"] == 90


def test_small_batches_on_flushed_caches_decide_the_same(tmp_path: Path) -> None:
    """`--batch 3 --flush-mib 1`: the live worker's small batches on cold caches."""
    out = tmp_path / "cold.json"
    assert decide.main(["--waits", "60", "--rounds", "1", "--gc-threshold", "20000",
                        "--batch", "3", "--flush-mib", "1", "--out", str(out)]) == 0

    report = json.loads(out.read_text())
    assert (report["batch"], report["flush_mib"]) == (3, 1)
    assert report["runs"][0]["outcomes"] == 60
