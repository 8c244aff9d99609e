"""How long a worker takes to get going again with N parked waits; write it to a JSON file.

Run: ``.venv/bin/python bench/recovery_bench.py [--waits 100000] [--partitions 8]
[--out bench/results/recovery-<ts>.json] [--bootstrap 127.0.0.1:9092]``.

A worker that takes over partitions (a restart, a failover, a rebalance)
must rebuild its timer index and wait census from the table rows it owns
before it processes anything, and a worker on a new machine must first
restore the table from its changelog.  One run, against the broker given:

1. creates its own topics and starts one ``xwait worker``;
2. parks N waits whose deadline is an hour away and waits until all are parked;
3. stops the worker (SIGTERM) and starts it again on the same data folder:
   **restart** (RocksDB is on disk, only the rows are re-read);
4. stops it and starts a worker on an empty data folder: **failover** (the
   table is restored from its changelog topic first);
5. starts a second worker beside that one, waits until the partitions are
   shared and the second has had time to fill its standby copies (faust's
   `table_standby_replicas`, 1 by default), then stops the first (SIGTERM, so
   the group moves its partitions at once instead of after the session
   timeout): **standby takeover**, the seconds until the second owns every
   partition and counts all N waits;
6. for each start, records the seconds until the worker owns every partition
   and counts all N waits as parked, and the rebuild's own log line (rows read,
   timers indexed, seconds); writes the JSON and deletes its topics.
"""

from __future__ import annotations

import argparse
import json
import re
import secrets
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

sys.path.insert(0, str(Path(__file__).resolve().parent))

from park_bench import (  # noqa: E402 - the sibling module, importable once on the path
    DEFINITION,
    REPO,
    BenchError,
    Sender,
    delete_topics,
    machine,
    make_topology,
    versions,
    wait_for,
)

from streams import codec, topics  # noqa: E402
from streams.codec import RecordType  # noqa: E402
from streams.config import Settings  # noqa: E402
from streams.testing.workers import WorkerProcess  # noqa: E402

REBUILT = re.compile(r"timer index rebuilt partitions=\[([0-9, ]*)\] rows=(\d+) timers=(\d+) "
                     r"unreadable=(\d+) seconds=([0-9.]+)")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="recovery_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--waits", type=int, default=100_000, help="waits to park")
    parser.add_argument("--partitions", type=int, default=8, help="partitions of every topic")
    parser.add_argument("--out", type=Path, help="result file (default bench/results/...)")
    parser.add_argument("--bootstrap", default=Settings().bootstrap, help="Kafka bootstrap")
    parser.add_argument("--standby-settle", type=float, default=30.0,
                        help="seconds the second worker gets to fill its standby copies")
    args = parser.parse_args(argv)
    if args.waits < 1 or args.partitions < 1:
        parser.error("--waits and --partitions must be above zero")
    return args


def rebuilds(worker: WorkerProcess, since: int = 0) -> list[dict[str, Any]]:
    """The rebuild log lines of this worker after byte `since` of its log, newest last."""
    text = (worker.log_path.read_bytes()[since:].decode(errors="replace")
            if worker.log_path.exists() else "")
    return [{"partitions": len([p for p in m.group(1).split(",") if p.strip()]),
             "rows": int(m.group(2)), "timers": int(m.group(3)),
             "unreadable": int(m.group(4)), "seconds": float(m.group(5))}
            for m in REBUILT.finditer(text)]


def timed_start(worker: WorkerProcess, settings: Settings, waits: int) -> dict[str, Any]:
    """Start `worker`; seconds until it owns everything and counts every wait parked."""
    since = worker.log_path.stat().st_size if worker.log_path.exists() else 0
    worker.start(wait_owned=False)
    started = worker.started_at or time.monotonic()
    owned = wait_for(lambda: len((worker.stats() or {}).get("ownedPartitions", []))
                     == settings.partitions, 600, "the worker to own every partition", worker)
    ready = wait_for(lambda: (worker.stats() or {}).get("waits", {}).get("parked", 0) >= waits,
                     600, f"the worker to count {waits} parked waits", worker)

    def full() -> list[dict[str, Any]]:  # the rebuilds that covered every partition
        return [r for r in rebuilds(worker, since) if r["partitions"] == settings.partitions]

    wait_for(lambda: bool(full()), 30, "the rebuild's log line", worker)
    return {"owns_every_partition_s": round(owned - started, 2),
            "counts_every_wait_s": round(ready - started, 2),
            "rebuild": full()[-1],
            "rebuilds": len(rebuilds(worker, since)),
            "rss_mib": round((worker.rss_kib() or 0) / 1024, 1)}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = datetime.now(UTC)
    out: Path = args.out or (REPO / "bench" / "results"
                             / f"recovery-{started.strftime('%Y%m%dT%H%M%SZ')}.json")
    prefix = f"recoverybench-{secrets.token_hex(4)}"
    folder = Path(tempfile.mkdtemp(prefix="recovery-bench-"))
    settings = Settings(bootstrap=args.bootstrap, topic_prefix=prefix,
                        app_id=f"{prefix}-processor", partitions=args.partitions,
                        topology=make_topology(folder / "topology", "PT1H"),
                        data_dir=folder / "data")
    admin = AdminClient(settings.confluent())
    first = WorkerProcess(settings, folder, "first")
    fresh = WorkerProcess(settings, folder, "fresh")
    second = WorkerProcess(settings, folder, "second")
    figures: dict[str, Any] = {}
    errors: list[str] = []
    reachable = False
    try:
        try:
            admin.list_topics(timeout=10)
        except KafkaException as exc:
            raise BenchError(f"the broker at {args.bootstrap} did not answer") from exc
        reachable = True
        topics.create(settings, topics.load_specs(settings))
        figures["first_start"] = timed_start(first, settings, 0)
        sender = Sender(settings)
        topic = settings.topic("requests")
        t0 = time.monotonic()
        for _ in range(args.waits):
            key = secrets.token_hex(16)
            sender.send(topic, key, codec.encode(RecordType.START_WAIT, {
                "correlationKey": key, "definition": DEFINITION,
                "requestedAt": int(time.time() * 1000)}))
            sender.producer.poll(0)
        sender.flush(120)
        wait_for(lambda: first.counter("processed.requests") >= args.waits,
                 max(120.0, args.waits / 100), f"{args.waits} waits to park", first)
        figures["parked_in_s"] = round(time.monotonic() - t0, 1)
        print(f"recovery_bench: {args.waits} waits parked in {figures['parked_in_s']}s; "
              "restarting on the same data", flush=True)
        first.stop()
        figures["restart"] = timed_start(first, settings, args.waits)
        first.stop()
        print("recovery_bench: starting a worker on an empty data folder", flush=True)
        figures["failover"] = timed_start(fresh, settings, args.waits)
        print("recovery_bench: a second worker joins; then the first stops", flush=True)
        second.start(wait_owned=False)
        wait_for(lambda: bool((second.stats() or {}).get("ownedPartitions")), 600,
                 "the second worker to get partitions", second)
        time.sleep(args.standby_settle)  # standbys read the changelog in the background
        figures["standby_settle_s"] = args.standby_settle
        since = second.log_path.stat().st_size
        stopped = time.monotonic()
        fresh.stop()
        taken = wait_for(lambda: len((second.stats() or {}).get("ownedPartitions", []))
                         == settings.partitions, 600, "the takeover", second)
        ready = wait_for(lambda: (second.stats() or {}).get("waits", {}).get("parked", 0)
                         >= args.waits, 600, "the second to count every wait", second)
        full = [r for r in rebuilds(second, since) if r["partitions"] == settings.partitions]
        figures["standby_takeover"] = {
            "owns_every_partition_s": round(taken - stopped, 2),
            "counts_every_wait_s": round(ready - stopped, 2),
            "rebuild": full[-1] if full else None}
    except Exception as exc:  # any failure still writes an incomplete result
        errors.append(f"{type(exc).__name__}: {exc}")
    finally:
        for w in (first, fresh, second):
            w.stop()
        tails = ({w.log_path.name: w.log_tail() for w in (first, fresh, second)}
                 if errors else {})
        deleted = delete_topics(admin, settings) if reachable else []
        shutil.rmtree(folder, ignore_errors=True)
    result = {
        "benchmark": "recovery_bench", "complete": not errors,
        "timestamp": started.isoformat(timespec="seconds"),
        "parameters": {"waits": args.waits, "partitions": args.partitions,
                       "standby_settle_s": args.standby_settle,
                       "bootstrap": args.bootstrap, "topic_prefix": prefix},
        "figures": figures, "machine": machine(), "versions": versions(),
        "errors": errors, "worker_log_tails": tails, "topics_deleted": len(deleted),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({"figures": figures, "errors": errors}, indent=2))
    print(f"recovery_bench: wrote {out}")
    return 0 if not errors else 1


if __name__ == "__main__":
    sys.exit(main())
