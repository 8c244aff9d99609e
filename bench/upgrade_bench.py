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
import os
import sys
from datetime import UTC, datetime
from typing import Any

from streams.testing.harness import runbook
from streams.testing.harness.host import commit
from streams.testing.harness.report import table as markdown
from streams.testing.releases import PREVIOUS, install_release
from streams.testing.upgrade import UpgradePlan, run_upgrade


def joined(late: dict[str, Any]) -> str:
    if not late:
        return "-"
    if late.get("all_refused"):
        return f"every new worker stopped within {late['new_stopped_s']} s, saying why"
    return f"NOT refused: {late.get('exit_codes')}"


def table(reports: list[dict[str, Any]]) -> str:
    runs, carried = [], []
    for r in reports:
        p, up, ref = r["plan"], r["upgrade"], r["refusal"]
        mixed = (f"refused (exit {ref.get('exit_code')}, {ref.get('seconds')} s)"
                 if ref.get("refused") else f"NOT refused: {ref.get('line', '')[:80]}")
        runs.append([f"`{r['guarantee']}`", r["old_version"], f"{r['waits']:,}",
                     f"{p['rate']:.0f}/s", f"{p['old_workers']} → {p['new_workers']}", r["lost"],
                     r["conflicting"], r["wrong"], f"{r['duplicate_outcomes']:,}", mixed,
                     up.get("no_worker_s", "-"),
                     f"{sum(up.get('restored_records', {}).values()):,}",
                     joined(r["late_join"])])
        c = r["carried"]
        carried.append([f"`{r['guarantee']}`", f"{c.get('waits', 0):,}", ", ".join(
            f"{k}: {n:,}" for k, n in c.get("by_outcome", {}).items())])
    return "\n".join(markdown(
        ["guarantee", "from", "waits", "rate", "workers old → new", "lost", "conflicting",
         "wrong", "duplicate outcomeIds", "mixed start", "no worker (s)", "restored records",
         "an old worker joining later"], runs) + [""] + markdown(
        ["guarantee", "parked by the old fleet, ended by the new", "how they ended"], carried)
        + [""] + runbook.windows(reports))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = runbook.parser(__doc__, "upgrade", waits=40_000, rate=250.0)
    p.add_argument("--old-workers", type=int, default=2)
    p.add_argument("--new-workers", type=int, default=2)
    p.add_argument("--warmup", type=float, default=40.0,
                   help="seconds of load on the old fleet before the upgrade")
    p.add_argument("--from", dest="previous", default=PREVIOUS,
                   help="VERSION of the release to upgrade from (CHANGELOG.md), or "
                        "VERSION:COMMIT for a build the CHANGELOG does not name")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    version, _, old_commit = args.previous.partition(":")
    book = runbook.RunBook("upgrade_bench", args.out, args.keep_logs,
                   **{"from": {"version": version, "commit": old_commit}})
    release = install_release(version, old_commit or None)
    bootstrap = os.environ.get("XWAIT_BOOTSTRAP", "127.0.0.1:9092")
    for guarantee, folder in book.each(args.guarantee):
        settings = book.settings(bootstrap, folder, guarantee, args.partitions)
        plan = UpgradePlan(waits=args.waits, rate=args.rate, old_workers=args.old_workers,
                           new_workers=args.new_workers, warmup_s=args.warmup,
                           seed=args.seed)
        run = run_upgrade(settings, folder, release, plan)
        report = run.as_dict()
        report["refusal"]["refused"] = run.refused
        report["loadavg"] = os.getloadavg()
        book.add(report, folder, guarantee.value)
    book.finish(table(book.reports), when=f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
                what=f" at commit {commit()}, from {version} ({old_commit[:7]}),",
                load_digits=1)
    return 1 if any(runbook.broke(r) or not r["refusal"].get("refused")
                    or (r["late_join"] and not r["late_join"].get("all_refused"))
                    for r in book.reports) else 0


if __name__ == "__main__":
    sys.exit(main())
