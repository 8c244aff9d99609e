"""The decision path alone: records per second through `build_batch`, no Kafka, no RocksDB.

Run: ``.venv/bin/python bench/decide_bench.py [--waits 8000] [--gc-threshold 700,20000]
[--rounds 2] [--batch 500] [--flush-mib 0] [--out bench/results/decide-<ts>.json]``.

The worker's one Python thread spends about two thirds of its time in
`build_batch` (py-spy, drain): decoding inputs, reading and writing rows,
deciding, encoding outputs.  This runs exactly that on the drain workload of
`compare.py` (W1 requests, replies 90% valid, a review for each invalid
one; bench/waits/bench-long.yaml, the bench kit's definition), in batches of 500 with rows
kept in a dict, so a change to the per-record cost is measured in seconds
and without the broker's noise.  Each garbage-collector threshold is run in
turn, `--rounds` times, interleaved; every run is reported, with the
collector's passes and its longest pause.  Beside the wall time each run
reports the thread's CPU time per record (`cpu_us_per_record`): on a busy
machine the wall time also counts the time other processes held the core
(two runs of the same code read 100 and 200 µs a record beside a test run),
the CPU time does not.

Warm, this bench flatters the path: in a worker under live traffic a
decision cost 195 µs of the main thread at 500 waits/s and 330 µs at 100
waits/s (batches of 30-50 and of 3) against 85-120 µs here, because the
broker, the load and the worker's other threads evict the path's code and
data between batches.  `--batch 3 --flush-mib 16` does the same between
batches (touches that much memory, encodes unrelated JSON; not timed): about
300 µs a decision; `--batch 30` 120-160.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from streams.definitions import load_definitions
from streams.processor.collector import GcWatch
from streams.processor.latency import Latencies
from streams.processor.records import RecordHandler
from streams.testing.harness import record_path
from streams.testing.harness.results import default_out, envelope, write_json
from streams.testing.harness.topology import BENCH_WAITS


class Flush:
    """Evicts the CPU caches between batches, as a live worker's other work does."""

    def __init__(self, mib: int) -> None:
        self.memory = bytearray(mib * 1024 * 1024)
        rng = random.Random(0)  # noqa: S311 - filler
        self.other = [{f"k{i}": [rng.random() for _ in range(5)]} for i in range(mib * 200)]

    def __call__(self) -> None:
        memory = self.memory
        for i in range(0, len(memory), 64):
            memory[i] = (memory[i] + 1) & 0xFF
        json.dumps(self.other)


def run_once(handler: RecordHandler, records: Sequence[record_path.Item], threshold: int,
             batch_size: int = record_path.BATCH, flush: Flush | None = None) -> dict[str, Any]:
    """Decide every record in batches; the rate, the outcomes, the collector's passes.

    Only the batches are timed, not the flush between them."""
    rows: record_path.Rows = {}
    pauses = Latencies()
    watch = GcWatch(pauses)  # the worker's own timing of the collector's passes
    saved = gc.get_threshold()
    gc.collect()
    gc.set_threshold(threshold, saved[1], saved[2])
    watch.install()
    counters: Counter[str] = Counter()
    seconds = 0.0
    cpu = 0.0
    try:
        for i in range(0, len(records), batch_size):
            if flush is not None:
                flush()
            begin, begin_cpu = time.perf_counter(), time.thread_time()
            batch = list(records[i:i + batch_size])
            counters.update(record_path.decide(handler, batch, rows).counters)
            seconds += time.perf_counter() - begin
            cpu += time.thread_time() - begin_cpu
    finally:
        watch.remove()
        gc.set_threshold(*saved)
    return {"gc_threshold": threshold, "records": len(records),
            "seconds": round(seconds, 3), "records_per_s": round(len(records) / seconds),
            "us_per_record": round(seconds / len(records) * 1e6, 1),
            "cpu_us_per_record": round(cpu / len(records) * 1e6, 1),
            "gc_passes": sum(watch.passes),
            "gc_longest_ms": round(pauses.summary().get("gc_us", {}).get("max", 0) / 1000, 1),
            "outcomes": sum(n for k, n in counters.items() if k.startswith("outcomes.")),
            "counters": dict(sorted(counters.items()))}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--waits", type=int, default=8000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--gc-threshold", default="700,20000",
                   help="comma-separated young-generation thresholds to compare")
    p.add_argument("--workload", choices=("drain", "storm"), default="drain",
                   help="drain: requests, replies, reviews; storm: silent requests, then "
                        "the due timer of each, every deadline long past")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--batch", type=int, default=record_path.BATCH,
                   help="records a batch (the worker's most is 500; under live traffic 3-50)")
    p.add_argument("--flush-mib", type=int, default=0,
                   help="MiB of memory touched between batches, to decide on cold caches")
    p.add_argument("--out", type=Path, help="JSON (default bench/results/decide-<ts>.json)")
    args = p.parse_args(argv)
    thresholds = [int(t) for t in args.gc_threshold.split(",")]
    if args.batch < 1 or args.flush_mib < 0:
        p.error("--batch must be 1 or more and --flush-mib 0 or more")
    flush = Flush(args.flush_mib) if args.flush_mib else None
    started = datetime.now(UTC)
    handler = RecordHandler(load_definitions(BENCH_WAITS), record_path.PARTITIONS)
    records = (record_path.storm_records(handler, args.waits, args.seed) if args.workload == "storm"
               else record_path.drain_records(args.waits, args.seed))
    runs = []
    for round_ in range(1, args.rounds + 1):
        for threshold in thresholds:
            run = {"round": round_, "load": Path("/proc/loadavg").read_text().split()[0],
                   **run_once(handler, records, threshold, args.batch, flush)}
            runs.append(run)
            print(f"round {round_} gc_threshold={threshold:>6}: {run['records_per_s']:>6,} "
                  f"records/s ({run['us_per_record']} us each, "
                  f"CPU {run['cpu_us_per_record']} us), {run['gc_passes']} gc passes, "
                  f"longest {run['gc_longest_ms']} ms, {run['outcomes']:,} outcomes, "
                  f"load {run['load']}", flush=True)
    out: Path = args.out or default_out("decide", started)
    write_json(out, envelope("decide_bench", started, workload=args.workload, waits=args.waits,
                             batch=args.batch, flush_mib=args.flush_mib, runs=runs))
    print(f"decide_bench: wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
