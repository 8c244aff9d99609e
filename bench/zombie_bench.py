"""Issue 48's scenario: a worker frozen past its session timeout wakes as a zombie.

Run: ``.venv/bin/python bench/zombie_bench.py [--nodes 3] [--runs 5]
[--guarantee at_least_once|exactly_once|both] [--variant stopped|kept|both] [--rate 300]
[--seconds 180] [--partitions 8] [--port 22092] [--out bench/results/zombie-<ts>.json]
[--keep-logs DIR]``

On a cluster of its own (``scripts/kafka start --nodes 3 --port``: three
KRaft nodes, topics with three replicas and min.insync.replicas=2;
``--nodes 1``: one broker), live W1 load at ``--rate`` waits a second for
``--seconds``, and meanwhile, with the workers' default session timeout
(20 s):

* t = 30 s: the broker leading the most input partitions frozen with
  SIGSTOP for 30 s, then thawed (``scripts/kafka freeze/thaw``);
* t = 75 s: a second worker joins;
* t = 115 s: the first worker frozen with SIGSTOP while behind, for 30 s
  (past its session timeout: the group gives every partition to the
  second), then woken: a zombie until its next heartbeat;
* t = 170 s, variant ``stopped``: the second worker is stopped, so that the
  first takes every partition back from its own databases; variant
  ``kept``: both run to the end.

Each run is judged as the crash bench judges (`streams.testing.chaos`):
lost, conflicting, wrong, duplicate outcome and action ids; every wait must
end before the run does.  Writes the JSON and ``bench/results/zombie-latest.md``;
exit status 1 if any wait was lost, conflicting or wrong, any worker stopped
itself, or an exactly_once run duplicated an id.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from streams import topics
from streams.config import Guarantee, Settings
from streams.testing.chaos import Broker, Plan, chaos_settings, run_chaos
from streams.testing.cluster_chaos import INPUTS, KafkaCluster
from streams.testing.harness import machine

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
SESSION_TIMEOUT_S = 20.0  # the workers' default (XWAIT_SESSION_TIMEOUT)


def schedule(variant: str) -> list[tuple[float, str]]:
    steps = [(30.0, "broker freeze"), (75.0, "peer joins"), (115.0, "zombie")]
    if variant == "stopped":
        steps.append((170.0, "peer leaves"))
    return steps


def frozen_broker(cluster: KafkaCluster, inputs: list[str]) -> Broker:
    """Freeze/thaw the node that leads the most input partitions when the freeze comes."""
    frozen: list[str] = []

    def freeze() -> None:
        leads = cluster.leaders(inputs)
        node = str(max(leads, key=lambda n: (leads[n], -n)))
        frozen.append(node)
        cluster.script("freeze", node) if cluster.nodes > 1 else cluster.script("freeze")

    def thaw() -> None:
        node = frozen.pop()
        cluster.script("thaw", node) if cluster.nodes > 1 else cluster.script("thaw")

    def unsupported() -> None:
        raise RuntimeError("this bench freezes brokers; it never stops or starts them")

    return Broker(stop=unsupported, start=unsupported, freeze=freeze, thaw=thaw)


def table(reports: list[dict[str, Any]]) -> str:
    lines = ["| guarantee | second worker | run | waits | lost | conflicting | wrong "
             "| duplicate outcomeIds / actionIds | fenced | worker exited | minutes |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in reports:
        exited = any(e["event"] == "worker exited" for e in r["events"])
        lines.append(
            f"| `{r['guarantee']}` | {r['variant']} | {r['run']} | {r['waits']:,} | {r['lost']} "
            f"| {r['conflicting']} | {r['wrong']} | {r['duplicate_outcomes']:,} / "
            f"{r['duplicate_actions']:,} | {r.get('fenced', 0)} | {'yes' if exited else 'no'} "
            f"| {r['seconds'] / 60:.1f} |")
    return "\n".join(lines)


def failed(r: dict[str, Any]) -> bool:
    exited = any(e["event"] == "worker exited" for e in r["events"])
    return bool(r["lost"] or r["conflicting"] or r["wrong"] or exited
                or (r["guarantee"] == "exactly_once"
                    and (r["duplicate_outcomes"] or r["duplicate_actions"])))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=3, choices=[1, 3])
    p.add_argument("--runs", type=int, default=5, help="runs per guarantee and variant")
    p.add_argument("--guarantee", choices=["at_least_once", "exactly_once", "both"],
                   default="both")
    p.add_argument("--variant", choices=["stopped", "kept", "both"], default="both",
                   help="the second worker stopped at 170 s, or kept to the end")
    p.add_argument("--rate", type=float, default=300.0, help="waits offered per second")
    p.add_argument("--seconds", type=float, default=180.0, help="how long waits are offered")
    p.add_argument("--partitions", type=int, default=8)
    # Below the kernel's ephemeral ports, as every broker a run kills or freezes.
    p.add_argument("--port", type=int, default=22092, help="(node 1's) port of the broker")
    p.add_argument("--keep-logs", type=Path, metavar="DIR")
    p.add_argument("--out", type=Path,
                   default=RESULTS / f"zombie-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    guarantees = list(Guarantee) if args.guarantee == "both" else [Guarantee(args.guarantee)]
    variants = ["stopped", "kept"] if args.variant == "both" else [args.variant]
    RESULTS.mkdir(parents=True, exist_ok=True)
    cluster = KafkaCluster(args.port, nodes=args.nodes)
    start: Callable[[], Any] = (cluster.start if args.nodes > 1
                                else lambda: cluster.script("start"))
    start()
    reports: list[dict[str, Any]] = []
    started = machine()
    try:
        for run in range(1, args.runs + 1):
            for guarantee in guarantees:
                for variant in variants:
                    reports.append(one_run(args, cluster, guarantee, variant, run))
                    args.out.write_text(json.dumps(
                        {"measured": datetime.now(UTC).isoformat(),
                         "machine": {"start": started, "end": machine()},
                         "runs": reports}, indent=2) + "\n")
    finally:
        cluster.script("reset", *(["--nodes", str(args.nodes)] if args.nodes > 1 else []))
    (RESULTS / "zombie-latest.md").write_text(
        f"Measured {datetime.now(UTC):%Y-%m-%d} on {started['host']} ({started['cpus']} cores, "
        f"load average {started['loadavg'][0]:.2f} at the start), {args.nodes} node(s): "
        f"`{args.out.name}`\n\n" + table(reports) + "\n")
    print(table(reports))
    return 1 if any(failed(r) for r in reports) else 0


def one_run(args: argparse.Namespace, cluster: KafkaCluster, guarantee: Guarantee,
            variant: str, run: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="xwait-zombie-") as tmp:
        folder = Path(tmp)
        prefix = f"zombie{int(time.time())}"
        rf = 3 if args.nodes > 1 else 1
        base = Settings(bootstrap=cluster.bootstrap if args.nodes > 1
                        else f"127.0.0.1:{args.port}", topic_prefix=prefix,
                        app_id=f"{prefix}-processor", partitions=args.partitions,
                        replication_factor=rf)
        settings = chaos_settings(base, folder, guarantee).with_overrides(
            session_timeout=SESSION_TIMEOUT_S)
        topics.create(settings, topics.load_specs(settings))
        plan = Plan(waits=int(args.rate * args.seconds), rate=args.rate, kills=0,
                    empty_disk=0, joins=0, broker_frozen_s=30.0, zombie_frozen_s=30.0,
                    zombie_keeps_peer=True, schedule=schedule(variant), settle_s=300.0,
                    seed=run)
        broker = frozen_broker(cluster, [settings.topic(t) for t in INPUTS])
        report = run_chaos(settings, folder, plan, broker=broker).as_dict()
        report.update(variant=variant, run=run, nodes=args.nodes)
        if args.keep_logs is not None:
            args.keep_logs.mkdir(parents=True, exist_ok=True)
            for log in folder.glob("*.log"):
                shutil.copy(log, args.keep_logs /
                            f"{guarantee.value}-{variant}-{run}-{log.name}")
        print(json.dumps({k: v for k, v in report.items() if k != "events"}), flush=True)
        return report


if __name__ == "__main__":
    sys.exit(main())
