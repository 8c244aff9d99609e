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
import sys
import tempfile
from pathlib import Path
from typing import Any

from streams import topics
from streams.config import Guarantee
from streams.testing.chaos import Broker, Plan, run_chaos
from streams.testing.cluster_chaos import INPUTS, KafkaCluster
from streams.testing.harness import runbook
from streams.testing.harness.report import table as markdown

SESSION_TIMEOUT_S = 20.0  # the workers' default (XWAIT_SESSION_TIMEOUT)


def schedule(variant: str) -> list[tuple[float, str]]:
    steps = [(30.0, "broker freeze"), (75.0, "peer joins"), (115.0, "zombie")]
    if variant == "stopped":
        steps.append((170.0, "peer leaves"))
    return steps


def frozen_broker(cluster: KafkaCluster, inputs: list[str]) -> Broker:
    """Freeze/thaw the node that leads the most input partitions when the freeze comes."""
    if cluster.nodes == 1:
        return cluster.broker()
    frozen: list[str] = []

    def freeze() -> None:
        leads = cluster.leaders(inputs)
        node = str(max(leads, key=lambda n: (leads[n], -n)))
        frozen.append(node)
        cluster.script("freeze", node)

    def thaw() -> None:
        cluster.script("thaw", frozen.pop())

    def unsupported() -> None:
        raise RuntimeError("this bench freezes brokers; it never stops or starts them")

    return Broker(stop=unsupported, start=unsupported, freeze=freeze, thaw=thaw)


def exited(r: dict[str, Any]) -> bool:
    return any(e["event"] == "worker exited" for e in r["events"])


def table(reports: list[dict[str, Any]]) -> str:
    return "\n".join(markdown(
        ["guarantee", "second worker", "run", "waits", "lost", "conflicting", "wrong",
         "duplicate outcomeIds / actionIds", "fenced", "worker exited", "minutes"],
        [[f"`{r['guarantee']}`", r["variant"], r["run"], f"{r['waits']:,}", r["lost"],
          r["conflicting"], r["wrong"],
          f"{r['duplicate_outcomes']:,} / {r['duplicate_actions']:,}", r.get("fenced", 0),
          "yes" if exited(r) else "no", f"{r['seconds'] / 60:.1f}"] for r in reports]))


def failed(r: dict[str, Any]) -> bool:
    return runbook.broke(r, actions=True) or exited(r)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    # Below the kernel's ephemeral ports, as every broker a run kills or freezes.
    p = runbook.parser(__doc__, "zombie", rate=300.0, rate_help="waits offered per second",
                       port=(22092, "(node 1's) port of the broker"), seed=False)
    p.add_argument("--nodes", type=int, default=3, choices=[1, 3])
    p.add_argument("--runs", type=int, default=5, help="runs per guarantee and variant")
    p.add_argument("--variant", choices=["stopped", "kept", "both"], default="both",
                   help="the second worker stopped at 170 s, or kept to the end")
    p.add_argument("--seconds", type=float, default=180.0, help="how long waits are offered")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    variants = ["stopped", "kept"] if args.variant == "both" else [args.variant]
    cluster = KafkaCluster(args.port, nodes=args.nodes)
    if args.nodes > 1:
        cluster.start()
    else:
        cluster.script("start")
    book = runbook.RunBook("zombie_bench", args.out, args.keep_logs)
    try:
        for run in range(1, args.runs + 1):
            for guarantee in runbook.guarantees(args.guarantee):
                for variant in variants:
                    one_run(args, book, cluster, guarantee, variant, run)
    finally:
        cluster.script("reset", *(["--nodes", str(args.nodes)] if args.nodes > 1 else []))
    book.finish(table(book.reports), after=f", {args.nodes} node(s)")
    return 1 if any(failed(r) for r in book.reports) else 0


def one_run(args: argparse.Namespace, book: runbook.RunBook, cluster: KafkaCluster,
            guarantee: Guarantee, variant: str, run: int) -> None:
    with tempfile.TemporaryDirectory(prefix="xwait-zombie-") as tmp:
        folder = Path(tmp)
        settings = book.settings(cluster.bootstrap, folder, guarantee, args.partitions,
                                 replication_factor=3 if args.nodes > 1 else 1,
                                 ).with_overrides(session_timeout=SESSION_TIMEOUT_S)
        topics.create(settings, topics.load_specs(settings))
        plan = Plan(waits=int(args.rate * args.seconds), rate=args.rate, kills=0,
                    empty_disk=0, joins=0, broker_frozen_s=30.0, zombie_frozen_s=30.0,
                    zombie_keeps_peer=True, schedule=schedule(variant), settle_s=300.0,
                    seed=run)
        broker = frozen_broker(cluster, [settings.topic(t) for t in INPUTS])
        report = run_chaos(settings, folder, plan, broker=broker).as_dict()
        report.update(variant=variant, run=run, nodes=args.nodes)
        book.add(report, folder, f"{guarantee.value}-{variant}-{run}")


if __name__ == "__main__":
    sys.exit(main())
