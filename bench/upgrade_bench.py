"""The upgrade of issue 28: a fleet of the previous release under load, replaced by this build.

Run: ``.venv/bin/python bench/upgrade_bench.py [--waits 40000] [--rate 250] [--old-workers 2]
[--new-workers 2] [--warmup 40] [--partitions 8] [--guarantee at_least_once|exactly_once|both]
[--from 0.1.0] [--out bench/results/upgrade-<ts>.json] [--keep-logs DIR]``

The previous release (default: 0.1.0, CHANGELOG.md; its commit is found from the
CHANGELOG, `streams.testing.releases.release_commit`) is installed once into the
user's cache (`streams.testing.releases`: ``git archive`` of its commit,
a virtualenv of its own).  Per guarantee, on the broker at XWAIT_BOOTSTRAP
(default 127.0.0.1:9092), `streams.testing.upgrade` makes the topics with the
old release's ``xwait topics create``, runs the old fleet under the W1 load,
starts a worker of this build beside it (it must refuse: exit 2, one line),
stops every old worker, starts the new ones on the same data folders and waits
for their ``/readyz``, then starts an old worker again beside them (every new
one must stop, saying why) and the new fleet once more; the load never stops.
Every wait is judged on the contract's clock; the waits parked by the old
fleet and ended by the new one are counted by how they ended.  Writes the JSON and
``bench/results/upgrade-latest.md``; exit status 1 if a wait was lost,
conflicting or wrong (or duplicated under exactly_once), or the mixed start
was not refused.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rolling_bench import commit, machine, sec

from streams.config import REPO_ROOT, Guarantee, Settings
from streams.testing.chaos import chaos_settings
from streams.testing.releases import PREVIOUS, install_release
from streams.testing.upgrade import UpgradePlan, run_upgrade

RESULTS = REPO_ROOT / "bench" / "results"


def joined(late: dict[str, Any]) -> str:
    if not late:
        return "-"
    if late.get("all_refused"):
        return f"every new worker stopped within {late['new_stopped_s']} s, saying why"
    return f"NOT refused: {late.get('exit_codes')}"


def table(reports: list[dict[str, Any]]) -> str:
    lines = ["| guarantee | from | waits | rate | workers old → new | lost | conflicting "
             "| wrong | duplicate outcomeIds | mixed start | no worker (s) | restored records "
             "| an old worker joining later |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    carried = ["", "| guarantee | parked by the old fleet, ended by the new | how they ended |",
               "| --- | --- | --- |"]
    windows = ["", "| guarantee | window | replies | reply→outcome p50 / p99 / max (s) "
               "| escalations | deadline lateness p99 / max (s) |",
               "| --- | --- | --- | --- | --- | --- |"]
    for r in reports:
        p, up, ref = r["plan"], r["upgrade"], r["refusal"]
        mixed = (f"refused (exit {ref.get('exit_code')}, {ref.get('seconds')} s)"
                 if ref.get("refused") else f"NOT refused: {ref.get('line', '')[:80]}")
        lines.append(
            f"| `{r['guarantee']}` | {r['old_version']} | {r['waits']:,} | {p['rate']:.0f}/s "
            f"| {p['old_workers']} → {p['new_workers']} | {r['lost']} | {r['conflicting']} "
            f"| {r['wrong']} | {r['duplicate_outcomes']:,} | {mixed} "
            f"| {up.get('no_worker_s', '-')} "
            f"| {sum(up.get('restored_records', {}).values()):,} | {joined(r['late_join'])} |")
        c = r["carried"]
        carried.append(f"| `{r['guarantee']}` | {c.get('waits', 0):,} | " + ", ".join(
            f"{k}: {n:,}" for k, n in c.get("by_outcome", {}).items()) + " |")
        for w in r["windows"]:
            windows.append(
                f"| `{r['guarantee']}` | {w['window']} | {w['replies']:,} | {sec(w['p50_ms'])} "
                f"/ {sec(w['p99_ms'])} / {sec(w['max_ms'])} | {w['escalations']:,} "
                f"| {sec(w['late_p99_ms'])} / {sec(w['late_max_ms'])} |")
    return "\n".join(lines + carried + windows)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--waits", type=int, default=40_000)
    p.add_argument("--rate", type=float, default=250.0, help="requests offered per second")
    p.add_argument("--old-workers", type=int, default=2)
    p.add_argument("--new-workers", type=int, default=2)
    p.add_argument("--warmup", type=float, default=40.0,
                   help="seconds of load on the old fleet before the upgrade")
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--guarantee", choices=["at_least_once", "exactly_once", "both"],
                   default="both")
    p.add_argument("--from", dest="previous", default=PREVIOUS,
                   help="VERSION of the release to upgrade from (CHANGELOG.md), or "
                        "VERSION:COMMIT for a build the CHANGELOG does not name")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--keep-logs", type=Path, metavar="DIR")
    p.add_argument("--out", type=Path,
                   default=RESULTS / f"upgrade-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    guarantees = list(Guarantee) if args.guarantee == "both" else [Guarantee(args.guarantee)]
    version, _, old_commit = args.previous.partition(":")
    RESULTS.mkdir(parents=True, exist_ok=True)
    release = install_release(version, old_commit or None)
    bootstrap = os.environ.get("XWAIT_BOOTSTRAP", "127.0.0.1:9092")
    reports: list[dict[str, Any]] = []
    started = machine()
    for guarantee in guarantees:
        with tempfile.TemporaryDirectory(prefix="xwait-upgrade-") as tmp:
            folder = Path(tmp)
            prefix = f"upgrade{int(time.time())}"
            base = Settings(bootstrap=bootstrap, topic_prefix=prefix,
                            app_id=f"{prefix}-processor", partitions=args.partitions)
            settings = chaos_settings(base, folder, guarantee)
            plan = UpgradePlan(waits=args.waits, rate=args.rate, old_workers=args.old_workers,
                               new_workers=args.new_workers, warmup_s=args.warmup,
                               seed=args.seed)
            run = run_upgrade(settings, folder, release, plan)
            report = run.as_dict()
            report["refusal"]["refused"] = run.refused
            report["loadavg"] = os.getloadavg()
            if args.keep_logs is not None:
                args.keep_logs.mkdir(parents=True, exist_ok=True)
                for log in folder.glob("*.log"):
                    shutil.copy(log, args.keep_logs / f"{guarantee.value}-{log.name}")
            reports.append(report)
            print(json.dumps({k: v for k, v in report.items() if k != "events"}), flush=True)
            args.out.write_text(json.dumps({
                "measured": datetime.now(UTC).isoformat(), "commit": commit(),
                "from": {"version": version, "commit": old_commit},
                "machine": {"start": started, "end": machine()}, "runs": reports},
                indent=2) + "\n")
    (RESULTS / "upgrade-latest.md").write_text(
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC at commit {commit()}, from "
        f"{version} ({old_commit[:7]}), on {started['host']} ({started['cpus']} cores, "
        f"load average {started['loadavg'][0]:.1f} at the start): `{args.out.name}`\n\n"
        + table(reports) + "\n")
    print(table(reports))
    bad = [r for r in reports if r["lost"] or r["conflicting"] or r["wrong"]
           or not r["refusal"].get("refused")
           or (r["late_join"] and not r["late_join"].get("all_refused"))
           or (r["guarantee"] == "exactly_once" and r["duplicate_outcomes"])]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
