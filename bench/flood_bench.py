"""A flood of hostile records against one real worker; write the figures to a JSON file.

Run: ``.venv/bin/python bench/flood_bench.py [--waits 5000] [--hostile 100000]
[--reply-every 50] [--compressed-fraction 0.1] [--early-reply-ttl PT30S]
[--partitions 8] [--seed 1] [--out bench/results/flood-<ts>.json]
[--bootstrap 127.0.0.1:9092]``.  See bench/README.md for what each figure means.

`streams.testing.flood` holds the run (`run.run_flood`), the hostile mix
(`mix`) and the accounting (`accounting`).  The target it measures (open
issue): a flood of hostile records is rejected at no less than the worker's
drain rate, and valid replies in the same partitions are not left minutes
behind it.  One run, against the broker given (shared:
never started or stopped here; the run's own topics are deleted at the end):

1. creates its topics under a fresh prefix and a topology folder with the
   shipped definitions, their early-reply TTL set to ``--early-reply-ttl`` so
   that replies and commands held for keys no wait has are rejected
   ``unmatched`` within the run, and starts ONE ``xwait worker``;
2. parks ``--waits`` expense-approval waits and measures the worker's parks/s:
   the drain rate of this run on this machine, the like-for-like yardstick;
3. produces ``--hostile`` hostile records of every kind the processor refuses
   (`KINDS`), over the four input topics and every partition, with a valid
   reply to a parked wait after every ``--reply-every`` of them, a share
   through producers that compress (gzip, lz4, zstd, snappy);
4. measures hostile records/s from the first flood record's append until the
   worker has decided the last one (its positions in /xwait/stats) and
   published its rejection, the valid replies' reply->outcome latency, and
   accounts for every hostile record (`account`); checks that no hostile
   record ended, parked or changed a wait;
5. writes the JSON (also when it fails: ``"complete": false``, exit 1), prints
   a summary and deletes its topics.
"""

from __future__ import annotations

import argparse
import sys

from streams.testing.flood.mix import KINDS
from streams.testing.flood.run import FloodPlan, run_flood, summary_text
from streams.testing.harness.options import broker_options, duration, plan_of, positive, share
from streams.testing.harness.results import conclude, default_out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--waits", type=positive, default=5000,
                   help="valid waits parked before the flood (5000)")
    # Alike in shape with scale_bench.py's sample options (duplicates lists the pair):
    # deliberate, each bench declares its own options; nothing is shared but argparse.
    flood = p.add_argument_group("the flood")
    flood.add_argument("--hostile", type=int, default=100_000,
                       help="hostile records in the flood (100000)")
    flood.add_argument("--reply-every", type=positive, default=50,
                       help="a valid reply to a parked wait after every N hostile records (50)")
    flood.add_argument("--compressed-fraction", type=share, default=0.1,
                       help="share of hostile records sent compressed (gzip/lz4/zstd/snappy) "
                            "(0.1)")
    flood.add_argument("--early-reply-ttl", default="PT30S", type=duration("shipped"),
                       help="early-reply TTL of every definition, so that held records are "
                            "rejected unmatched within the run; 'shipped' keeps the "
                            "definitions' own (PT30S)")
    broker_options(p, "flood", seed="the mix and the keys")
    args = p.parse_args(argv)
    if args.hostile < len(KINDS):
        p.error(f"--hostile: expected at least {len(KINDS)}, one record of every kind")
    if args.early_reply_ttl == "shipped":
        args.early_reply_ttl = None
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = run_flood(plan_of(FloodPlan, args))
    return conclude("flood_bench", result, args.out or default_out("flood"),
                    summary_text(result))


if __name__ == "__main__":
    sys.exit(main())
