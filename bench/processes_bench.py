"""One worker process against `xwait worker --processes 2`: the W1 replies drain, interleaved.

Run: ``.venv/bin/python bench/processes_bench.py [--waits 100000] [--rounds 2]
[--processes 1,2] [--partitions 8] [--kit ../shared/bench-kit] [--out FILE]``

Each run has topics of its own on the broker at XWAIT_BOOTSTRAP: the bench
kit's loadgen preloads every request and reply (definition ``bench-long``,
mix ``replies``: no timer fires), then starts ``xwait worker --processes N``
and times until every wait has its outcome.  Reported per run: input
events/s over the whole drain (loadgen's figure, from the process start, so
the supervisor's second group join counts against it) and over the part
after the first outcome (the steady drain), and the time to the first
outcome.  Rounds alternate the order.  Writes ``bench/results/processes-<ts>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from streams.config import REPO_ROOT
from streams.testing.compare.kit import DEFAULT_KIT, kit_topology
from streams.testing.harness.results import default_out, envelope, write_json
from streams.testing.workers import XWAIT


def run_one(kit: Path, processes: int, waits: int, partitions: int, bootstrap: str,
            folder: Path) -> dict[str, Any]:
    prefix = f"procs{processes}x{int(time.time())}"
    topo = kit_topology(folder / prefix / "topology", kit, ("bench-long.yaml",))
    env = {"XWAIT_BOOTSTRAP": bootstrap, "XWAIT_TOPIC_PREFIX": prefix,
           "XWAIT_APP_ID": f"{prefix}-proc", "XWAIT_TOPOLOGY": str(topo),
           "XWAIT_PARTITIONS": str(partitions), "XWAIT_DATA_DIR": str(folder / prefix / "data"),
           "XWAIT_LOG_LEVEL": "warning", "XWAIT_WEB_PORT": "16066"}
    subprocess.run([str(XWAIT), "topics", "create"], env={**os.environ, **env}, check=True,  # noqa: S603
                   capture_output=True)
    start = " ".join(["env", *(f"{k}={shlex.quote(v)}" for k, v in env.items()),
                      str(XWAIT), "worker", "--processes", str(processes)])
    out = folder / f"{prefix}.json"
    subprocess.run([sys.executable, str(kit / "loadgen.py"), "--bootstrap", bootstrap,  # noqa: S603
                    "--prefix", prefix, "--definition", "bench-long", "--mode", "drain",
                    "--waits", str(waits), "--mix", "replies", "--deadline-s", "10800",
                    "--schemas", str(REPO_ROOT / "schemas"), "--start-cmd", start,
                    "--log", str(folder / f"{prefix}.log"), "--out", str(out)],
                   check=True, capture_output=True)
    result: dict[str, Any] = json.loads(out.read_text())
    done = result["outcomes_done_at_s"] or {}
    first, last = result.get("first_outcome_s"), done.get("99%")
    steady = (0.99 * result["input_events_total"] / (last - first)
              if first is not None and last and last > first else None)
    return {"processes": processes, "waits": waits, "completed": result["completed"],
            "events_per_s": result["input_events_per_s"],
            "steady_events_per_s": round(steady, 1) if steady else None,
            "first_outcome_s": first, "seconds": result["seconds"],
            "missing": result["missing"], "wrong": result["wrong_outcome"],
            "duplicates": result["duplicate_outcome_ids"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--waits", type=int, default=100_000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--processes", default="1,2")
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--kit", type=Path, default=DEFAULT_KIT)
    p.add_argument("--out", type=Path, default=default_out("processes"))
    args = p.parse_args(argv)
    bootstrap = os.environ.get("XWAIT_BOOTSTRAP", "127.0.0.1:9092")
    counts = [int(n) for n in args.processes.split(",")]
    started = datetime.now(UTC)
    runs = []
    with tempfile.TemporaryDirectory(prefix="xwait-procs-") as tmp:
        for r in range(args.rounds):
            for n in counts if r % 2 == 0 else list(reversed(counts)):
                row = run_one(args.kit, n, args.waits, args.partitions, bootstrap, Path(tmp))
                row["round"] = r + 1
                row["loadavg"] = os.getloadavg()[0]
                print(json.dumps(row), flush=True)
                runs.append(row)
    write_json(args.out, envelope("processes_bench", started,
                                  measured=datetime.now(UTC).isoformat(), runs=runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
