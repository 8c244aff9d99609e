"""Park N waits on one real worker and measure it; write the figures to a JSON file.

Run: ``.venv/bin/python bench/park_bench.py [--waits 100000] [--reply-fraction 0.5]
[--deadline auto|PT20S] [--deadline-spread 0] [--partitions 8] [--seed 1]
[--out bench/results/park-<ts>.json] [--bootstrap 127.0.0.1:9092]``.
See bench/README.md for what each figure means, `streams.testing.park` for the run:
it parks N waits, replies to a share of them before the first deadline, lets the
rest end by their deadline, then runs a raw consume->produce baseline over the
same requests on the same broker.

Every wait has a timeout; on one (or any failure) the file is still written,
with ``"complete": false``, and the script exits 1.
"""

from __future__ import annotations

import argparse
import math
import sys

from streams.testing.harness.options import broker_options, duration, plan_of, positive, share
from streams.testing.harness.results import conclude, default_out
from streams.testing.park import ParkPlan, run_park, summary_text


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--waits", type=positive, default=100_000,
                   help="waits to park (default 100000)")
    p.add_argument("--reply-fraction", type=share, default=0.5,
                   help="share of waits that get a reply; the rest end by deadline (0.5)")
    p.add_argument("--deadline", default="auto", type=duration("auto"),
                   help="ISO 8601 deadline of every wait, e.g. PT20S; 'auto' (default) is "
                        "max(20 s, waits / 250 s) so that parking and replying fit before it")
    p.add_argument("--deadline-spread", type=float, default=0.0,
                   help="seconds; when above 0 each StartWait carries its own deadline "
                        "(--deadline plus a uniform 0..spread), so deadlines do not all "
                        "fall due within the few seconds the requests took to produce (0)")
    broker_options(p, "park", seed="the choice of replied waits")
    args = p.parse_args(argv)
    if args.deadline_spread < 0:
        p.error("--deadline-spread: expected 0 or more seconds")
    if args.deadline == "auto":
        args.deadline = f"PT{max(20, math.ceil(args.waits / 250))}S"
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = run_park(plan_of(ParkPlan, args))
    summary = (summary_text(result) if result["figures"] is not None
               else "park_bench: no figures; " + "; ".join(result["errors"]))
    return conclude("park_bench", result, args.out or default_out("park"), summary)


if __name__ == "__main__":
    sys.exit(main())
