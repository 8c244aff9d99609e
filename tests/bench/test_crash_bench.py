"""bench/crash_bench.py puts the long run's counts in docs/guarantees.md as measured (no broker)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.bench.loading import REPO, load_bench

crash_bench = load_bench("crash_bench")


def report(guarantee: str, lost: int, duplicates: int) -> dict[str, Any]:
    return {"guarantee": guarantee, "waits": 100_000, "lost": lost, "conflicting": 0, "wrong": 0,
            "duplicate_outcomes": duplicates, "duplicate_actions": 2 * duplicates,
            "seconds": 600.0, "events": [{"event": "kill -9", "backlog": 5000}],
            "plan": {"kills": 20, "empty_disk": 4, "broker_restarts": 3, "joins": 5}}


README = """# x

| run | guarantee | waits | kill -9 (on an empty disk) | broker restarts | joins/leaves | lost | conflicting | wrong | duplicate outcomeIds | duplicate actionIds |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
| long run, 2026-01-01 | `at_least_once` | 9 | 1 (0) | 0 | 0 | 7 | 0 | 0 | 0 | 0 |
| CI, 2026-01-01 | `exactly_once` | 1,600 | 3 (1) | 0 | 1 | 0 | 0 | 0 | 0 | 0 |

after
"""  # noqa: E501 - a README table row


def test_a_long_run_goes_above_the_earlier_runs_which_stay(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(README)
    result = tmp_path / "crash-20261130T203300Z.json"
    result.write_text(json.dumps({"runs": [report("at_least_once", 0, 81),
                                           report("exactly_once", 0, 0)]}))
    for _ in range(2):  # published twice: its rows stand once
        assert crash_bench.main(["--render", str(result), "--publish", str(readme)]) == 0
    lines = readme.read_text().splitlines()
    assert lines[4:8] == [
        "| long run, 2026-11-30 | `at_least_once` | 100,000 | 20 (4) | 3 | 5 | 0 | 0 | 0 | 81 "
        "| 162 |",
        "| long run, 2026-11-30 | `exactly_once` | 100,000 | 20 (4) | 3 | 5 | 0 | 0 | 0 | 0 | 0 |",
        "| long run, 2026-01-01 | `at_least_once` | 9 | 1 (0) | 0 | 0 | 7 | 0 | 0 | 0 | 0 |",
        "| CI, 2026-01-01 | `exactly_once` | 1,600 | 3 (1) | 0 | 1 | 0 | 0 | 0 | 0 | 0 |",
    ]
    assert lines[-1] == "after"


def test_the_guarantees_page_has_the_table_the_long_run_publishes_to() -> None:
    text = (REPO / "docs" / "guarantees.md").read_text()
    assert crash_bench.GUARANTEES_HEADER in text
    rows = [line for line in text.splitlines() if line.startswith(crash_bench.LONG_RUN)]
    assert {row.split("|")[2].strip() for row in rows} == {"`at_least_once`", "`exactly_once`"}
