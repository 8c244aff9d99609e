"""The long crash run of issue 8: a W1 load offered faster than one worker drains it, with chaos.

Run: ``.venv/bin/python bench/crash_bench.py [--waits 100000] [--rate 400] [--kills 20]
[--empty-disk 4] [--joins 5] [--broker-restarts 3] [--guarantee at_least_once|exactly_once|both]
[--port 19092] [--out bench/results/crash-<ts>.json] [--keep-logs DIR]
[--publish docs/guarantees.md]``
or ``bench/crash_bench.py --render bench/results/crash-<ts>.json --publish docs/guarantees.md``

It starts a broker of its own (``scripts/kafka start --port``; it restarts it
mid-run, so it must not be a broker anything else uses) and runs
`streams.testing.chaos.run_chaos` once per guarantee: every wait judged
against the broker's clock (lost, conflicting, wrong), duplicate outcome and
action ids counted.  It writes the JSON, and ``bench/results/crash-latest.md``
with the table; ``--publish`` puts its counts in the crash table of docs/guarantees.md
("Processing guarantees, as measured": above the rows that start "| long run", which
stay: the page keeps every long run), so that it shows each long run as it was
measured, never a tally copied by hand.  Exit status 1 if
any wait was lost, conflicting or wrong (or duplicated under exactly_once).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from streams import topics
from streams.testing.chaos import Plan, run_chaos
from streams.testing.cluster_chaos import KafkaCluster
from streams.testing.harness import runbook
from streams.testing.harness.report import table as markdown

LONG_RUN = "| long run, "
GUARANTEES_HEADER = "| run | guarantee |"


def table(reports: list[dict[str, Any]]) -> str:
    rows = []
    for r in reports:
        plan = r["plan"]
        backlogs = [e.get("backlog") or 0 for e in r["events"] if e["event"] == "kill -9"]
        rows.append([f"`{r['guarantee']}`", f"{r['waits']:,}",
                     f"{plan['kills']} ({plan['empty_disk']})", plan["broker_restarts"],
                     plan["joins"], r["lost"], r["conflicting"], r["wrong"],
                     f"{r['duplicate_outcomes']:,}", f"{r['duplicate_actions']:,}",
                     f"{max(backlogs, default=0):,}", f"{r['seconds'] / 60:.0f}"])
    return "\n".join(markdown(
        ["guarantee", "waits", "kill -9 (empty disk)", "broker restarts", "joins/leaves", "lost",
         "conflicting", "wrong", "duplicate outcomeIds", "duplicate actionIds",
         "largest backlog at a kill", "minutes"], rows))


def measured_on(result: Path, data: dict[str, Any]) -> str:
    """The day of a run: recorded in its JSON, or in the name of an older one."""
    if "measured" in data:
        return str(data["measured"])[:10]
    stamp = result.stem.removeprefix("crash-")
    return datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").strftime("%Y-%m-%d")


def readme_rows(reports: list[dict[str, Any]], day: str) -> list[str]:
    rows = []
    for r in reports:
        plan = r["plan"]
        rows.append(
            f"{LONG_RUN}{day} | `{r['guarantee']}` | {r['waits']:,} | {plan['kills']} "
            f"({plan['empty_disk']}) | {plan['broker_restarts']} | {plan['joins']} "
            f"| {r['lost']} | {r['conflicting']} | {r['wrong']} | {r['duplicate_outcomes']:,} "
            f"| {r['duplicate_actions']:,} |")
    return rows


def publish(readme: Path, rows: list[str]) -> None:
    """Put `rows` at the top of the page's crash table (its first table headed
    "| run | guarantee |"), above the earlier runs, which stay (a row already there
    is not added twice)."""
    lines = [line for line in readme.read_text().splitlines() if line not in rows]
    header = next((i for i, line in enumerate(lines) if line.startswith(GUARANTEES_HEADER)),
                  None)
    if header is None:
        raise SystemExit(f"{readme} has no table starting {GUARANTEES_HEADER!r}")
    lines[header + 2:header + 2] = rows  # below the header and its separator
    readme.write_text("\n".join(lines) + "\n")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = runbook.parser(__doc__, "crash", waits=100_000, rate=400.0,
                       port=(19092, "port of the run's own broker"))
    p.add_argument("--kills", type=int, default=20)
    p.add_argument("--empty-disk", type=int, default=4)
    p.add_argument("--joins", type=int, default=5)
    p.add_argument("--broker-restarts", type=int, default=3)
    p.add_argument("--publish", type=Path, metavar="PAGE",
                   help="put the run's counts in this page's crash table (docs/guarantees.md)")
    p.add_argument("--render", type=Path, metavar="JSON",
                   help="run nothing: print (and --publish) the table of an earlier run")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render is not None:
        data = json.loads(args.render.read_text())
        print(table(data["runs"]))
        if args.publish is not None:
            publish(args.publish, readme_rows(data["runs"], measured_on(args.render, data)))
        return 0
    kafka = KafkaCluster(args.port, nodes=1, heap=os.environ.get("XWAIT_KAFKA_HEAP", "512m"))
    try:
        kafka.script("start")
    except RuntimeError as exc:
        raise SystemExit(str(exc)) from None
    broker = kafka.broker()
    book = runbook.RunBook("crash_bench", args.out, args.keep_logs)
    try:
        for guarantee, folder in book.each(args.guarantee):
            settings = book.settings(kafka.bootstrap, folder, guarantee, args.partitions)
            topics.create(settings, topics.load_specs(settings))
            plan = Plan(waits=args.waits, rate=args.rate, kills=args.kills,
                        empty_disk=args.empty_disk, joins=args.joins,
                        broker_restarts=args.broker_restarts, settle_s=900.0,
                        seed=args.seed)
            report = run_chaos(settings, folder, plan, broker=broker)
            book.add(report.as_dict(), folder, guarantee.value)
    finally:
        kafka.script("reset")  # stops it and deletes its data
    book.finish(table(book.reports))
    if args.publish is not None:
        publish(args.publish, readme_rows(book.reports, f"{datetime.now(UTC):%Y-%m-%d}"))
    return 1 if any(runbook.broke(r) for r in book.reports) else 0


if __name__ == "__main__":
    sys.exit(main())
