"""streams.testing.harness: what every bench writes beside its figures, and how a chaos bench
judges and records its runs (no broker)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from streams.testing.harness import figures, runbook
from streams.testing.harness.report import table
from streams.testing.harness.results import envelope


def test_every_result_says_which_machine_and_commit_it_was_measured_on() -> None:
    got = envelope("x_bench", datetime(2026, 12, 6, 10, tzinfo=UTC), complete=True)

    assert got["benchmark"] == "x_bench"
    assert got["timestamp"] == "2026-12-06T10:00:00+00:00"
    assert got["commit"] not in ("", None)
    assert {"host", "nproc", "mem_total_mib", "loadavg", "python"} <= set(got["machine"])
    assert got["versions"]["git_commit"].startswith(got["commit"])
    assert got["complete"] is True


def report(guarantee: str, **counts: int) -> dict[str, Any]:
    return {"guarantee": guarantee, "lost": 0, "conflicting": 0, "wrong": 0,
            "duplicate_outcomes": 0, "duplicate_actions": 0, "events": [{"at": 1}], **counts}


@pytest.mark.parametrize(("run", "actions", "broken"), [
    (report("at_least_once"), False, False),
    (report("at_least_once", duplicate_outcomes=3), False, False),  # at least once: allowed
    (report("exactly_once", duplicate_outcomes=1), False, True),
    (report("exactly_once", duplicate_actions=1), False, False),
    (report("exactly_once", duplicate_actions=1), True, True),
    (report("at_least_once", lost=1), False, True),
    (report("at_least_once", wrong=1), False, True),
    (report("at_least_once", conflicting=1), False, True),
])
def test_a_run_breaks_the_contract_by_a_wrong_wait_or_a_duplicate_under_exactly_once(
        run: dict[str, Any], actions: bool, broken: bool) -> None:
    assert runbook.broke(run, actions=actions) is broken


def test_a_runbook_writes_every_run_as_it_ends_and_the_latest_table_at_the_end(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(runbook, "RESULTS", tmp_path)
    out = tmp_path / "crash-20261206T100000Z.json"
    book = runbook.RunBook("crash_bench", out, tmp_path / "logs")
    folders = []
    for guarantee, folder in book.each("both"):
        (folder / "worker-w1.log").write_text(f"{guarantee.value} log\n")
        book.add(report(guarantee.value), folder, guarantee.value)
        folders.append(folder)
        written = json.loads(out.read_text())
        assert [r["guarantee"] for r in written["runs"]] == [
            g.value for g, _ in zip(runbook.guarantees("both"), folders, strict=False)]
    book.finish("| table |", when="2026-12-06")

    assert not any(f.exists() for f in folders)  # each run's folder goes when it ends
    assert (tmp_path / "logs" / "exactly_once-worker-w1.log").read_text() == "exactly_once log\n"
    written = json.loads(out.read_text())
    assert written["benchmark"] == "crash_bench"
    assert set(written["machine"]) == {"start", "end"}
    assert "events" not in capsys.readouterr().out.splitlines()[0]
    latest = (tmp_path / "crash-latest.md").read_text().splitlines()
    assert latest[0].startswith("Measured 2026-12-06 on ")
    assert latest[0].endswith(" at the start): `crash-20261206T100000Z.json`")
    assert latest[2:] == ["| table |"]


def test_a_markdown_table_has_its_header_a_separator_and_a_line_a_row() -> None:
    assert table(["a", "b"], [[1, "x"], ["–", 2.5]]) == [
        "| a | b |", "| --- | --- |", "| 1 | x |", "| – | 2.5 |"]


def test_percentiles_interpolate_and_a_summary_says_how_many() -> None:
    assert figures.percentile([], 50) is None
    assert figures.percentile([10, 20, 30, 40], 50) == 25
    assert figures.nearest_rank([10, 20, 30, 40], 0.5) == 30
    assert figures.summary([1.04, 2.0, 3.0]) == {"p50": 2.0, "p99": 3.0, "max": 3.0,
                                                 "count": 3}
    assert figures.summary([], count="n") == {"p50": None, "p99": None, "max": None, "n": 0}
    assert figures.per_s(1000, 10_000, 12_000) == 500.0
    assert figures.per_s(1000, 12_000, 12_000) is None


def test_a_topology_copies_the_topics_and_edits_only_what_the_bench_changes(
        tmp_path: Path) -> None:
    import yaml

    from streams.testing.harness.topology import BENCH_WAITS, make_topology
    from streams.testing.park import park_topology

    changes = park_topology(tmp_path / "park", "PT7S")

    assert changes == []
    docs = {p.stem: yaml.safe_load(p.read_text()) for p in (tmp_path / "park" / "waits").glob("*")}
    assert docs["park-bench"]["deadline"] == "PT7S"
    assert {name for name, doc in docs.items() if doc.get("deadline") == "PT7S"} == {"park-bench"}
    assert (tmp_path / "park" / "topics.yaml").is_file()
    make_topology(tmp_path / "kit", [BENCH_WAITS / "bench-long.yaml"])
    assert ((tmp_path / "kit" / "waits" / "bench-long.yaml").read_bytes()
            == (BENCH_WAITS / "bench-long.yaml").read_bytes())


def test_option_types_refuse_what_a_run_cannot_use_before_it_starts() -> None:
    import argparse

    from streams.testing.harness.options import duration, positive, share

    assert positive("3") == 3 and share("0.25") == 0.25 and share("1") == 1.0
    assert duration("auto")("auto") == "auto" and duration()("PT20S") == "PT20S"
    for parse, text in ((positive, "0"), (positive, "x"), (share, "1.5"), (share, "-0.1"),
                        (duration("auto"), "banana"), (duration(), "auto")):
        with pytest.raises(argparse.ArgumentTypeError):
            parse(text)


def test_a_plan_takes_the_options_of_its_fields_and_keeps_its_defaults_for_the_rest() -> None:
    import argparse

    from streams.testing.harness.options import plan_of
    from streams.testing.park import ParkPlan

    args = argparse.Namespace(waits=300, deadline="PT9S", out=None, unrelated=1)

    plan = plan_of(ParkPlan, args, seed=5)

    assert (plan.waits, plan.deadline, plan.seed) == (300, "PT9S", 5)
    assert plan.reply_fraction == ParkPlan().reply_fraction


def test_a_scratch_keeps_what_failed_and_leaves_nothing_behind(tmp_path: Path) -> None:
    from streams.testing.harness.scratch import Scratch

    with Scratch("x_bench", "127.0.0.1:9", 2, workdir=tmp_path) as scratch:
        assert scratch.prefix.startswith("xbench-")
        assert scratch.settings.topic_prefix == scratch.prefix
        raise ValueError("boom")

    assert scratch.errors == ["ValueError: boom"]
    assert not scratch.folder.exists()
    assert scratch.topics_deleted == 0  # the broker was never reached: nothing to delete
