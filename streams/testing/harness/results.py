"""One result envelope for every bench: what ran, when, on which machine, at which commit.

Every bench writes its result as JSON in the bench folder's `results/` (ignored by git) in
this envelope, the bench's own fields beside it::

    {"benchmark": "flood_bench", "timestamp": "2026-12-06T10:00:00+00:00",
     "commit": "a8b2547", "machine": {...}, "versions": {...}, ...}

`machine` is `host.machine()` (cores, memory, load average, ...); `versions`
the client, frame and store versions with the full commit and whether the
checkout had local changes.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from streams.config import REPO_ROOT
from streams.testing.harness.host import commit, cores, machine, versions

RESULTS = REPO_ROOT / "bench" / "results"


def stamp(at: datetime | None = None) -> str:
    """The time in a result file's name: 20261206T100000Z."""
    return (at or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")


def default_out(name: str, at: datetime | None = None) -> Path:
    """`results/<name>-<stamp>.json` in the bench folder."""
    return RESULTS / f"{name}-{stamp(at)}.json"


def envelope(benchmark: str, started: datetime, **fields: Any) -> dict[str, Any]:
    """The fields every result starts with, then the bench's own."""
    return {"benchmark": benchmark, "timestamp": started.isoformat(timespec="seconds"),
            "commit": commit(), "machine": machine(), "versions": versions(), **fields}


def write_json(path: Path, data: Any) -> Path:
    """`data` as indented JSON (anything else as its text), its folder made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    return path


def measured_line(at_start: dict[str, Any], *, when: str | None = None, what: str = "",
                  load_digits: int = 2) -> str:
    """The first words of a `-latest.md`: when (today by default) and where (the
    `machine()` at the start); `what` stands before the machine (`` at commit abc``)."""
    day = when or f"{datetime.now(UTC):%Y-%m-%d}"
    return (f"Measured {day}{what} on {at_start['host']} ({cores(at_start)} cores, load "
            f"average {at_start['loadavg'][0]:.{load_digits}f} at the start)")


def conclude(name: str, result: dict[str, Any], out: Path, summary: str) -> int:
    """Write the result, print its summary and where it went; the exit status (1: the run
    is incomplete)."""
    write_json(out, result)
    print(summary)
    print(f"{name}: wrote {out}")
    return 0 if result["complete"] else 1


__all__ = ["RESULTS", "conclude", "default_out", "envelope", "measured_line", "stamp",
           "write_json"]
