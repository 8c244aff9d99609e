"""The skeleton of the chaos benches (crash, cluster, rolling, upgrade, zombie).

Each runs a scenario of `streams.testing` once per guarantee (or more), with
topics of its own, judges every wait on the contract's clock and writes:

* the result file as each run ends (a run of hours leaves what it measured
  when a later one fails): the envelope of `results`, the machine at the
  start and at the end, and every run's report;
* ``bench/results/<name>-latest.md``: when, where, which file, and the table;
* exit status 1 when a run `broke` the contract.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from streams.config import Guarantee, Settings
from streams.testing.chaos import chaos_settings
from streams.testing.harness.figures import seconds
from streams.testing.harness.host import machine
from streams.testing.harness.report import table
from streams.testing.harness.results import (
    RESULTS,
    default_out,
    envelope,
    measured_line,
    write_json,
)

BOTH = "both"


def parser(doc: str, name: str, *, waits: int | None = None, rate: float | None = None,
           port: tuple[int, str] | None = None, seed: bool = True,
           rate_help: str = "requests offered per second") -> argparse.ArgumentParser:
    """The options every chaos bench has: --waits and --rate (the load, when given),
    --port (default, help), --partitions, --guarantee, --seed, --keep-logs and --out
    (bench/results/<name>-<ts>.json); the bench adds its own."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    if waits is not None:
        p.add_argument("--waits", type=int, default=waits)
    if rate is not None:
        p.add_argument("--rate", type=float, default=rate, help=rate_help)
    if port is not None:
        p.add_argument("--port", type=int, default=port[0], help=port[1])
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--guarantee", choices=["at_least_once", "exactly_once", BOTH], default=BOTH)
    if seed:
        p.add_argument("--seed", type=int, default=1)
    p.add_argument("--keep-logs", type=Path, metavar="DIR",
                   help="copy the workers' logs of each run there (<guarantee>-worker-w1.log)")
    p.add_argument("--out", type=Path, default=default_out(name))
    return p


def guarantees(choice: str) -> list[Guarantee]:
    """`--guarantee`: one, or both in their declared order."""
    return list(Guarantee) if choice == BOTH else [Guarantee(choice)]


def run_settings(name: str, bootstrap: str, folder: Path, guarantee: Guarantee,
                 partitions: int, **base: Any) -> Settings:
    """Settings of one run: a prefix of its own (``<name><seconds>``), the chaos topology
    in `folder`, `base` the rest (replication_factor, ...)."""
    prefix = f"{name}{int(time.time())}"
    return chaos_settings(Settings(bootstrap=bootstrap, topic_prefix=prefix,
                                   app_id=f"{prefix}-processor", partitions=partitions, **base),
                          folder, guarantee)


def broke(report: dict[str, Any], actions: bool = False) -> bool:
    """A wait lost, conflicting or wrong; under exactly_once an outcome (with `actions`,
    or an action) written twice."""
    duplicated = report["duplicate_outcomes"] or (actions and report["duplicate_actions"])
    return bool(report["lost"] or report["conflicting"] or report["wrong"]
                or (report["guarantee"] == Guarantee.EXACTLY_ONCE.value and duplicated))


# The latency table of a roll and of an upgrade: per window of the run (before, during,
# each restart, after), the replies in it and how long they took to their outcome, and
# how late the deadlines fired.
WINDOWS = ["guarantee", "window", "replies", "reply→outcome p50 / p99 / max (s)", "escalations",
           "deadline lateness p99 / max (s)"]


def windows(reports: list[dict[str, Any]]) -> list[str]:
    """The lines of the windows table of `reports` (`streams.testing.rolling.latencies`)."""
    return table(WINDOWS, [
        [f"`{r['guarantee']}`", w["window"], f"{w['replies']:,}",
         f"{seconds(w['p50_ms'])} / {seconds(w['p99_ms'])} / {seconds(w['max_ms'])}",
         f"{w['escalations']:,}", f"{seconds(w['late_p99_ms'])} / {seconds(w['late_max_ms'])}"]
        for r in reports for w in r["windows"]])


class RunBook:
    """The runs of one bench, written to `out` as each ends; `fields` go in the file too."""

    def __init__(self, benchmark: str, out: Path, keep_logs: Path | None = None,
                 **fields: Any) -> None:
        self.benchmark = benchmark
        self.out = out
        self.keep_logs = keep_logs
        self.fields = fields
        self.started = datetime.now(UTC)
        self.at_start = machine()
        self.reports: list[dict[str, Any]] = []
        RESULTS.mkdir(parents=True, exist_ok=True)

    def each(self, choice: str) -> Iterator[tuple[Guarantee, Path]]:
        """Each guarantee of `--guarantee` with a folder of its own (removed after its run)."""
        name = self.benchmark.removesuffix("_bench")
        for guarantee in guarantees(choice):
            with tempfile.TemporaryDirectory(prefix=f"xwait-{name}-") as tmp:
                yield guarantee, Path(tmp)

    def settings(self, bootstrap: str, folder: Path, guarantee: Guarantee, partitions: int,
                 **base: Any) -> Settings:
        """`run_settings` of a run of this bench."""
        return run_settings(self.benchmark.removesuffix("_bench"), bootstrap, folder, guarantee,
                            partitions, **base)

    def add(self, report: dict[str, Any], folder: Path, label: str) -> dict[str, Any]:
        """Keep the run's worker logs (``<label>-<log>``), print its counts, write the file."""
        if self.keep_logs is not None:
            self.keep_logs.mkdir(parents=True, exist_ok=True)
            for log in folder.glob("*.log"):
                shutil.copy(log, self.keep_logs / f"{label}-{log.name}")
        self.reports.append(report)
        print(json.dumps({k: v for k, v in report.items() if k != "events"}, default=str),
              flush=True)
        write_json(self.out, envelope(self.benchmark, self.started, **self.fields,
                                      measured=datetime.now(UTC).isoformat(),
                                      machine={"start": self.at_start, "end": machine()},
                                      runs=self.reports))
        return report

    def finish(self, table: str, *, when: str | None = None, what: str = "", after: str = "",
               load_digits: int = 2) -> None:
        """``<name>-latest.md`` (the measured line, the table) and the table printed."""
        name = self.benchmark.removesuffix("_bench")
        line = measured_line(self.at_start, when=when, what=what, load_digits=load_digits)
        (RESULTS / f"{name}-latest.md").write_text(
            f"{line}{after}: `{self.out.name}`\n\n{table}\n")
        print(table)


__all__ = ["WINDOWS", "RunBook", "broke", "guarantees", "parser", "run_settings", "windows"]
