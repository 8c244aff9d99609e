"""xwait, the raw and faust pipes and the bench kit's peers side by side on one broker.

Run: ``make compare`` or ``.venv/bin/python bench/compare.py [--rounds 2] [--waits 20000]
[--rate 500] [--seconds 120] [--systems xwait,rawpipe,faustpipe,pypeer,kstreams]
[--workloads drain,storm,open] [--kit ../shared/bench-kit]``. See bench/README.md.

The yardstick is the bench kit (``--kit``, by default ``../shared/bench-kit`` beside the
repository), used as it is: its ``loadgen.py`` drives and measures every system from outside,
``rawpipe.py`` is the floor a Kafka client can move, ``pypeer.py`` and ``kstreams/`` are the same
rules in plain Python and in Kafka Streams.  Beside them, ``bench/faustpipe.py`` does the raw
pipe's work but takes its records through faust's fetch, the way the worker did until it
fetched its inputs itself: what faust's fetch alone costs.
One run of this script:

1. builds the Kafka Streams peer once (``mvn -q package`` on a copy of ``kstreams/`` in
   ``--cache``, outside git), or skips it with a note when Java or Maven is missing;
2. warms the broker with an open run of the first system for ``--warm-up`` seconds (30),
   shown in the every-run table but not compared: twice the first run on a broker started
   minutes before was the slowest of its comparison by far (``warm_up``);
3. for each round (the systems' order reversed in every second round), for each workload,
   for each system: creates topics under a fresh prefix (8 partitions unless told), runs the
   workload with the kit's load generator, records its figures, the load average before and
   after, and deletes the topics, consumer groups and data folders of that run;
4. computes, per round, xwait's figure divided by each other system's figure in that round;
5. writes ``bench/results/compare-<ts>.json`` (every run, the machine, the versions),
   ``compare-<ts>.png`` (events/s and latency percentiles per system) and
   ``compare-latest.md`` (the table for the README's performance section).

Workloads (the throughput issue's table):

* ``drain``: W1 replies and reviews on waits whose timers are hours away
  (``--definition bench-long --mix replies``), all preloaded, then the processor starts:
  input events/s.
* ``storm``: silent waits whose 3 s deadline has passed by the time the processor starts
  (``--definition bench --mix silent``): escalations/s, the first escalation after start, and
  for xwait the timer records it wrote against the timers that fired.
* ``open``: W1 at ``--rate`` requests/s for ``--seconds``, replies on schedule
  (``--mode open``): reply->outcome p50/p99 and deadline lateness p99.

A run that fails is recorded with its error and the tail of the processor's log; the script
goes on with the next and exits 1 at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from streams.testing.compare.kit import (
    DEFAULT_CACHE,
    DEFAULT_KIT,
    Context,
    RunPlan,
    all_versions,
    build_kstreams,
    kit_files,
    kit_topology,
)
from streams.testing.compare.report import finish, ratios, summary_lines
from streams.testing.compare.runs import run_one, warm_up
from streams.testing.compare.workloads import (
    BY_NAME,
    DEFAULT_SYSTEMS,
    SYSTEMS,
    WORKLOADS,
    schedule,
)
from streams.testing.harness.host import commit, machine
from streams.testing.harness.kafka import sweep_groups
from streams.testing.harness.results import RESULTS, stamp


def env_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.startswith("XWAIT_"):
        raise argparse.ArgumentTypeError(f"expected XWAIT_NAME=value, got {text!r}")
    return key, value


def names(allowed: tuple[str, ...]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        got = [n.strip() for n in text.split(",") if n.strip()]
        wrong = [n for n in got if n not in allowed]
        if wrong or not got:
            raise argparse.ArgumentTypeError(f"expected some of {','.join(allowed)}")
        return got
    return parse


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="compare", description=__doc__.splitlines()[0])
    p.add_argument("--kit", type=Path, default=Path(os.environ.get("XWAIT_BENCH_KIT",
                                                                   DEFAULT_KIT)),
                   help="the bench kit's folder ($XWAIT_BENCH_KIT or ../shared/bench-kit)")
    p.add_argument("--bootstrap", default=os.environ.get("XWAIT_BOOTSTRAP", "127.0.0.1:9092"))
    p.add_argument("--systems", type=names(SYSTEMS), default=list(DEFAULT_SYSTEMS),
                   help="comma-separated, from " + ",".join(SYSTEMS))
    p.add_argument("--workloads", type=names(WORKLOADS), default=list(WORKLOADS),
                   help="comma-separated, from " + ",".join(WORKLOADS))
    p.add_argument("--rounds", type=int, default=2, help="rounds; order reversed in each second")
    p.add_argument("--waits", type=int, default=20_000, help="waits of drain and storm (20000)")
    p.add_argument("--rate", type=float, default=500.0, help="open: requests/s (500)")
    p.add_argument("--seconds", type=float, default=120.0, help="open: seconds of load (120)")
    p.add_argument("--partitions", type=int, default=8, help="partitions of every topic (8)")
    p.add_argument("--guarantee", choices=("default", "at_least_once", "exactly_once"),
                   default="default", help="xwait's and the Kafka Streams peer's guarantee; "
                   "default: each its own (xwait at_least_once, Kafka Streams exactly_once_v2)")
    p.add_argument("--xwait-env", type=env_pair, action="append", default=[],
                   metavar="XWAIT_NAME=value", help="an extra setting of the xwait worker")
    p.add_argument("--xwait-processes", type=int, default=1, metavar="N",
                   help="xwait as `xwait worker --processes N`: N worker processes under one "
                        "supervisor (1: the worker itself); CPU is summed over them")
    p.add_argument("--xwait-log-level", default="warning")
    p.add_argument("--stall-s", type=float, default=60.0,
                   help="loadgen gives up after this long without an outcome (60)")
    p.add_argument("--seed", type=int, default=7, help="loadgen's seed (the same for all)")
    p.add_argument("--warm-up", type=float, default=30.0, metavar="SECONDS",
                   help="an open run of this long before the first, not compared, so that no "
                        "system meets a cold broker (30; 0: none)")
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE,
                   help="where the Kafka Streams peer is built (~/.cache/xwait-bench)")
    p.add_argument("--out-dir", type=Path, default=RESULTS, help="bench/results")
    p.add_argument("--publish", type=Path, default=None, metavar="PNG",
                   help="also copy the plot here (a tracked path the README shows)")
    p.add_argument("--render", type=Path, default=None, metavar="JSON",
                   help="run nothing: draw the plot and the table again from a result file")
    p.add_argument("--keep-logs", action="store_true",
                   help="keep each run's folder (logs, loadgen JSON) in the scratch folder")
    args = p.parse_args(argv)
    if min(args.rounds, args.waits, args.partitions, args.xwait_processes) < 1 \
            or args.rate <= 0 or args.seconds <= 0:
        p.error("--rounds, --waits, --partitions, --xwait-processes, --rate and --seconds must "
                "be above zero")
    if args.xwait_processes > args.partitions:
        p.error("--xwait-processes must not exceed --partitions (a worker without a partition "
                "idles)")
    if args.warm_up < 0:
        p.error("--warm-up must be zero (none) or more seconds")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render is not None:
        args.out_dir.mkdir(parents=True, exist_ok=True)
        finish(json.loads(args.render.read_text(encoding="utf-8")), args.render,
               args.render.with_suffix(".png"), args.out_dir, args.publish)
        return 0
    started = datetime.now(UTC)
    at = stamp(started)
    kit = args.kit.resolve()
    kit_files(kit)
    scratch = Path(tempfile.mkdtemp(prefix="xwait-compare-"))
    notes: list[str] = []
    jar = None
    systems = list(args.systems)
    if "kstreams" in systems:
        args.cache.mkdir(parents=True, exist_ok=True)
        jar = build_kstreams(kit, args.cache, notes)
        if jar is None:
            systems.remove("kstreams")
    ctx = Context(args, kit, sys.executable, kit_topology(scratch / "topology", kit), scratch,
                  jar, args.out_dir / f"compare-{at}-logs", notes)
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    try:
        admin.list_topics(timeout=10)
    except KafkaException as exc:
        raise SystemExit(f"compare: the broker at {args.bootstrap} did not answer: {exc}") \
            from exc
    args.out_dir.mkdir(parents=True, exist_ok=True)
    out = args.out_dir / f"compare-{at}.json"
    png = args.out_dir / f"compare-{at}.png"
    result: dict[str, Any] = {
        "benchmark": "compare", "timestamp": started.isoformat(timespec="seconds"),
        "file": out.name,
        "parameters": {"systems": systems, "workloads": list(args.workloads),
                       "rounds": args.rounds, "waits": args.waits, "rate": args.rate,
                       "seconds": args.seconds, "open_waits": round(args.rate * args.seconds),
                       "partitions": args.partitions, "guarantee": args.guarantee,
                       "xwait_env": dict(args.xwait_env),
                       "xwait_processes": args.xwait_processes, "stall_s": args.stall_s,
                       "seed": args.seed, "warm_up_s": args.warm_up,
                       "bootstrap": args.bootstrap, "kit": str(kit),
                       "kstreams_jar": str(jar) if jar else None},
        "commit": commit(), "machine": machine(), "versions": all_versions(kit), "notes": notes,
        "runs": [], "ratios": [],
    }
    runs: list[dict[str, Any]] = result["runs"]
    planned = schedule(systems, list(args.workloads), args.rounds)
    print(f"compare: {len(planned)} runs ({', '.join(systems)} x {', '.join(args.workloads)} x "
          f"{args.rounds} rounds); kit {kit}", flush=True)
    for note in notes:
        print(f"compare: note: {note}", flush=True)
    try:
        if args.warm_up > 0:
            result["warm_up"] = warm_up(ctx, planned, admin)
        for i, (rnd, place, wname, system) in enumerate(planned, 1):
            prefix = f"cmp{rnd}-{wname}-{system}-{secrets.token_hex(3)}"
            plan = RunPlan(rnd, place, BY_NAME[wname], system, prefix, scratch / prefix)
            print(f"compare: [{i}/{len(planned)}] round {rnd}, {wname}, {system} "
                  f"(load {os.getloadavg()[0]:.2f})", flush=True)
            record = run_one(ctx, plan, admin)
            runs.append(record)
            print("\n".join(summary_lines([record])), flush=True)
            result["ratios"] = ratios(runs)
            out.write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    except KeyboardInterrupt:
        notes.append("interrupted: the runs after the last one recorded were not made")
    finally:
        if not args.keep_logs:
            shutil.rmtree(scratch, ignore_errors=True)
    warm = result.get("warm_up")
    made = [warm, *runs] if warm else runs  # every run on the broker, the warm-up first
    left = sweep_groups(admin, [r["prefix"] for r in made]) if made else []
    if left:
        notes.append(f"consumer groups left on the broker: {', '.join(left)}")
    result["ratios"] = ratios(runs)
    result["duration_s"] = round((datetime.now(UTC) - started).total_seconds(), 1)
    out.write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    finish(result, out, png, args.out_dir, args.publish)
    print("compare: every run (round 0: the warm-up, not compared):")
    print("\n".join(summary_lines(made)))
    if args.keep_logs:
        print(f"compare: every run's folder is in {scratch}")
    return 0 if runs and all(r["ok"] for r in runs) and len(runs) == len(planned) else 1


if __name__ == "__main__":
    sys.exit(main())
