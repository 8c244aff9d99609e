"""Park N waits on one real worker and measure it; write the figures to a JSON file.

Run: ``.venv/bin/python bench/park_bench.py [--waits 100000] [--reply-fraction 0.5]
[--deadline auto|PT20S] [--deadline-spread 0] [--partitions 8] [--seed 1]
[--out bench/results/park-<ts>.json] [--bootstrap 127.0.0.1:9092]``.
See bench/README.md for what each figure means.

One run, against the broker given (a real Kafka broker, ``scripts/kafka start``):

1. creates its own topics under a fresh prefix and a temporary topology with the
   ``park-bench`` definition of bench/waits (its deadline replaced by --deadline),
   and starts ONE ``xwait worker`` subprocess;
2. produces N StartWait records as fast as the producer goes and polls the
   worker's ``processed.requests`` counter until it reaches N (parks/s);
3. sends replies to a random ``--reply-fraction`` of the waits, spread evenly over
   the time before the first deadline; the other waits end by their deadline;
4. consumes the outcomes topic until every wait has an outcome (reply-to-outcome
   latency, deadline lateness, completed waits/s), sampling the worker's RSS;
5. stops the worker and, on the same broker, runs a raw confluent-kafka
   consume->produce loop over the same N request records (the baseline);
6. writes the JSON file, prints a summary and deletes its topics.

Every wait has a timeout; on one (or any failure) the file is still written,
with ``"complete": false``, and the script exits 1.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import random
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka import libversion as librdkafka_version
from confluent_kafka.admin import AdminClient, NewTopic

from streams import codec, topics
from streams.codec import RecordType
from streams.config import Settings
from streams.core.durations import parse_duration_ms
from streams.testing.workers import WorkerProcess, proc_status_kib

REPO = Path(__file__).resolve().parents[1]
BENCH_WAITS = Path(__file__).resolve().parent / "waits"
DEFINITION = "park-bench"
CHANNEL = "portal"
TIMER_TICK_S = 0.2
STATS_POLL_S = 0.1
RSS_SAMPLE_S = 0.5
MIB = 1024 * 1024


class BenchError(Exception):
    """A phase timed out or the worker failed; the run is written as incomplete."""


# -- small helpers ------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in 0..100); None when there are no values."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def rnd(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


def rate(count: int, seconds: float | None) -> float | None:
    if seconds is None or seconds <= 0 or count <= 0:
        return None
    return round(count / seconds, 1)


def machine() -> dict[str, Any]:
    mem_kib = None
    with contextlib.suppress(OSError, ValueError, IndexError), open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    return {
        "nproc": os.cpu_count(),
        "mem_total_mib": None if mem_kib is None else round(mem_kib / 1024),
        "loadavg_at_start": list(os.getloadavg()),
        "platform": platform.platform(),
        "cpu": platform.processor() or platform.machine(),
    }


def versions() -> dict[str, Any]:
    found: dict[str, Any] = {
        "python": platform.python_version(),
        "librdkafka": librdkafka_version()[0],
    }
    for dist in ("confluent-kafka", "xwait", "faust-streaming", "aiokafka", "rocksdict",
                 "fastavro"):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = None
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                              text=True, timeout=10, check=False).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=REPO, capture_output=True, text=True, timeout=10,
                               check=False).stdout.strip()
        found["git_commit"] = head or None
        found["git_dirty"] = bool(dirty)
    except (OSError, subprocess.SubprocessError):
        found["git_commit"] = None
    return found


def make_topology(folder: Path, deadline: str) -> Path:
    """topics.yaml of the repo plus bench/waits/*.yaml, park-bench's deadline replaced."""
    waits = folder / "waits"
    waits.mkdir(parents=True)
    shutil.copy(REPO / "topology" / "topics.yaml", folder / "topics.yaml")
    for src in sorted(BENCH_WAITS.glob("*.yaml")):
        doc = yaml.safe_load(src.read_text(encoding="utf-8"))
        if isinstance(doc, dict) and doc.get("name", src.stem) == DEFINITION:
            doc["deadline"] = deadline
        (waits / src.name).write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return folder


# -- the worker ---------------------------------------------------------------------------


def check_alive(worker: WorkerProcess) -> None:
    if worker.proc is not None and worker.proc.poll() is not None:
        raise BenchError(f"the worker exited with code {worker.proc.returncode}")


class RssSampler(threading.Thread):
    """Reads VmRSS of one pid every RSS_SAMPLE_S seconds until stopped."""

    def __init__(self, pid: int) -> None:
        super().__init__(name="rss-sampler", daemon=True)
        self.pid = pid
        self.samples: list[tuple[float, int]] = []  # (seconds since start, KiB)
        self._stop_event = threading.Event()
        self._t0 = time.monotonic()

    def run(self) -> None:
        while not self._stop_event.is_set():
            kib = proc_status_kib(self.pid, "VmRSS")
            if kib is not None:
                self.samples.append((time.monotonic() - self._t0, kib))
            self._stop_event.wait(RSS_SAMPLE_S)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(5)

    @property
    def peak_kib(self) -> int | None:
        return max((k for _, k in self.samples), default=None)


# -- watching outcomes ---------------------------------------------------------------------


@dataclass
class Seen:
    """Outcome records as consumed: first consumption time per wait key, raw value."""

    first: dict[str, tuple[float, bytes]] = field(default_factory=dict)
    duplicates: int = 0
    first_at: float | None = None
    last_at: float | None = None


class OutcomeWatch:
    """A read_committed consumer assigned to every outcomes partition from the start."""

    def __init__(self, settings: Settings) -> None:
        self.consumer = Consumer(settings.confluent(**{
            "group.id": f"park-bench-watch-{uuid.uuid4().hex}",
            "enable.auto.commit": False, "isolation.level": "read_committed",
            "auto.offset.reset": "earliest", "fetch.wait.max.ms": 10}))
        topic = settings.topic("outcomes")
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING)
                              for p in range(settings.partitions)])
        self.seen = Seen()

    def drain(self, timeout: float) -> int:
        """Consume what is there (waiting at most ``timeout`` s); stamp each on arrival."""
        got = 0
        for msg in self.consumer.consume(1000, timeout=max(timeout, 0.0)):
            now = time.monotonic()
            if msg.error() is not None:
                continue
            key = (msg.key() or b"").decode(errors="replace")
            value = msg.value() or b""
            if key in self.seen.first:
                self.seen.duplicates += 1
                continue
            self.seen.first[key] = (now, value)
            self.seen.first_at = now if self.seen.first_at is None else self.seen.first_at
            self.seen.last_at = now
            got += 1
        return got

    def close(self) -> None:
        with contextlib.suppress(KafkaException, RuntimeError):
            self.consumer.close()


# -- producing -----------------------------------------------------------------------------


class Sender:
    """A producer of input records the way users' services produce them (murmur2)."""

    def __init__(self, settings: Settings) -> None:
        self.producer = Producer(settings.confluent(**{
            "partitioner": "murmur2_random", "linger.ms": 5, "acks": "all",
            "enable.idempotence": True}))
        self.errors: list[str] = []

    def _delivered(self, err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            self.errors.append(str(err))

    def send(self, topic: str, key: str, value: bytes) -> None:
        while True:
            try:
                self.producer.produce(topic, key=key.encode(), value=value,
                                      on_delivery=self._delivered)
                return
            except BufferError:  # the local queue is full: let it drain
                self.producer.poll(0.05)

    def flush(self, timeout: float) -> None:
        remaining = self.producer.flush(timeout)
        if remaining:
            raise BenchError(f"{remaining} records not delivered within {timeout:.0f}s")
        if self.errors:
            raise BenchError(f"{len(self.errors)} records failed: {self.errors[0]}")


def check_broker(admin: AdminClient, bootstrap: str) -> None:
    """Fail with a hint unless the broker answers a metadata request."""
    try:
        admin.list_topics(timeout=10)
    except KafkaException as exc:
        raise BenchError(f"the broker at {bootstrap} did not answer a metadata "
                         "request; is it running (scripts/kafka start)?") from exc


def start_worker(settings: Settings, worker: WorkerProcess) -> RssSampler:
    """Create the run's topics, start its worker, sample its RSS, and wait until the
    worker owns every partition.  The sampler is the caller's to stop."""
    topics.create(settings, topics.load_specs(settings))
    worker.start(wait_owned=False)
    assert worker.pid is not None
    rss = RssSampler(worker.pid)
    rss.start()
    wait_for(lambda: len((worker.stats() or {}).get("ownedPartitions", []))
             == settings.partitions, 180, "the worker to own every partition", worker)
    return rss


def wait_for(check: Callable[[], bool], timeout: float, what: str, worker: WorkerProcess,
             watch: OutcomeWatch | None = None, interval: float = STATS_POLL_S) -> float:
    """Poll ``check`` until true; returns the monotonic time it became true."""
    deadline = time.monotonic() + timeout
    while True:
        check_alive(worker)
        if check():
            return time.monotonic()
        if time.monotonic() >= deadline:
            raise BenchError(f"timed out after {timeout:.0f}s waiting for {what}")
        if watch is not None:
            watch.drain(interval)
        else:
            time.sleep(interval)


# -- the baseline ---------------------------------------------------------------------------


def baseline(settings: Settings, admin: AdminClient, count: int, timeout: float
             ) -> dict[str, Any]:
    """Raw confluent-kafka consume -> produce of the request records to a scratch topic.

    A fresh consumer group subscribes to the requests topic (read from the
    beginning); every record's key and value are produced unchanged to
    ``<prefix>.baseline`` (same partition count, murmur2, acks=all). The rate is
    records / (last delivery confirmed - first record consumed).
    """
    scratch = settings.topic("baseline")
    futures = admin.create_topics([NewTopic(scratch, settings.partitions, 1)],
                                  operation_timeout=30)
    for future in futures.values():
        future.result(timeout=30)
    consumer = Consumer(settings.confluent(**{
        "group.id": f"{settings.app_id}-baseline", "auto.offset.reset": "earliest",
        "enable.auto.commit": True}))
    producer = Producer(settings.confluent(**{
        "partitioner": "murmur2_random", "linger.ms": 5, "acks": "all",
        "enable.idempotence": True}))
    consumer.subscribe([settings.topic("requests")])
    consumed = 0
    first: float | None = None
    end = time.monotonic() + timeout
    try:
        while consumed < count:
            if time.monotonic() > end:
                raise BenchError(f"baseline: consumed {consumed} of {count} records "
                                 f"in {timeout:.0f}s")
            for msg in consumer.consume(1000, timeout=0.5):
                if msg.error() is not None:
                    continue
                if first is None:
                    first = time.monotonic()
                while True:
                    try:
                        producer.produce(scratch, key=msg.key(), value=msg.value())
                        break
                    except BufferError:
                        producer.poll(0.05)
                producer.poll(0)
                consumed += 1
        remaining = producer.flush(max(end - time.monotonic(), 1.0))
        done = time.monotonic()
        if remaining:
            raise BenchError(f"baseline: {remaining} records not delivered")
    finally:
        with contextlib.suppress(KafkaException, RuntimeError):
            consumer.close()
    seconds = done - (first if first is not None else done)
    return {"records": consumed, "seconds": round(seconds, 3),
            "records_per_s": rate(consumed, seconds)}


# -- the run --------------------------------------------------------------------------------


@dataclass
class Run:
    args: argparse.Namespace
    settings: Settings
    deadline_iso: str
    deadline_ms: int
    keys: list[str] = field(default_factory=list)
    requested_at_ms: list[int] = field(default_factory=list)
    # key -> the wait's own deadline (ms) when --deadline-spread gives each one an override
    own_deadline_ms: dict[str, int] = field(default_factory=dict)
    rss_at_park_start_kib: int | None = None
    replied: dict[str, float] = field(default_factory=dict)  # key -> monotonic send time
    marks: dict[str, float] = field(default_factory=dict)  # phase -> monotonic time
    notes: list[str] = field(default_factory=list)
    reply_window_s: float | None = None
    replies_planned: int = 0
    baseline: dict[str, Any] | None = None
    final_stats: dict[str, Any] | None = None
    hwm_kib: int | None = None


def park(run: Run, worker: WorkerProcess, watch: OutcomeWatch, sender: Sender) -> None:
    n = run.args.waits
    topic = run.settings.topic("requests")
    spread_ms = round(run.args.deadline_spread * 1000)
    jitter = random.Random(run.args.seed + 1)
    before = worker.counter("processed.requests")
    run.marks["produce_start"] = time.monotonic()
    for _ in range(n):
        key = secrets.token_hex(16)
        now_ms = int(time.time() * 1000)
        record: dict[str, Any] = {"correlationKey": key, "definition": DEFINITION,
                                  "requestedAt": now_ms}
        if spread_ms:
            own = run.deadline_ms + jitter.randrange(spread_ms)
            record["deadline"] = f"PT{own // 1000}.{own % 1000:03d}S"
            run.own_deadline_ms[key] = own
        run.keys.append(key)
        run.requested_at_ms.append(now_ms)
        sender.send(topic, key, codec.encode(RecordType.START_WAIT, record))
        sender.producer.poll(0)
    sender.flush(120)
    run.marks["produce_end"] = time.monotonic()
    timeout = max(120.0, n / 100)
    run.marks["parked"] = wait_for(
        lambda: worker.counter("processed.requests") - before >= n, timeout,
        f"the worker to process {n} requests", worker, watch)


def reply(run: Run, worker: WorkerProcess, watch: OutcomeWatch, sender: Sender) -> None:
    """Replies to a random sample, spread evenly up to (first deadline - margin)."""
    chosen = random.Random(run.args.seed).sample(run.keys, round(len(run.keys)
                                                               * run.args.reply_fraction))
    if not chosen:
        return
    first_deadline_wall = min(run.requested_at_ms) / 1000 + run.deadline_ms / 1000
    margin = max(3.0, 0.25 * run.deadline_ms / 1000)
    window = first_deadline_wall - margin - time.time()
    if window < 1.0:
        run.notes.append(f"parking left only {window:.1f}s before the first deadline "
                         "(minus margin): replies were sent in one burst and some may "
                         "lose the race; use a longer --deadline")
        window = 0.0
    run.reply_window_s = round(window, 3)
    run.replies_planned = len(chosen)
    topic = run.settings.topic("replies")
    start = time.monotonic()
    run.marks["replies_start"] = start
    step = window / len(chosen)
    i = 0
    while i < len(chosen):
        now = time.monotonic()
        while i < len(chosen) and start + i * step <= now:
            key = chosen[i]
            value = codec.encode(RecordType.REPLY, {
                "correlationKey": key, "channel": CHANNEL, "responseData": "{}",
                "sentAt": int(time.time() * 1000)})
            run.replied[key] = time.monotonic()
            sender.send(topic, key, value)
            i += 1
        sender.producer.poll(0)
        if i < len(chosen):
            wait = start + i * step - time.monotonic()
            watch.drain(min(max(wait, 0.0), 0.05))
            check_alive(worker)
    sender.flush(60)
    run.marks["replies_end"] = time.monotonic()


def complete(run: Run, worker: WorkerProcess, watch: OutcomeWatch) -> None:
    n = run.args.waits
    last_deadline_wall = (max(run.requested_at_ms) / 1000 + run.deadline_ms / 1000
                          + run.args.deadline_spread)
    timeout = max(last_deadline_wall - time.time(), 0) + max(120.0, n / 100)
    run.marks["complete"] = wait_for(lambda: len(watch.seen.first) >= n, timeout,
                                     f"outcomes of all {n} waits", worker, watch,
                                     interval=0.2)


def figures(run: Run, watch: OutcomeWatch, rss: RssSampler | None) -> dict[str, Any]:
    n = run.args.waits
    m = run.marks
    latencies: list[float] = []
    lateness: list[float] = []
    kinds: dict[str, int] = {}
    reasons: dict[str, int] = {}
    replied_escalated = 0
    undecodable = 0
    received_at: list[float] = []
    escalated_at: list[float] = []
    for key, (consumed_at, value) in watch.seen.first.items():
        try:
            outcome = codec.decode(RecordType.OUTCOME, value)
        except codec.CodecError:
            undecodable += 1
            continue
        kind = str(outcome["outcome"])
        kinds[kind] = kinds.get(kind, 0) + 1
        reasons[str(outcome["reason"])] = reasons.get(str(outcome["reason"]), 0) + 1
        if kind == "RECEIVED":
            received_at.append(consumed_at)
            if key in run.replied:
                latencies.append((consumed_at - run.replied[key]) * 1000)
        elif kind == "ESCALATED":
            escalated_at.append(consumed_at)
            own = run.own_deadline_ms.get(key, run.deadline_ms)
            lateness.append(outcome["endedAt"] - (outcome["parkedAt"] + own))
            if key in run.replied:
                replied_escalated += 1

    def span(times: list[float]) -> float | None:
        return max(times) - min(times) if len(times) > 1 else None

    produce_s = m["produce_end"] - m["produce_start"] if "produce_end" in m else None
    park_s = m["parked"] - m["produce_start"] if "parked" in m else None
    parks = rate(n, park_s) if park_s is not None else None
    completion_s = (watch.seen.last_at - watch.seen.first_at
                    if watch.seen.first_at is not None and watch.seen.last_at is not None
                    else None)
    base = run.baseline or {}
    base_rate = base.get("records_per_s")
    hwm = run.hwm_kib
    peak = max(x for x in (hwm, rss.peak_kib if rss else None, 0) if x is not None)
    at_start = run.rss_at_park_start_kib
    growth = (round((peak - at_start) * 1024 / n) if peak and at_start else None)
    due_span_s = ((max(run.requested_at_ms) - min(run.requested_at_ms)) / 1000
                  + run.args.deadline_spread if run.requested_at_ms else None)
    return {
        "parks_per_s": parks,
        "completed_waits_per_s": rate(len(watch.seen.first), completion_s),
        "deadline_lateness_ms": {"p50": rnd(percentile(lateness, 50)),
                                 "p99": rnd(percentile(lateness, 99)),
                                 "max": rnd(max(lateness, default=None)),
                                 "count": len(lateness)},
        "reply_to_outcome_ms": {"p50": rnd(percentile(latencies, 50)),
                                "p99": rnd(percentile(latencies, 99)),
                                "max": rnd(max(latencies, default=None)),
                                "count": len(latencies)},
        "worker_peak_rss_mib": round(peak / 1024, 1) if peak else None,
        "baseline_records_per_s": base_rate,
        "parks_to_baseline_ratio": (round(parks / base_rate, 4)
                                    if parks and base_rate else None),
        "details": {
            "produce_per_s": rate(n, produce_s),
            "produce_seconds": rnd(produce_s, 3),
            "park_seconds": rnd(park_s, 3),
            "completion_seconds": rnd(completion_s, 3),
            "received_per_s": rate(len(received_at), span(received_at)),
            "escalated_per_s": rate(len(escalated_at), span(escalated_at)),
            "replies_sent": len(run.replied),
            "reply_window_s": run.reply_window_s,
            "reply_send_rate_per_s": rate(run.replies_planned, run.reply_window_s),
            "replied_waits_that_escalated": replied_escalated,
            "outcomes": len(watch.seen.first),
            "outcomes_by_kind": kinds,
            "outcomes_by_reason": reasons,
            "duplicate_outcomes": watch.seen.duplicates,
            "undecodable_outcomes": undecodable,
            "rss_peak_sampled_mib": (round(rss.peak_kib / 1024, 1)
                                     if rss and rss.peak_kib else None),
            "rss_vmhwm_mib": round(hwm / 1024, 1) if hwm else None,
            "rss_at_park_start_mib": round(at_start / 1024, 1) if at_start else None,
            "rss_growth_bytes_per_wait": growth,
            "rss_samples": len(rss.samples) if rss else 0,
            "deadlines_fell_due_within_s": rnd(due_span_s, 3),
            "rss_last_sampled_mib": (round(rss.samples[-1][1] / 1024, 1)
                                     if rss and rss.samples else None),
            "baseline": run.baseline,
        },
    }


def delete_topics(admin: AdminClient, settings: Settings) -> list[str]:
    """Every topic and group of this run: names start with its unique prefix."""
    prefix = settings.topic_prefix
    try:
        names = [t for t in admin.list_topics(timeout=15).topics
                 if t.startswith((prefix + ".", settings.app_id + "-"))]
    except KafkaException:
        return []
    if names:
        for future in admin.delete_topics(names, operation_timeout=30).values():
            with contextlib.suppress(KafkaException):
                future.result(timeout=30)
    # A worker killed mid-run stays a group member until its session times out,
    # and a group with members cannot be deleted: retry for a while.
    pending: list[str] = []
    with contextlib.suppress(KafkaException, ValueError, TypeError):
        groups = admin.list_consumer_groups().result(timeout=15)
        pending = [g.group_id for g in groups.valid if g.group_id.startswith(prefix)]
    give_up = time.monotonic() + settings.session_timeout + 15
    while pending and time.monotonic() < give_up:
        failed = []
        for group, future in admin.delete_consumer_groups(pending,
                                                          request_timeout=15).items():
            try:
                future.result(timeout=15)
            except KafkaException:
                failed.append(group)
        pending = failed
        if pending:
            time.sleep(2)
    return names


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Park N waits on one xwait worker; write parks/s, completed waits/s, "
                    "deadline lateness, reply-to-outcome latency, peak RSS and a raw "
                    "consume->produce baseline to a JSON file.")
    p.add_argument("--waits", type=int, default=100_000, help="waits to park (default 100000)")
    p.add_argument("--reply-fraction", type=float, default=0.5,
                   help="share of waits that get a reply; the rest end by deadline (0.5)")
    p.add_argument("--deadline", default="auto",
                   help="ISO 8601 deadline of every wait, e.g. PT20S; 'auto' (default) is "
                        "max(20 s, waits / 250 s) so that parking and replying fit before it")
    p.add_argument("--deadline-spread", type=float, default=0.0,
                   help="seconds; when above 0 each StartWait carries its own deadline "
                        "(--deadline plus a uniform 0..spread), so deadlines do not all "
                        "fall due within the few seconds the requests took to produce (0)")
    p.add_argument("--partitions", type=int, default=8, help="partitions of every topic (8)")
    p.add_argument("--out", type=Path, default=None,
                   help="JSON file (default bench/results/park-<timestamp>.json)")
    p.add_argument("--bootstrap", default=os.environ.get("XWAIT_BOOTSTRAP", "127.0.0.1:9092"),
                   help="Kafka bootstrap servers ($XWAIT_BOOTSTRAP or 127.0.0.1:9092)")
    p.add_argument("--seed", type=int, default=1, help="seed of the choice of replied waits")
    args = p.parse_args(argv)
    if args.waits < 1:
        p.error("--waits: expected a number above zero")
    if not 0.0 <= args.reply_fraction <= 1.0:
        p.error("--reply-fraction: expected a number from 0 to 1")
    if args.deadline_spread < 0:
        p.error("--deadline-spread: expected 0 or more seconds")
    if args.partitions < 1:
        p.error("--partitions: expected a number above zero")
    if args.deadline == "auto":
        args.deadline = f"PT{max(20, math.ceil(args.waits / 250))}S"
    try:
        parse_duration_ms(args.deadline)
    except ValueError as exc:
        p.error(f"--deadline: {exc}")
    return args


def summary(result: dict[str, Any]) -> str:
    f = result["figures"]
    d = f["details"]
    lines = [
        f"park_bench: {result['parameters']['waits']} waits, deadline "
        f"{result['parameters']['deadline']}, reply fraction "
        f"{result['parameters']['reply_fraction']}, complete={result['complete']}",
        f"  parks/s                   {f['parks_per_s']}  (producer {d['produce_per_s']}/s)",
        f"  completed waits/s         {f['completed_waits_per_s']}  (received "
        f"{d['received_per_s']}/s, escalated {d['escalated_per_s']}/s)",
        f"  deadline lateness ms      p50 {f['deadline_lateness_ms']['p50']}  "
        f"p99 {f['deadline_lateness_ms']['p99']}  (n={f['deadline_lateness_ms']['count']}, "
        f"due within {d['deadlines_fell_due_within_s']}s)",
        f"  reply->outcome ms         p50 {f['reply_to_outcome_ms']['p50']}  "
        f"p99 {f['reply_to_outcome_ms']['p99']}  (n={f['reply_to_outcome_ms']['count']}, "
        f"sent at {d['reply_send_rate_per_s']}/s)",
        f"  worker peak RSS MiB       {f['worker_peak_rss_mib']}  (at park start "
        f"{d['rss_at_park_start_mib']}, {d['rss_growth_bytes_per_wait']} B/wait)",
        f"  baseline records/s        {f['baseline_records_per_s']}  "
        f"(parks/s / baseline = {f['parks_to_baseline_ratio']})",
    ]
    for note in result["notes"]:
        lines.append(f"  note: {note}")
    for err in result["errors"]:
        lines.append(f"  ERROR: {err}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = datetime.now(UTC)
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    out: Path = args.out or REPO / "bench" / "results" / f"park-{stamp}.json"
    prefix = f"parkbench-{secrets.token_hex(4)}"
    folder = Path(tempfile.mkdtemp(prefix="park-bench-"))
    deadline_ms = parse_duration_ms(args.deadline)
    settings = Settings(bootstrap=args.bootstrap, topic_prefix=prefix,
                        app_id=f"{prefix}-processor", partitions=args.partitions,
                        topology=make_topology(folder / "topology", args.deadline),
                        data_dir=folder / "data", timer_tick=TIMER_TICK_S)
    run = Run(args, settings, args.deadline, deadline_ms)
    mach = machine()
    errors: list[str] = []
    worker = WorkerProcess(settings, folder, "park", log_level="warning")
    admin = AdminClient(settings.confluent())
    rss: RssSampler | None = None
    watch: OutcomeWatch | None = None
    log_tail: list[str] = []
    deleted: list[str] = []
    reachable = False
    try:
        check_broker(admin, args.bootstrap)
        reachable = True
        rss = start_worker(settings, worker)
        watch = OutcomeWatch(settings)
        sender = Sender(settings)
        run.rss_at_park_start_kib = worker.rss_kib()
        print(f"park_bench: worker up (pid {worker.pid}); parking {args.waits} waits, "
              f"deadline {args.deadline}", flush=True)
        park(run, worker, watch, sender)
        print(f"park_bench: parked in {run.marks['parked'] - run.marks['produce_start']:.1f}s;"
              " replying", flush=True)
        reply(run, worker, watch, sender)
        print("park_bench: waiting for every outcome", flush=True)
        complete(run, worker, watch)
        run.final_stats = worker.stats()
        run.hwm_kib = worker.peak_rss_kib()
        rss.stop()
        worker.stop()
        print("park_bench: baseline consume->produce loop", flush=True)
        run.baseline = baseline(settings, admin, args.waits, max(120.0, args.waits / 500))
    except Exception as exc:  # any failure still writes an incomplete result
        errors.append(f"{type(exc).__name__}: {exc}")
    except KeyboardInterrupt:
        errors.append("interrupted")
    finally:
        if run.hwm_kib is None and worker.running:
            run.hwm_kib = worker.peak_rss_kib()
        if run.final_stats is None and worker.running:
            run.final_stats = worker.stats()
        if rss is not None:
            rss.stop()
        worker.stop()
        if errors:
            log_tail = worker.log_tail(30).splitlines()
        if watch is not None:
            with contextlib.suppress(KafkaException):
                watch.drain(0)
            watch.close()
        deleted = delete_topics(admin, settings) if reachable else []
        shutil.rmtree(folder, ignore_errors=True)

    complete_run = not errors and watch is not None and len(watch.seen.first) >= args.waits
    result: dict[str, Any] = {
        "benchmark": "park_bench",
        "complete": complete_run,
        "timestamp": started.isoformat(timespec="seconds"),
        "duration_s": round((datetime.now(UTC) - started).total_seconds(), 1),
        "parameters": {
            "waits": args.waits, "reply_fraction": args.reply_fraction,
            "deadline": args.deadline, "deadline_spread_s": args.deadline_spread,
            "partitions": args.partitions,
            "bootstrap": args.bootstrap, "topic_prefix": prefix, "seed": args.seed,
            "workers": 1,
            "guarantee": settings.guarantee.value, "timer_tick_s": TIMER_TICK_S,
            "definition": DEFINITION, "parks_measured_by": "stats counter processed.requests",
        },
        "figures": figures(run, watch, rss) if watch is not None else None,
        "machine": mach,
        "versions": versions(),
        "worker_stats_at_end": run.final_stats,
        "notes": run.notes,
        "errors": errors,
        "worker_log_tail": log_tail,
        "topics_deleted": len(deleted),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if result["figures"] is not None:
        print(summary(result))
    else:
        print("park_bench: no figures; " + "; ".join(errors))
    print(f"park_bench: wrote {out}")
    return 0 if complete_run else 1


if __name__ == "__main__":
    sys.exit(main())
