"""An empty-disk restore of millions of parked waits, without parking them one by one.

Run: ``.venv/bin/python bench/restore_bench.py --rows 10000000 [--template 20000]
[--partitions 8] [--out bench/results/restore-<ts>.json] [--bootstrap 127.0.0.1:9092]``.

`scale_bench.py` parks every wait through a worker (about 2,300 a second
here), so ten million cost over an hour before the restore is measured.  A
restore reads the changelog, not the inputs, so this bench fills the
changelog directly with rows the worker itself wrote:

1. creates its own topics, starts one ``xwait worker`` and parks `--template`
   waits through it (the shipped definitions, 2% in review, 2% suspended,
   as `scale_bench` does), then stops it;
2. reads the changelog it wrote (the latest row of each key) and appends
   copies of those rows under new keys, each in the partition its key hashes
   to, until the changelog holds `--rows` waits (the key inside the row is
   rewritten too, so every copy is a row the worker could have written);
3. starts a worker on an empty data folder and records the seconds until it
   owns every partition with its stream time moving (ready), and until its
   census counts every wait; rows/s = rows / ready seconds; writes the JSON,
   then deletes its topics.

What it does not measure: parking rates, RSS while parking, API latency at
scale (`scale_bench.py` measures those).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition

from streams.config import Settings
from streams.partitioning import partition_for
from streams.processor.state import OWN_PREFIX
from streams.testing.harness import BenchError
from streams.testing.harness.producing import produce
from streams.testing.harness.results import default_out, envelope
from streams.testing.harness.scratch import Scratch
from streams.testing.harness.worker import stoppable
from streams.testing.scale.phases import (
    Run,
    ScalePlan,
    big_batches,
    du_bytes,
    memory,
    park_segment,
    restore,
    say,
)
from streams.testing.scale.run import begin
from streams.testing.scale.waits import scale_topology

# Records produced between two polls of the producer's delivery reports.
POLL_EVERY = 10_000


def read_changelog(settings: Settings) -> dict[bytes, tuple[int, bytes]]:
    """key -> (partition, value) of the latest row of every wait in the changelog."""
    topic = f"{settings.app_id}-waits-changelog"
    consumer = Consumer(settings.confluent(**{
        "group.id": f"{settings.app_id}-restore-bench", "enable.auto.commit": False,
        "enable.partition.eof": True}))
    rows: dict[bytes, tuple[int, bytes]] = {}
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(settings.partitions)}
        left = {p for p, end in ends.items() if end > 0}
        consumer.assign([TopicPartition(topic, p, 0) for p in left])
        deadline = time.monotonic() + 300
        while left:
            if time.monotonic() > deadline:
                raise BenchError(f"the changelog was not read within 300 s: {sorted(left)}")
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            err, partition, offset = msg.error(), msg.partition(), msg.offset()
            assert partition is not None and offset is not None
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:  # noqa: SLF001
                    left.discard(partition)
                    continue
                raise BenchError(f"reading the changelog: {err}")
            key, value = msg.key(), msg.value()
            if key is None or key.startswith(OWN_PREFIX):
                continue  # the worker's own keys (positions, ids) stay as they are
            if value is None:
                rows.pop(key, None)  # a tombstone
            else:
                rows[key] = (partition, value)
            if offset + 1 >= ends[partition]:
                left.discard(partition)
    finally:
        consumer.close()
    return rows


def copy_key(key: bytes, copy: int) -> bytes:
    """A new key of the same length as `key` (so a copied row keeps its size)."""
    digest = hashlib.blake2b(b"%d:" % copy + key, digest_size=len(key)).hexdigest()
    return digest[:len(key)].encode()


def fill(run: Run, template: dict[bytes, tuple[int, bytes]], rows: int) -> dict[str, Any]:
    """Append copies of the template's rows to the changelog until it holds `rows` waits."""
    settings = run.settings
    topic = f"{settings.app_id}-waits-changelog"
    producer = run.sender.producer
    started = time.monotonic()
    written = 0
    copy = 0
    need = rows - len(template)
    while written < need:
        copy += 1
        for key, (_, value) in template.items():
            if written >= need:
                break
            new = copy_key(key, copy)
            produce(producer, topic, new, value.replace(key, new),
                    partition=partition_for(new, settings.partitions),
                    on_delivery=run.sender.delivered)
            written += 1
            if written % POLL_EVERY == 0:
                producer.poll(0)
        if copy % 50 == 0 or written >= need:
            say(f"copy {copy}: {len(template) + written} rows in the changelog")
    run.sender.flush(300)
    seconds = time.monotonic() - started
    return {"copied": written, "copies": copy, "seconds": round(seconds, 1),
            "records_per_s": round(written / max(seconds, 1e-6), 1)}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="restore_bench", description=(__doc__ or "").splitlines()[0])
    p.add_argument("--rows", type=int, default=10_000_000, help="waits to restore (10000000)")
    p.add_argument("--template", type=int, default=20_000,
                   help="waits parked through the worker, whose rows are copied (20000)")
    p.add_argument("--partitions", type=int, default=8, help="partitions of every topic (8)")
    p.add_argument("--bootstrap", default=os.environ.get("XWAIT_BOOTSTRAP", "127.0.0.1:9092"))
    p.add_argument("--ready-timeout", type=float, default=3600.0,
                   help="seconds a restore may take before the bench gives up (3600)")
    p.add_argument("--workdir", type=Path, default=None, help="where the worker's data goes")
    p.add_argument("--keep", action="store_true", help="keep the workers' data and logs")
    p.add_argument("--out", type=Path, default=None,
                   help="result file (bench/results/restore-<timestamp>.json)")
    args = p.parse_args(argv)
    if args.rows < args.template:
        p.error("--rows must be at least --template")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = datetime.now(UTC)
    out: Path = args.out or default_out("restore", started)
    # The scale bench's parking and restore, with its defaults (no sample, no CLI timing).
    plan = ScalePlan(checkpoints=(args.template,), partitions=args.partitions,
                     bootstrap=args.bootstrap, ready_timeout=args.ready_timeout, sample=0,
                     cli=False)
    with stoppable(), Scratch("restore_bench", args.bootstrap, args.partitions,
                              workdir=args.workdir, keep=args.keep, tail_lines=30) as scratch:
        settings = scratch.settings
        result = envelope(
            "restore_bench", started, complete=False,
            parameters={"rows": args.rows, "template": args.template,
                        "partitions": args.partitions, "bootstrap": args.bootstrap,
                        "topic_prefix": scratch.prefix, "guarantee": settings.guarantee.value},
            topology_changes=scale_topology(scratch.topology, plan.timer_floor),
            errors=scratch.errors)
        run = Run(plan, scratch, out, result, big_batches(settings))
        try:
            begin(run)
            say(f"parking {args.template} waits through the worker")
            result["template"] = park_segment(run, args.template)
            run.worker.stop(120)
            template = read_changelog(settings)
            if len(template) != run.expected_total():
                raise BenchError(f"the changelog holds {len(template)} waits; the worker "
                                 f"counted {run.expected_total()}")
            result["template"]["changelog_rows"] = len(template)
            result["template"]["row_bytes_mean"] = round(
                sum(len(v) for _, v in template.values()) / max(len(template), 1), 1)
            say(f"copying {len(template)} rows up to {args.rows}")
            result["fill"] = fill(run, template, args.rows)
            run.expected = Counter({"copied": args.rows})
            result["loadavg_before_restore"] = list(os.getloadavg())
            say(f"restoring {args.rows} waits on an empty disk")
            result["restore"] = restore(run)
            result["restore"]["disk_bytes_per_wait"] = round(
                du_bytes(run.worker.data_dir) / args.rows, 1)
            result["restore"]["memory"] = memory(run.worker)
            result["loadavg_after_restore"] = list(os.getloadavg())
            result["complete"] = True
        finally:
            run.sender.producer.flush(10)
    run.close()
    restored = result.get("restore") or {}
    say(f"{args.rows} waits: ready in {restored.get('ready_s')} s "
        f"({restored.get('rows_per_s')} rows/s), every wait counted after "
        f"{restored.get('counts_every_wait_s')} s; wrote {out}")
    return 0 if result["complete"] else 1


if __name__ == "__main__":
    sys.exit(main())
