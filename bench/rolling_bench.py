"""The rolling restart of issue 28: three workers at 500 W1 waits/s, each restarted in turn.

Run: ``.venv/bin/python bench/rolling_bench.py [--waits 60000] [--rate 500] [--workers 3]
[--rounds 1] [--warmup 20] [--pause 10] [--partitions 8]
[--guarantee at_least_once|exactly_once|both] [--cluster [--port 21092]]
[--out bench/results/rolling-<ts>.json] [--keep-logs DIR]``

Each guarantee gets topics of its own on the broker at XWAIT_BOOTSTRAP
(default 127.0.0.1:9092), or with ``--cluster`` on a three-node cluster of
its own (``scripts/kafka start --nodes 3 --port``, topics with three replicas
and min.insync.replicas=2, deleted at the end).  `streams.testing.rolling`
starts the workers, offers the load and restarts each worker in turn
(SIGTERM, start, wait for every worker's ``/readyz``); every wait is judged on
the contract's clock and the reply->outcome latency is given before the
roll, during it, and per restart.  Writes the JSON and
``bench/results/rolling-latest.md``; exit status 1 if a wait was lost,
conflicting or wrong (or duplicated under exactly_once), or the roll's
reply->outcome p99 was above ``--p99-max`` (5 s, the issue's target).
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime
from typing import Any

from streams import topics
from streams.testing.cluster_chaos import KafkaCluster
from streams.testing.harness import runbook
from streams.testing.harness.host import commit
from streams.testing.harness.report import table as markdown
from streams.testing.rolling import RollPlan, run_rolling


def table(reports: list[dict[str, Any]]) -> str:
    runs = [[f"`{r['guarantee']}`", r["broker"], f"{r['waits']:,}", f"{r['plan']['rate']:.0f}/s",
             r["plan"]["workers"], r["lost"], r["conflicting"], r["wrong"],
             f"{r['duplicate_outcomes']:,}", f"{r['duplicate_actions']:,}"] for r in reports]
    restarts = [[f"`{r['guarantee']}`", f"{x['worker']}{' (SIGKILL)' if x['killed'] else ''}",
                 f"{x['stop_s']:.1f}", f"{x['ready_s']:.1f}", f"{x['fleet_ready_s']:.1f}"]
                for r in reports for x in r["restarts"]]
    return "\n".join(markdown(
        ["guarantee", "broker", "waits", "rate", "workers", "lost", "conflicting", "wrong",
         "duplicate outcomeIds", "duplicate actionIds"], runs) + [""] + markdown(
        ["guarantee", "worker", "SIGTERM → exited (s)", "start → ready (s)",
         "start → fleet ready (s)"], restarts) + [""] + runbook.windows(reports))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = runbook.parser(__doc__, "rolling", waits=60_000, rate=500.0,
                       port=(21092, "--cluster: node 1's port"))
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--rounds", type=int, default=1, help="times the whole fleet is rolled")
    p.add_argument("--warmup", type=float, default=20.0, help="seconds of load before the roll")
    p.add_argument("--pause", type=float, default=10.0,
                   help="seconds between the fleet being ready and the next restart")
    p.add_argument("--cluster", action="store_true",
                   help="on a three-node cluster of its own instead of XWAIT_BOOTSTRAP")
    p.add_argument("--p99-max", type=float, default=5.0,
                   help="seconds: the roll's reply->outcome p99 above this fails the run")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cluster = KafkaCluster(args.port) if args.cluster else None
    bootstrap = (cluster.bootstrap if cluster is not None
                 else os.environ.get("XWAIT_BOOTSTRAP", "127.0.0.1:9092"))
    if cluster is not None:
        cluster.start()
    book = runbook.RunBook("rolling_bench", args.out, args.keep_logs)
    try:
        for guarantee, folder in book.each(args.guarantee):
            settings = book.settings(bootstrap, folder, guarantee, args.partitions,
                                     replication_factor=3 if cluster is not None else None)
            topics.create(settings, topics.load_specs(settings))
            plan = RollPlan(waits=args.waits, rate=args.rate, workers=args.workers,
                            rounds=args.rounds, warmup_s=args.warmup, pause_s=args.pause,
                            seed=args.seed)
            report = run_rolling(settings, folder, plan).as_dict()
            report["broker"] = "3-node cluster" if cluster is not None else "1 broker"
            report["loadavg"] = os.getloadavg()
            book.add(report, folder, guarantee.value)
    finally:
        if cluster is not None:
            cluster.script("reset", "--nodes", str(cluster.nodes))
    book.finish(table(book.reports), when=f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
                what=f" at commit {commit()}", load_digits=1)
    roll_p99 = [next(w for w in r["windows"] if w["window"] == "roll")["p99_ms"] or 0
                for r in book.reports]
    return 1 if any(runbook.broke(r) or p99 > args.p99_max * 1000
                    for r, p99 in zip(book.reports, roll_p99, strict=True)) else 0


if __name__ == "__main__":
    sys.exit(main())
