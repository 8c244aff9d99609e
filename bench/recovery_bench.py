"""How long a worker takes to get going again with N parked waits; write it to a JSON file.

Run: ``.venv/bin/python bench/recovery_bench.py [--waits 100000] [--partitions 8]
[--out bench/results/recovery-<ts>.json] [--bootstrap 127.0.0.1:9092]``.

A worker that takes over partitions (a restart, a failover, a rebalance)
opens their databases, where the timer index and the wait census are kept
beside the rows, and a worker on a new machine first restores them from the
changelog.  One run, against the broker given:

1. creates its own topics and starts one ``xwait worker``;
2. parks N waits whose deadline is an hour away and waits until all are parked;
3. stops the worker (SIGTERM), sends replies to `--replies` of the parked waits
   while it is down, and starts it again on the same data folder: **restart**
   (RocksDB is on disk), with the seconds from the process's start to the first
   of those waits' outcomes (**first decision**) and to the last;
4. stops it and starts a worker on an empty data folder: **failover** (the
   table is restored from its changelog topic first);
5. starts a second worker beside that one, waits until the partitions are
   shared and the second has had time to fill its standby copies (faust's
   `table_standby_replicas`, 1 by default), then stops the first (SIGTERM, so
   the group moves its partitions at once instead of after the session
   timeout): **standby takeover**, the seconds until the second owns every
   partition and counts all N waits;
6. for each start, records the seconds until the worker owns every partition
   and counts all N waits as parked, and what the worker logged of its
   takeovers (partitions, changelog records restored, seconds: `takeover`);
   writes the JSON and deletes its topics.
"""

from __future__ import annotations

import argparse
import json
import re
import secrets
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from streams import codec, topics
from streams.codec import RecordType
from streams.config import Settings
from streams.testing.harness.producing import Sender
from streams.testing.harness.results import default_out, envelope, write_json
from streams.testing.harness.scratch import Scratch
from streams.testing.harness.worker import owned, wait_for
from streams.testing.park import CHANNEL, DEFINITION, OutcomeWatch, park_topology
from streams.testing.workers import WorkerProcess

# The worker's line for the partitions it took over (streams.processor.takeover).
TAKEN_OVER = re.compile(r"partitions taken over partitions=\[([0-9, ]*)\] "
                        r"restored_records=(\d+) seconds=([0-9.]+)")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="recovery_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--waits", type=int, default=100_000, help="waits to park")
    parser.add_argument("--partitions", type=int, default=8, help="partitions of every topic")
    parser.add_argument("--out", type=Path, help="result file (default bench/results/...)")
    parser.add_argument("--bootstrap", default=Settings().bootstrap, help="Kafka bootstrap")
    parser.add_argument("--replies", type=int, default=100,
                        help="parked waits answered while the worker is down, before the restart")
    parser.add_argument("--standby-settle", type=float, default=30.0,
                        help="seconds the second worker gets to fill its standby copies")
    args = parser.parse_args(argv)
    if args.waits < 1 or args.partitions < 1:
        parser.error("--waits and --partitions must be above zero")
    if not 1 <= args.replies <= args.waits:
        parser.error("--replies must be between 1 and --waits")
    return args


def takeovers(worker: WorkerProcess, since: int = 0) -> list[dict[str, Any]]:
    """The takeover log lines of this worker after byte `since` of its log, oldest first."""
    text = (worker.log_path.read_bytes()[since:].decode(errors="replace")
            if worker.log_path.exists() else "")
    return [{"partitions": [int(p) for p in m.group(1).split(",") if p.strip()],
             "restored_records": int(m.group(2)), "seconds": float(m.group(3))}
            for m in TAKEN_OVER.finditer(text)]


def taken_over(worker: WorkerProcess, since: int) -> dict[str, Any] | None:
    """What the worker said of its takeovers after byte `since` of its log: the partitions,
    the changelog records it restored and the longest takeover's seconds."""
    found = takeovers(worker, since)
    if not found:
        return None
    return {"partitions": len({p for t in found for p in t["partitions"]}),
            "restored_records": sum(t["restored_records"] for t in found),
            "seconds": max(t["seconds"] for t in found), "lines": len(found)}


def ready(worker: WorkerProcess, settings: Settings, waits: int, since: float, what: str
          ) -> dict[str, Any]:
    """Seconds from `since` until `worker` owns everything and counts every wait parked."""
    owns = wait_for(lambda: owned(worker.stats()) == settings.partitions, 600, what, worker)
    counts = wait_for(lambda: (worker.stats() or {}).get("waits", {}).get("parked", 0)
                      >= waits, 600, f"the worker to count {waits} parked waits", worker)
    return {"owns_every_partition_s": round(owns - since, 2),
            "counts_every_wait_s": round(counts - since, 2)}


def timed_start(worker: WorkerProcess, settings: Settings, waits: int) -> dict[str, Any]:
    """Start `worker`; seconds until it owns everything and counts every wait parked."""
    since = worker.log_path.stat().st_size if worker.log_path.exists() else 0
    worker.start(wait_owned=False)
    got = ready(worker, settings, waits, worker.started_at or time.monotonic(),
                "the worker to own every partition")
    wait_for(lambda: (taken_over(worker, since) or {}).get("partitions") == settings.partitions,
             30, "the takeover's log lines", worker)
    return {**got, "takeover": taken_over(worker, since),
            "rss_mib": round((worker.rss_kib() or 0) / 1024, 1)}


def park(settings: Settings, worker: WorkerProcess, waits: int, keys: list[str]) -> float:
    """Park `waits` waits through `worker`, their keys appended to `keys`; the seconds it took."""
    sender = Sender(settings)
    topic = settings.topic("requests")
    t0 = time.monotonic()
    for _ in range(waits):
        key = secrets.token_hex(16)
        keys.append(key)
        sender.send(topic, key, codec.encode(RecordType.START_WAIT, {
            "correlationKey": key, "definition": DEFINITION,
            "requestedAt": int(time.time() * 1000)}))
        sender.producer.poll(0)
    sender.flush(120)
    wait_for(lambda: worker.counter("processed.requests") >= waits,
             max(120.0, waits / 100), f"{waits} waits to park", worker)
    return round(time.monotonic() - t0, 1)


def answer(settings: Settings, keys: list[str]) -> None:
    """A reply to each of `keys` (parked waits), acknowledged by the broker."""
    sender = Sender(settings)
    for key in keys:
        sender.send(settings.topic("replies"), key, codec.encode(RecordType.REPLY, {
            "correlationKey": key, "channel": CHANNEL, "responseData": "{}",
            "sentAt": int(time.time() * 1000)}))
    sender.flush(60)


class FirstDecisions(threading.Thread):
    """Drains an outcome watch beside a worker's start, so that each of the `answered`
    waits' outcomes is stamped when it arrives, not when the bench gets round to it."""

    def __init__(self, watch: OutcomeWatch, answered: int) -> None:
        super().__init__(name="first-decisions", daemon=True)
        self.watch, self.answered = watch, answered
        self.stopping = threading.Event()

    def run(self) -> None:
        while len(self.watch.seen.first) < self.answered and not self.stopping.is_set():
            self.watch.drain(0.05)

    def figures(self, worker: WorkerProcess) -> dict[str, Any]:
        """Seconds from the worker's process start to the first and the last outcome."""
        wait_for(lambda: not self.is_alive(), 600,
                 f"outcomes of the {self.answered} answered waits", worker)
        start = worker.started_at or 0.0
        seen = self.watch.seen
        return {"first_decision_s": round((seen.first_at or start) - start, 2),
                "last_of_answered_s": round((seen.last_at or start) - start, 2),
                "answered": self.answered}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = datetime.now(UTC)
    out: Path = args.out or default_out("recovery", started)
    figures: dict[str, Any] = {}
    with Scratch("recovery_bench", args.bootstrap, args.partitions) as run:
        settings = run.settings
        park_topology(run.topology, "PT1H")
        first, fresh, second = run.worker("first"), run.worker("fresh"), run.worker("second")
        run.check_broker()
        topics.create(settings, topics.load_specs(settings))
        figures["first_start"] = timed_start(first, settings, 0)
        keys: list[str] = []
        figures["parked_in_s"] = park(settings, first, args.waits, keys)
        print(f"recovery_bench: {args.waits} waits parked in {figures['parked_in_s']}s; "
              f"{args.replies} answered while it is down; restarting on the same data",
              flush=True)
        first.stop()
        answered = keys[:: max(1, len(keys) // args.replies)][: args.replies]
        answer(settings, answered)
        parked = args.waits - len(answered)  # what every later start must count
        watch = OutcomeWatch(settings)
        decisions = FirstDecisions(watch, len(answered))
        try:
            watch.drain(1.0)  # assigned, and nothing decided while the worker was down
            decisions.start()
            figures["restart"] = timed_start(first, settings, parked)
            figures["restart"].update(decisions.figures(first))
        finally:
            decisions.stopping.set()
            decisions.join(5)
            watch.close()
        first.stop()
        print("recovery_bench: starting a worker on an empty data folder", flush=True)
        figures["failover"] = timed_start(fresh, settings, parked)
        print("recovery_bench: a second worker joins; then the first stops", flush=True)
        second.start(wait_owned=False)
        wait_for(lambda: bool((second.stats() or {}).get("ownedPartitions")), 600,
                 "the second worker to get partitions", second)
        time.sleep(args.standby_settle)  # standbys read the changelog in the background
        figures["standby_settle_s"] = args.standby_settle
        since = second.log_path.stat().st_size
        stopped = time.monotonic()
        fresh.stop()
        taken = ready(second, settings, parked, stopped, "the takeover")
        figures["standby_takeover"] = {**taken, "takeover": taken_over(second, since)}
    result = envelope(
        "recovery_bench", started, complete=not run.errors,
        parameters={"waits": args.waits, "partitions": args.partitions, "replies": args.replies,
                    "standby_settle_s": args.standby_settle,
                    "bootstrap": args.bootstrap, "topic_prefix": run.prefix},
        figures=figures, errors=run.errors,
        worker_log_tails={f"worker-{name}.log": tail for name, tail in run.tails.items()},
        topics_deleted=run.topics_deleted)
    write_json(out, result)
    print(json.dumps({"figures": figures, "errors": run.errors}, indent=2))
    print(f"recovery_bench: wrote {out}")
    return 0 if not run.errors else 1


if __name__ == "__main__":
    sys.exit(main())
