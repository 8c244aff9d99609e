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
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from streams import topics
from streams.config import Guarantee, Settings
from streams.testing.chaos import chaos_settings
from streams.testing.cluster_chaos import ClusterPlan, KafkaCluster, run_cluster_chaos

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"


def machine() -> dict[str, Any]:
    return {"host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(),
            "loadavg": os.getloadavg()}


def table(reports: list[dict[str, Any]]) -> str:
    lines = ["| guarantee | waits | rate | lost | conflicting | wrong | in flight at the deadline "
             "| duplicate outcomeIds | duplicate actionIds | minutes |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    failover = ["", "| guarantee | failure | node | away (s) | replies in it "
                "| reply→outcome p50 (s) | p99 (s) | max (s) |",
                "| --- | --- | --- | --- | --- | --- | --- | --- |"]

    def sec(ms: int | None) -> str:
        return "-" if ms is None else f"{ms / 1000:.1f}"

    for r in reports:
        lines.append(
            f"| `{r['guarantee']}` | {r['waits']:,} | {r['plan']['rate']:.0f}/s | {r['lost']} "
            f"| {r['conflicting']} | {r['wrong']} | {r.get('in_flight', '-')} "
            f"| {r['duplicate_outcomes']:,} "
            f"| {r['duplicate_actions']:,} | {r['seconds'] / 60:.0f} |")
        for f in r["failovers"]:
            failover.append(
                f"| `{r['guarantee']}` | {f['action']} | {f['node']} | {f['away_s']} "
                f"| {f['replies']:,} | {sec(f['p50_ms'])} | {sec(f['p99_ms'])} "
                f"| {sec(f['max_ms'])} |")
    return "\n".join(lines + failover)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--waits", type=int, default=90_000)
    p.add_argument("--rate", type=float, default=500.0, help="requests offered per second")
    p.add_argument("--leader-kills", type=int, default=3)
    p.add_argument("--down", type=float, default=60.0, help="seconds a killed broker stays down")
    p.add_argument("--no-controller", action="store_true")
    p.add_argument("--no-wipe", action="store_true")
    p.add_argument("--no-worker-with-broker", action="store_true")
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--guarantee", choices=["at_least_once", "exactly_once", "both"],
                   default="both")
    # Below the kernel's ephemeral ports (see tests/cluster/conftest.py).
    p.add_argument("--port", type=int, default=21092, help="node 1's port of the run's cluster")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--commit-grace", type=float, default=None, metavar="SECONDS",
                   help="the worker's XWAIT_COMMIT_GRACE (default: auto, 0.2 s on three replicas)")
    p.add_argument("--keep-logs", type=Path, metavar="DIR")
    p.add_argument("--out", type=Path,
                   default=RESULTS / f"cluster-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    guarantees = list(Guarantee) if args.guarantee == "both" else [Guarantee(args.guarantee)]
    RESULTS.mkdir(parents=True, exist_ok=True)
    cluster = KafkaCluster(args.port)
    cluster.start()
    reports: list[dict[str, Any]] = []
    started = machine()
    try:
        for guarantee in guarantees:
            with tempfile.TemporaryDirectory(prefix="xwait-cluster-") as tmp:
                folder = Path(tmp)
                prefix = f"cluster{int(time.time())}"
                base = Settings(bootstrap=cluster.bootstrap, topic_prefix=prefix,
                                app_id=f"{prefix}-processor", partitions=args.partitions,
                                replication_factor=3)
                settings = chaos_settings(base, folder, guarantee).with_overrides(
                    commit_grace=args.commit_grace)
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
                if args.keep_logs is not None:
                    args.keep_logs.mkdir(parents=True, exist_ok=True)
                    for log in folder.glob("*.log"):
                        shutil.copy(log, args.keep_logs / f"{guarantee.value}-{log.name}")
                reports.append(report.as_dict())
                print(json.dumps({k: v for k, v in report.as_dict().items() if k != "events"}),
                      flush=True)
                args.out.write_text(json.dumps({"measured": datetime.now(UTC).isoformat(),
                                                "machine": {"start": started,
                                                            "end": machine()},
                                                "runs": reports}, indent=2) + "\n")
    finally:
        cluster.script("reset", "--nodes", str(cluster.nodes))  # stops it, deletes its data
    (RESULTS / "cluster-latest.md").write_text(
        f"Measured {datetime.now(UTC):%Y-%m-%d} on {started['host']} ({started['cpus']} cores, "
        f"load average {started['loadavg'][0]:.2f} at the start): `{args.out.name}`\n\n"
        + table(reports) + "\n")
    print(table(reports))
    bad = [r for r in reports if r["lost"] or r["conflicting"] or r["wrong"]
           or (r["guarantee"] == "exactly_once" and r["duplicate_outcomes"])]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
