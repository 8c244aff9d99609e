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
("Processing guarantees, as measured": the rows that start "| long run"), so the
page shows the last long run as it was measured, never a tally copied by hand.  Exit status 1 if
any wait was lost, conflicting or wrong (or duplicated under exactly_once).
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
from streams.config import Guarantee, Settings
from streams.testing.chaos import Broker, Plan, Report, chaos_settings, run_chaos

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"


def kafka(port: int, *args: str) -> None:
    done = subprocess.run(  # noqa: S603 - the project's own script
        [sys.executable, str(REPO / "scripts" / "kafka"), *args, "--port", str(port)],
        capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "XWAIT_KAFKA_HEAP": os.environ.get("XWAIT_KAFKA_HEAP", "512m")})
    if done.returncode != 0:
        raise SystemExit(f"scripts/kafka {' '.join(args)} failed:\n{done.stdout}{done.stderr}")


def machine() -> dict[str, Any]:
    return {"host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(),
            "loadavg": os.getloadavg()}


def table(reports: list[dict[str, Any]]) -> str:
    lines = ["| guarantee | waits | kill -9 (empty disk) | broker restarts | joins/leaves "
             "| lost | conflicting | wrong | duplicate outcomeIds | duplicate actionIds "
             "| largest backlog at a kill | minutes |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in reports:
        plan = r["plan"]
        backlogs = [e.get("backlog") or 0 for e in r["events"] if e["event"] == "kill -9"]
        lines.append(
            f"| `{r['guarantee']}` | {r['waits']:,} | {plan['kills']} ({plan['empty_disk']}) "
            f"| {plan['broker_restarts']} | {plan['joins']} | {r['lost']} | {r['conflicting']} "
            f"| {r['wrong']} | {r['duplicate_outcomes']:,} | {r['duplicate_actions']:,} "
            f"| {max(backlogs, default=0):,} | {r['seconds'] / 60:.0f} |")
    return "\n".join(lines)


LONG_RUN = "| long run, "
GUARANTEES_HEADER = "| run | guarantee |"


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
    """Replace the long-run rows of the page's crash table (its first table headed
    "| run | guarantee |") with `rows`."""
    lines = [line for line in readme.read_text().splitlines()
             if not line.startswith(LONG_RUN)]
    header = next((i for i, line in enumerate(lines) if line.startswith(GUARANTEES_HEADER)),
                  None)
    if header is None:
        raise SystemExit(f"{readme} has no table starting {GUARANTEES_HEADER!r}")
    lines[header + 2:header + 2] = rows  # below the header and its separator
    readme.write_text("\n".join(lines) + "\n")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--waits", type=int, default=100_000)
    p.add_argument("--rate", type=float, default=400.0, help="requests offered per second")
    p.add_argument("--kills", type=int, default=20)
    p.add_argument("--empty-disk", type=int, default=4)
    p.add_argument("--joins", type=int, default=5)
    p.add_argument("--broker-restarts", type=int, default=3)
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--guarantee", choices=["at_least_once", "exactly_once", "both"],
                   default="both")
    p.add_argument("--port", type=int, default=19092, help="port of the run's own broker")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--keep-logs", type=Path, metavar="DIR",
                   help="copy the workers' logs of each run there (<guarantee>-worker-w1.log)")
    p.add_argument("--out", type=Path,
                   default=RESULTS / f"crash-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json")
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
    guarantees = list(Guarantee) if args.guarantee == "both" else [Guarantee(args.guarantee)]
    RESULTS.mkdir(parents=True, exist_ok=True)
    kafka(args.port, "start")
    broker = Broker(stop=lambda: kafka(args.port, "stop"), start=lambda: kafka(args.port, "start"))
    reports: list[dict[str, Any]] = []
    started = machine()
    try:
        for guarantee in guarantees:
            with tempfile.TemporaryDirectory(prefix="xwait-crash-") as tmp:
                folder = Path(tmp)
                prefix = f"crash{int(time.time())}"
                base = Settings(bootstrap=f"127.0.0.1:{args.port}", topic_prefix=prefix,
                                app_id=f"{prefix}-processor", partitions=args.partitions)
                settings = chaos_settings(base, folder, guarantee)
                topics.create(settings, topics.load_specs(settings))
                plan = Plan(waits=args.waits, rate=args.rate, kills=args.kills,
                            empty_disk=args.empty_disk, joins=args.joins,
                            broker_restarts=args.broker_restarts, settle_s=900.0,
                            seed=args.seed)
                report: Report = run_chaos(settings, folder, plan, broker=broker)
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
        kafka(args.port, "reset")  # stops it and deletes its data
    (RESULTS / "crash-latest.md").write_text(
        f"Measured {datetime.now(UTC):%Y-%m-%d} on {started['host']} ({started['cpus']} cores, "
        f"load average {started['loadavg'][0]:.2f} at the start): `{args.out.name}`\n\n"
        + table(reports) + "\n")
    print(table(reports))
    if args.publish is not None:
        publish(args.publish, readme_rows(reports, f"{datetime.now(UTC):%Y-%m-%d}"))
    bad = [r for r in reports if r["lost"] or r["conflicting"] or r["wrong"]
           or (r["guarantee"] == "exactly_once" and r["duplicate_outcomes"])]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
