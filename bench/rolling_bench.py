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
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from streams import topics
from streams.config import REPO_ROOT, Guarantee, Settings
from streams.testing.chaos import chaos_settings
from streams.testing.cluster_chaos import KafkaCluster
from streams.testing.rolling import RollPlan, run_rolling

RESULTS = REPO_ROOT / "bench" / "results"


def commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT,  # noqa: S607
                          capture_output=True, text=True, check=False)
    return done.stdout.strip() or "unknown"


def sec(ms: int | None) -> str:
    return "-" if ms is None else f"{ms / 1000:.1f}"


def table(reports: list[dict[str, Any]]) -> str:
    lines = ["| guarantee | broker | waits | rate | workers | lost | conflicting | wrong "
             "| duplicate outcomeIds | duplicate actionIds |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    restarts = ["", "| guarantee | worker | SIGTERM → exited (s) | start → ready (s) "
                "| start → fleet ready (s) |", "| --- | --- | --- | --- | --- |"]
    windows = ["", "| guarantee | window | replies | reply→outcome p50 / p99 / max (s) "
               "| escalations | deadline lateness p99 / max (s) |",
               "| --- | --- | --- | --- | --- | --- |"]
    for r in reports:
        lines.append(
            f"| `{r['guarantee']}` | {r['broker']} | {r['waits']:,} | {r['plan']['rate']:.0f}/s "
            f"| {r['plan']['workers']} | {r['lost']} | {r['conflicting']} | {r['wrong']} "
            f"| {r['duplicate_outcomes']:,} | {r['duplicate_actions']:,} |")
        for x in r["restarts"]:
            restarts.append(f"| `{r['guarantee']}` | {x['worker']}"
                            f"{' (SIGKILL)' if x['killed'] else ''} | {x['stop_s']:.1f} "
                            f"| {x['ready_s']:.1f} | {x['fleet_ready_s']:.1f} |")
        for w in r["windows"]:
            windows.append(
                f"| `{r['guarantee']}` | {w['window']} | {w['replies']:,} | {sec(w['p50_ms'])} "
                f"/ {sec(w['p99_ms'])} / {sec(w['max_ms'])} | {w['escalations']:,} "
                f"| {sec(w['late_p99_ms'])} / {sec(w['late_max_ms'])} |")
    return "\n".join(lines + restarts + windows)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--waits", type=int, default=60_000)
    p.add_argument("--rate", type=float, default=500.0, help="requests offered per second")
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--rounds", type=int, default=1, help="times the whole fleet is rolled")
    p.add_argument("--warmup", type=float, default=20.0, help="seconds of load before the roll")
    p.add_argument("--pause", type=float, default=10.0,
                   help="seconds between the fleet being ready and the next restart")
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--guarantee", choices=["at_least_once", "exactly_once", "both"],
                   default="both")
    p.add_argument("--cluster", action="store_true",
                   help="on a three-node cluster of its own instead of XWAIT_BOOTSTRAP")
    p.add_argument("--port", type=int, default=21092, help="--cluster: node 1's port")
    p.add_argument("--p99-max", type=float, default=5.0,
                   help="seconds: the roll's reply->outcome p99 above this fails the run")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--keep-logs", type=Path, metavar="DIR")
    p.add_argument("--out", type=Path,
                   default=RESULTS / f"rolling-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json")
    return p.parse_args(argv)


def machine() -> dict[str, Any]:
    return {"host": platform.node(), "cpus": os.cpu_count(), "loadavg": os.getloadavg()}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    guarantees = list(Guarantee) if args.guarantee == "both" else [Guarantee(args.guarantee)]
    RESULTS.mkdir(parents=True, exist_ok=True)
    cluster = KafkaCluster(args.port) if args.cluster else None
    bootstrap = (cluster.bootstrap if cluster is not None
                 else os.environ.get("XWAIT_BOOTSTRAP", "127.0.0.1:9092"))
    if cluster is not None:
        cluster.start()
    reports: list[dict[str, Any]] = []
    started = machine()
    try:
        for guarantee in guarantees:
            with tempfile.TemporaryDirectory(prefix="xwait-rolling-") as tmp:
                folder = Path(tmp)
                prefix = f"rolling{int(time.time())}"
                base = Settings(bootstrap=bootstrap, topic_prefix=prefix,
                                app_id=f"{prefix}-processor", partitions=args.partitions,
                                replication_factor=3 if cluster is not None else None)
                settings = chaos_settings(base, folder, guarantee)
                topics.create(settings, topics.load_specs(settings))
                plan = RollPlan(waits=args.waits, rate=args.rate, workers=args.workers,
                                rounds=args.rounds, warmup_s=args.warmup, pause_s=args.pause,
                                seed=args.seed)
                report = run_rolling(settings, folder, plan).as_dict()
                report["broker"] = "3-node cluster" if cluster is not None else "1 broker"
                report["loadavg"] = os.getloadavg()
                if args.keep_logs is not None:
                    args.keep_logs.mkdir(parents=True, exist_ok=True)
                    for log in folder.glob("*.log"):
                        shutil.copy(log, args.keep_logs / f"{guarantee.value}-{log.name}")
                reports.append(report)
                print(json.dumps({k: v for k, v in report.items() if k != "events"}),
                      flush=True)
                args.out.write_text(json.dumps({
                    "measured": datetime.now(UTC).isoformat(), "commit": commit(),
                    "machine": {"start": started, "end": machine()}, "runs": reports},
                    indent=2) + "\n")
    finally:
        if cluster is not None:
            cluster.script("reset", "--nodes", str(cluster.nodes))
    (RESULTS / "rolling-latest.md").write_text(
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC at commit {commit()} on "
        f"{started['host']} ({started['cpus']} cores, load average "
        f"{started['loadavg'][0]:.1f} at the start): `{args.out.name}`\n\n"
        + table(reports) + "\n")
    print(table(reports))
    bad = [r for r in reports if r["lost"] or r["conflicting"] or r["wrong"]
           or (r["guarantee"] == "exactly_once" and r["duplicate_outcomes"])
           or (next(w for w in r["windows"] if w["window"] == "roll")["p99_ms"] or 0)
           > args.p99_max * 1000]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
