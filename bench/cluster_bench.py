"""The cluster crash run of issue 28: W1 load through a worker while a three-node cluster fails.

Run: ``.venv/bin/python bench/cluster_bench.py [--waits 90000] [--rate 500] [--leader-kills 3]
[--down 60] [--no-controller] [--no-wipe] [--no-worker-with-broker]
[--guarantee at_least_once|exactly_once|both] [--port 21092] [--partitions 8]
[--commit-grace SECONDS] [--out bench/results/cluster-<ts>.json] [--keep-logs DIR]``

It starts a cluster of its own (``scripts/kafka start --nodes 3 --port``,
three KRaft nodes, topics with three replicas and min.insync.replicas=2) and
runs `streams.testing.cluster_chaos.run_cluster_chaos` once per guarantee:
kill -9 of the broker leading the most input partitions (N times, down S
seconds each), of the active controller, of a broker whose data folder is
then wiped, and of a broker at the same moment as the worker.  Every wait is
judged on the contract's clock (lost, conflicting, wrong), duplicate
outcome and action ids are counted, and each failover's reply->outcome
p50/p99/max is written beside them.  Writes the JSON and
``bench/results/cluster-latest.md``; exit status 1 if any wait was lost,
conflicting or wrong (or duplicated under exactly_once).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from streams import topics
from streams.testing.cluster_chaos import ClusterPlan, KafkaCluster, run_cluster_chaos
from streams.testing.harness import runbook
from streams.testing.harness.figures import seconds
from streams.testing.harness.report import table as markdown


def table(reports: list[dict[str, Any]]) -> str:
    runs = [[f"`{r['guarantee']}`", f"{r['waits']:,}", f"{r['plan']['rate']:.0f}/s", r["lost"],
             r["conflicting"], r["wrong"], r.get("in_flight", "-"),
             f"{r['duplicate_outcomes']:,}", f"{r['duplicate_actions']:,}",
             f"{r['seconds'] / 60:.0f}"] for r in reports]
    failovers = [[f"`{r['guarantee']}`", f["action"], f["node"], f["away_s"],
                  f"{f['replies']:,}", seconds(f["p50_ms"]), seconds(f["p99_ms"]),
                  seconds(f["max_ms"])] for r in reports for f in r["failovers"]]
    return "\n".join(markdown(
        ["guarantee", "waits", "rate", "lost", "conflicting", "wrong",
         "in flight at the deadline", "duplicate outcomeIds", "duplicate actionIds", "minutes"],
        runs) + [""] + markdown(
        ["guarantee", "failure", "node", "away (s)", "replies in it", "reply→outcome p50 (s)",
         "p99 (s)", "max (s)"], failovers))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    # Below the kernel's ephemeral ports (see tests/cluster/conftest.py).
    p = runbook.parser(__doc__, "cluster", waits=90_000, rate=500.0,
                       port=(21092, "node 1's port of the run's cluster"))
    p.add_argument("--leader-kills", type=int, default=3)
    p.add_argument("--down", type=float, default=60.0, help="seconds a killed broker stays down")
    p.add_argument("--no-controller", action="store_true")
    p.add_argument("--no-wipe", action="store_true")
    p.add_argument("--no-worker-with-broker", action="store_true")
    p.add_argument("--commit-grace", type=float, default=None, metavar="SECONDS",
                   help="the worker's XWAIT_COMMIT_GRACE (default: auto, 0.2 s on three replicas)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cluster = KafkaCluster(args.port)
    cluster.start()
    book = runbook.RunBook("cluster_bench", args.out, args.keep_logs)
    try:
        for guarantee, folder in book.each(args.guarantee):
            settings = book.settings(cluster.bootstrap, folder, guarantee, args.partitions,
                                     replication_factor=3,
                                     ).with_overrides(commit_grace=args.commit_grace)
            topics.create(settings, topics.load_specs(settings))
            plan = ClusterPlan(waits=args.waits, rate=args.rate,
                               leader_kills=args.leader_kills, down_s=args.down,
                               controller_kill=not args.no_controller,
                               wipe=not args.no_wipe,
                               worker_with_broker=not args.no_worker_with_broker,
                               seed=args.seed)
            report = run_cluster_chaos(
                settings, folder, plan, cluster, samples=None if args.keep_logs is None
                else folder / "worker-stats.log")
            book.add(report.as_dict(), folder, guarantee.value)
    finally:
        cluster.script("reset", "--nodes", str(cluster.nodes))  # stops it, deletes its data
    book.finish(table(book.reports))
    return 1 if any(runbook.broke(r) for r in book.reports) else 0


if __name__ == "__main__":
    sys.exit(main())
