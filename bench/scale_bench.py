"""Park waits on one worker up to 10k, 100k, 1M, 10M and measure what grows with N (issue 10).

Run: ``.venv/bin/python bench/scale_bench.py [--checkpoints 10000,100000,1000000,10000000]
[--skip-restore-above 1000000] [--skip-standby-above 1000000] [--bootstrap 127.0.0.1:9092]``;
``--plot-only FILE`` redraws the plot of a result; ``--publish docs/scale.png`` copies it.
See bench/README.md for what each figure means.

One run, against the broker given (shared: it is never stopped; the run's
topics and groups are deleted at the end):

1. creates its own topics under a fresh prefix and a topology folder with the
   repository's topics.yaml and the shipped definitions (timers shorter than
   ``--timer-floor`` stretched to it, so that nothing falls due while the run
   parks), and starts ONE ``xwait worker`` (8 partitions by default);
2. for each checkpoint N: produces the StartWait records (JSON) that bring the
   parked waits to N as fast as confluent-kafka goes, spread over the shipped
   definitions, two timers each; ~2% get an invalid reply (in review), ~2% a
   SUSPEND command; polls ``processed.requests`` until the worker has taken
   them all (parks/s) and its census counts them;
3. at the checkpoint: RSS (VmRSS, VmHWM), RocksDB bytes on disk per wait,
   status and list latency through the web API, the stream clock's tick cost
   (``latencyMs`` of /xwait/stats);
4. parks ``--sample`` waits whose deadline is ``--sample-deadline`` away, then
   restarts the worker on its own disk (SIGTERM, start: seconds until it owns
   every partition and its stream time moves), starts a worker on an empty
   disk (restore rows/s), starts a second worker beside it and, once its
   standby copies have caught up, stops the first (standby takeover);
5. checks that every sample wait got exactly one outcome;
6. writes the JSON after every checkpoint, and at the end a PNG with one panel
   per figure against N (log scale).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from streams.testing.harness.options import broker_options, duration, plan_of
from streams.testing.harness.report import publish
from streams.testing.harness.results import default_out
from streams.testing.scale.phases import LIST_BUDGET_S, LIST_MIN, ScalePlan, say
from streams.testing.scale.report import plot, table, targets
from streams.testing.scale.run import run_scale


def parse_checkpoints(text: str) -> list[int]:
    try:
        values = [int(x.replace("_", "")) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got "
                                         f"{text!r}") from None
    if not values or values != sorted(set(values)) or values[0] < 1:
        raise argparse.ArgumentTypeError("expected increasing numbers above zero")
    return values


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="scale_bench", description=(__doc__ or "").splitlines()[0])
    p.add_argument("--checkpoints", type=parse_checkpoints,
                   default=list(ScalePlan.checkpoints), help="parked waits at each checkpoint "
                   "(default 10000,100000,1000000,10000000)")
    broker_options(p, "scale", seed="the keys and the mix")
    waits = p.add_argument_group("the waits")
    waits.add_argument("--timer-floor", default="P1D", type=duration("none"),
                       help="timers of the shipped definitions shorter than this are raised to "
                            "it, so no wait's timer falls due during the run; 'none' keeps them "
                            "(P1D)")
    waits.add_argument("--review-fraction", type=float, default=0.02,
                       help="share of waits that get an invalid reply: in review (0.02)")
    waits.add_argument("--suspend-fraction", type=float, default=0.02,
                       help="share of waits that get a SUSPEND command (0.02)")
    sample = p.add_argument_group(
        "the sample", "waits with a short deadline parked at each checkpoint, each of which "
        "must end exactly once after the restart and failovers")
    # Alike in shape with flood_bench.py's flood options (duplicates lists the pair):
    # deliberate, each bench declares its own options; nothing is shared but argparse.
    sample.add_argument("--sample", type=int, default=200, help="how many (200; 0: none)")
    sample.add_argument("--sample-deadline", default="PT60S", type=duration(),
                        help="their deadline (PT60S)")
    sample.add_argument("--sample-timeout", type=float, default=300.0,
                        help="seconds after the deadline to wait for their outcomes (300)")
    sample.add_argument("--sample-linger", type=float, default=10.0,
                        help="seconds to keep reading outcomes after the last sample wait "
                             "ended, to see a second outcome (10)")
    api = p.add_argument_group("the web API and the CLI")
    api.add_argument("--status-samples", type=int, default=20, help="status requests (20)")
    api.add_argument("--list-samples", type=int, default=10,
                     help=f"list requests (10; fewer, at least {LIST_MIN}, once they have "
                          f"taken {LIST_BUDGET_S:.0f} s)")
    api.add_argument("--list-limit", type=int, default=50, help="waits a list asks for (50)")
    api.add_argument("--no-cli", dest="cli", action="store_false",
                     help="do not also time `xwait status` and `xwait list` as processes")
    phases = p.add_argument_group("the restart, restore and standby phases")
    phases.add_argument("--skip-restart-above", type=int, default=None, metavar="N",
                        help="no restart phase at checkpoints above N (default: always)")
    phases.add_argument("--skip-restore-above", type=int, default=1_000_000, metavar="N",
                        help="no restore from an empty disk at checkpoints above N (1000000: "
                             "restoring 10M at ~5k rows/s takes half an hour)")
    phases.add_argument("--skip-standby-above", type=int, default=1_000_000, metavar="N",
                        help="no standby takeover at checkpoints above N (1000000: the "
                             "standby first restores every partition, as long as a restore)")
    phases.add_argument("--standby-wait", type=float, default=1800.0,
                        help="most seconds the second worker's standbys get to catch up before "
                             "the first is stopped anyway (1800)")
    phases.add_argument("--ready-timeout", type=float, default=1800.0,
                        help="seconds a restart, restore or standby may take (1800)")
    files = p.add_argument_group("the run's files")
    files.add_argument("--workdir", type=Path, default=None,
                       help="folder for the workers' data (default: a new temporary folder)")
    files.add_argument("--keep", action="store_true", help="keep the workers' data and logs")
    files.add_argument("--plot-only", type=Path, default=None, metavar="JSON",
                       help="run nothing: draw the plot (and print the table) of a result file")
    files.add_argument("--publish", type=Path, default=None, metavar="PNG",
                       help="also copy the plot to this (tracked) path, e.g. docs/scale.png")
    args = p.parse_args(argv)
    if not (0 <= args.review_fraction and 0 <= args.suspend_fraction
            and args.review_fraction + args.suspend_fraction < 1):
        p.error("--review-fraction and --suspend-fraction: expected shares adding up below 1")
    return args


def show(result_path: Path, target: Path | None) -> Path:
    """Print the table of a result, draw its plot beside it, and publish the plot."""
    result = json.loads(result_path.read_text(encoding="utf-8"))
    result["targets"] = targets(result)
    png = plot(result, result_path.with_suffix(".png"))
    print(table(result))
    if publish(png, target) is not None:
        print(f"scale_bench: copied the plot to {target}")
    return png


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.plot_only is not None:
        print(f"scale_bench: wrote {show(args.plot_only, args.publish)}")
        return 0
    out: Path = args.out or default_out("scale")
    plan = plan_of(ScalePlan, args, checkpoints=tuple(args.checkpoints),
                   timer_floor=None if args.timer_floor == "none" else args.timer_floor)
    result = run_scale(plan, out, args.workdir, args.keep)
    png = show(out, args.publish)
    say(f"wrote {out} and {png}")
    return 0 if result["complete"] else 1


if __name__ == "__main__":
    sys.exit(main())
