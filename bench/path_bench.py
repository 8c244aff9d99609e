"""The record path alone, in instructions: Python rules against the native ones.

Run: ``.venv/bin/python bench/path_bench.py [--workload drain|storm|all] [--waits 2000]
[--impl python,native] [--callgrind] [--out FILE]``.

`build_batch` (decode, rows, decide, effects, encode; no Kafka, no RocksDB:
rows in a dict) over the drain (W1 requests, replies 90% valid, a review of
each invalid one, on bench/waits/bench-long.yaml) or the storm (silent
requests on bench-storm.yaml, then the due timer each wait's deadline fires,
every reminder and the escalation in one decision), in batches of 500, once
per implementation (`RecordHandler(pure_python=...)`).

On a shared machine the CPU time of the same code moves by a factor of two
with the load; the instructions it executes do not.  ``--callgrind`` runs
each measurement under valgrind's callgrind, counting only what runs inside
the timed section (the batches are driven through ``functools.reduce``, and
callgrind collects only inside that C function: ``--toggle-collect``), and
reports instructions per record; without it, the thread's CPU time per
record.  Every run is printed and written as JSON (``--out``).
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from streams.definitions import load_definitions
from streams.processor.records import RecordHandler
from streams.testing.harness import record_path
from streams.testing.harness.topology import BENCH_WAITS


def run(handler: RecordHandler, items: list[record_path.Item]) -> Counter[str]:
    """Every item decided in batches of 500, rows in a dict; the batches' counters."""
    rows: record_path.Rows = {}
    counters: Counter[str] = Counter()

    def one(_: None, start: int) -> None:
        batch = items[start:start + record_path.BATCH]
        counters.update(record_path.decide(handler, batch, rows).counters)

    # callgrind --toggle-collect counts only inside this C function: the batches alone.
    functools.reduce(one, range(0, len(items), record_path.BATCH), None)
    return counters


def measure(impl: str, workload: str, waits: int, seed: int) -> dict[str, Any]:
    handler = RecordHandler(load_definitions(BENCH_WAITS), record_path.PARTITIONS,
                            pure_python=impl == "python")
    if impl == "native" and handler.native() is None:
        raise SystemExit("path_bench: the native extension is not built (make venv)")
    items: list[record_path.Item] = (list(record_path.drain_records(waits, seed))
                                     if workload == "drain"
                                     else record_path.storm_records(handler, waits, seed))
    begin = time.thread_time()
    counters = run(handler, items)
    cpu = time.thread_time() - begin
    native = handler.native()
    return {"impl": impl, "workload": workload, "waits": waits, "records": len(items),
            "cpu_us_per_record": round(cpu / len(items) * 1e6, 1),
            "outcomes": sum(n for k, n in counters.items() if k.startswith("outcomes.")),
            "declined": native.declines() if native is not None else None}


def under_callgrind(impl: str, workload: str, waits: int, seed: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        result = subprocess.run(
            ["valgrind", "--tool=callgrind", "--toggle-collect=*functools_reduce*",
             f"--callgrind-out-file={out}", sys.executable, __file__, "--one", impl,
             "--workload", workload, "--waits", str(waits), "--seed", str(seed)],
            capture_output=True, text=True, check=True, env={"PYTHONHASHSEED": "0"})
    found = re.search(r"Collected : (\d+)", result.stderr)
    if found is None:
        raise SystemExit(f"path_bench: no count from callgrind:\n{result.stderr[-2000:]}")
    got: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    got["instructions_per_record"] = round(int(found.group(1)) / got["records"])
    got.pop("cpu_us_per_record")  # under valgrind: meaningless
    return got


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", choices=("drain", "storm", "all"), default="all")
    p.add_argument("--waits", type=int, default=2000)
    p.add_argument("--impl", default="python,native", help="python, native or both")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--callgrind", action="store_true", help="count instructions (valgrind)")
    p.add_argument("--out", type=Path, help="JSON of every run")
    p.add_argument("--one", help=argparse.SUPPRESS)  # a single measurement, as JSON
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.one, args.workload, args.waits, args.seed)))
        return 0
    workloads = ("drain", "storm") if args.workload == "all" else (args.workload,)
    runs = []
    for workload in workloads:
        for impl in args.impl.split(","):
            got = (under_callgrind if args.callgrind else measure)(
                impl, workload, args.waits, args.seed)
            got["load"] = Path("/proc/loadavg").read_text().split()[0]
            runs.append(got)
            figure = (f"{got['instructions_per_record']:,} instructions" if args.callgrind
                      else f"{got['cpu_us_per_record']} us CPU")
            print(f"{workload:5} {impl:6}: {got['records']:,} records, {figure} a record, "
                  f"{got['outcomes']:,} outcomes, declined {got['declined']}, "
                  f"load {got['load']}", flush=True)
    if args.out:
        args.out.write_text(json.dumps({"runs": runs}, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
