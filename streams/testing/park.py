"""Park N waits on one real worker and measure it: bench/park_bench.py's run.

One run, against the broker given (a real Kafka broker, ``scripts/kafka start``):

1. creates its own topics under a fresh prefix and a temporary topology with the
   ``park-bench`` definition of bench/waits (its deadline replaced by the plan's),
   and starts ONE ``xwait worker`` subprocess;
2. produces N StartWait records as fast as the producer goes and polls the
   worker's ``processed.requests`` counter until it reaches N (parks/s);
3. sends replies to a random share of the waits, spread evenly over the time
   before the first deadline; the other waits end by their deadline;
4. consumes the outcomes topic until every wait has an outcome (reply-to-outcome
   latency, deadline lateness, completed waits/s), sampling the worker's RSS;
5. stops the worker and, on the same broker, runs a raw confluent-kafka
   consume->produce loop over the same N request records (the baseline);
6. deletes its topics.  Every wait has a timeout; on one (or any failure) the
   result is still complete in its form, with ``"complete": false``.
"""

from __future__ import annotations

import contextlib
import random
import secrets
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from streams import codec
from streams.codec import RecordType
from streams.config import Settings
from streams.core.durations import parse_duration_ms
from streams.testing.harness import BenchError
from streams.testing.harness.figures import rate, rnd, summary
from streams.testing.harness.kafka import close, key_text, reader
from streams.testing.harness.producing import Sender, produce
from streams.testing.harness.results import envelope
from streams.testing.harness.scratch import Scratch
from streams.testing.harness.topology import BENCH_WAITS, make_topology
from streams.testing.harness.worker import RssSampler, check_alive, mib, start_worker, wait_for
from streams.testing.workers import WorkerProcess

DEFINITION = "park-bench"
CHANNEL = "portal"
TIMER_TICK_S = 0.2


@dataclass(frozen=True)
class ParkPlan:
    """What one run does (bench/park_bench.py's options)."""

    waits: int = 100_000
    reply_fraction: float = 0.5
    deadline: str = "PT400S"  # every wait's (ISO 8601)
    deadline_spread: float = 0.0  # s: each wait its own deadline, up to this much later
    partitions: int = 8
    seed: int = 1
    bootstrap: str = "127.0.0.1:9092"


def park_topology(folder: Path, deadline: str) -> list[str]:
    """topics.yaml of the repo plus bench/waits/*.yaml, park-bench's deadline replaced."""

    def replace(doc: dict[str, Any], name: str) -> list[str]:
        if name == DEFINITION:
            doc["deadline"] = deadline
        return []

    return make_topology(folder, sorted(BENCH_WAITS.glob("*.yaml")), replace)


@dataclass
class Seen:
    """Outcome records as consumed: first consumption time per wait key, raw value."""

    first: dict[str, tuple[float, bytes]] = field(default_factory=dict)
    duplicates: int = 0
    first_at: float | None = None
    last_at: float | None = None


class OutcomeWatch:
    """A read_committed consumer of every outcomes partition from the start."""

    def __init__(self, settings: Settings) -> None:
        self.consumer = reader(settings, [settings.topic("outcomes")], "park-bench-watch",
                               **{"fetch.wait.max.ms": 10})
        self.seen = Seen()

    def drain(self, timeout: float) -> int:
        """Consume what is there (waiting at most ``timeout`` s); stamp each on arrival."""
        got = 0
        for msg in self.consumer.consume(1000, timeout=max(timeout, 0.0)):
            now = time.monotonic()
            if msg.error() is not None:
                continue
            key = key_text(msg)
            if key in self.seen.first:
                self.seen.duplicates += 1
                continue
            self.seen.first[key] = (now, msg.value() or b"")
            self.seen.first_at = now if self.seen.first_at is None else self.seen.first_at
            self.seen.last_at = now
            got += 1
        return got

    def close(self) -> None:
        close(self.consumer)


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
                produce(producer, scratch, msg.key(), msg.value())
                producer.poll(0)
                consumed += 1
        remaining = producer.flush(max(end - time.monotonic(), 1.0))
        done = time.monotonic()
        if remaining:
            raise BenchError(f"baseline: {remaining} records not delivered")
    finally:
        close(consumer)
    seconds = done - (first if first is not None else done)
    return {"records": consumed, "seconds": round(seconds, 3),
            "records_per_s": rate(consumed, seconds)}


@dataclass
class Run:
    plan: ParkPlan
    settings: Settings
    deadline_ms: int
    keys: list[str] = field(default_factory=list)
    requested_at_ms: list[int] = field(default_factory=list)
    # key -> the wait's own deadline (ms) when deadline_spread gives each one an override
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
    n = run.plan.waits
    topic = run.settings.topic("requests")
    spread_ms = round(run.plan.deadline_spread * 1000)
    jitter = random.Random(run.plan.seed + 1)  # noqa: S311 - a reproducible load
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
    run.marks["parked"] = wait_for(
        lambda: worker.counter("processed.requests") - before >= n, max(120.0, n / 100),
        f"the worker to process {n} requests", worker, watch.drain)


def reply(run: Run, worker: WorkerProcess, watch: OutcomeWatch, sender: Sender) -> None:
    """Replies to a random sample, spread evenly up to (first deadline - margin)."""
    chosen = random.Random(run.plan.seed).sample(  # noqa: S311 - a reproducible load
        run.keys, round(len(run.keys) * run.plan.reply_fraction))
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
    n = run.plan.waits
    last_deadline_wall = (max(run.requested_at_ms) / 1000 + run.deadline_ms / 1000
                          + run.plan.deadline_spread)
    timeout = max(last_deadline_wall - time.time(), 0) + max(120.0, n / 100)
    run.marks["complete"] = wait_for(lambda: len(watch.seen.first) >= n, timeout,
                                     f"outcomes of all {n} waits", worker, watch.drain,
                                     interval=0.2)


def _span(times: list[float]) -> float | None:
    return max(times) - min(times) if len(times) > 1 else None


def figures(run: Run, watch: OutcomeWatch, rss: RssSampler | None) -> dict[str, Any]:
    n = run.plan.waits
    m = run.marks
    latencies: list[float] = []
    lateness: list[float] = []
    kinds: dict[str, int] = {}
    reasons: dict[str, int] = {}
    replied_escalated = undecodable = 0
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
    produce_s = m["produce_end"] - m["produce_start"] if "produce_end" in m else None
    park_s = m["parked"] - m["produce_start"] if "parked" in m else None
    parks = rate(n, park_s) if park_s is not None else None
    seen = watch.seen
    completion_s = (seen.last_at - seen.first_at
                    if seen.first_at is not None and seen.last_at is not None else None)
    base_rate = (run.baseline or {}).get("records_per_s")
    hwm = run.hwm_kib
    peak = max(x for x in (hwm, rss.peak_kib if rss else None, 0) if x is not None)
    at_start = run.rss_at_park_start_kib
    growth = round((peak - at_start) * 1024 / n) if peak and at_start else None
    due_span_s = ((max(run.requested_at_ms) - min(run.requested_at_ms)) / 1000
                  + run.plan.deadline_spread if run.requested_at_ms else None)
    return {
        "parks_per_s": parks,
        "completed_waits_per_s": rate(len(seen.first), completion_s),
        "deadline_lateness_ms": summary(lateness),
        "reply_to_outcome_ms": summary(latencies),
        "worker_peak_rss_mib": mib(peak),
        "baseline_records_per_s": base_rate,
        "parks_to_baseline_ratio": (round(parks / base_rate, 4)
                                    if parks and base_rate else None),
        "details": {
            "produce_per_s": rate(n, produce_s),
            "produce_seconds": rnd(produce_s, 3),
            "park_seconds": rnd(park_s, 3),
            "completion_seconds": rnd(completion_s, 3),
            "received_per_s": rate(len(received_at), _span(received_at)),
            "escalated_per_s": rate(len(escalated_at), _span(escalated_at)),
            "replies_sent": len(run.replied),
            "reply_window_s": run.reply_window_s,
            "reply_send_rate_per_s": rate(run.replies_planned, run.reply_window_s),
            "replied_waits_that_escalated": replied_escalated,
            "outcomes": len(seen.first),
            "outcomes_by_kind": kinds,
            "outcomes_by_reason": reasons,
            "duplicate_outcomes": seen.duplicates,
            "undecodable_outcomes": undecodable,
            "rss_peak_sampled_mib": mib(rss.peak_kib if rss else None),
            "rss_vmhwm_mib": mib(hwm),
            "rss_at_park_start_mib": mib(at_start),
            "rss_growth_bytes_per_wait": growth,
            "rss_samples": len(rss.samples) if rss else 0,
            "deadlines_fell_due_within_s": rnd(due_span_s, 3),
            "rss_last_sampled_mib": mib(rss.samples[-1][1] if rss and rss.samples else None),
            "baseline": run.baseline,
        },
    }


def say(text: str) -> None:
    print(f"park_bench: {text}", flush=True)


def run_park(plan: ParkPlan) -> dict[str, Any]:
    """One run of the plan; the result (figures None when the run never got going)."""
    started = datetime.now(UTC)
    with Scratch("park_bench", plan.bootstrap, plan.partitions, tail_lines=30,
                 timer_tick=TIMER_TICK_S) as scratch:
        park_topology(scratch.topology, plan.deadline)
        run = Run(plan, scratch.settings, parse_duration_ms(plan.deadline))
        worker = scratch.worker("park", log_level="warning")
        rss: RssSampler | None = None
        watch: OutcomeWatch | None = None
        try:
            scratch.check_broker()
            rss = start_worker(scratch.settings, worker)
            watch = OutcomeWatch(scratch.settings)
            sender = Sender(scratch.settings)
            run.rss_at_park_start_kib = worker.rss_kib()
            say(f"worker up (pid {worker.pid}); parking {plan.waits} waits, deadline "
                f"{plan.deadline}")
            park(run, worker, watch, sender)
            say(f"parked in {run.marks['parked'] - run.marks['produce_start']:.1f}s; replying")
            reply(run, worker, watch, sender)
            say("waiting for every outcome")
            complete(run, worker, watch)
            run.final_stats = worker.stats()
            run.hwm_kib = worker.peak_rss_kib()
            rss.stop()
            worker.stop()
            say("baseline consume->produce loop")
            run.baseline = baseline(scratch.settings, scratch.admin, plan.waits,
                                    max(120.0, plan.waits / 500))
        finally:
            if run.hwm_kib is None and worker.running:
                run.hwm_kib = worker.peak_rss_kib()
            if run.final_stats is None and worker.running:
                run.final_stats = worker.stats()
            if rss is not None:
                rss.stop()
            if watch is not None:
                with contextlib.suppress(KafkaException):
                    watch.drain(0)
                watch.close()
    errors = scratch.errors
    complete_run = not errors and watch is not None and len(watch.seen.first) >= plan.waits
    return envelope(
        "park_bench", started, complete=complete_run,
        duration_s=round((datetime.now(UTC) - started).total_seconds(), 1),
        parameters={
            "waits": plan.waits, "reply_fraction": plan.reply_fraction,
            "deadline": plan.deadline, "deadline_spread_s": plan.deadline_spread,
            "partitions": plan.partitions, "bootstrap": plan.bootstrap,
            "topic_prefix": scratch.prefix, "seed": plan.seed, "workers": 1,
            "guarantee": scratch.settings.guarantee.value, "timer_tick_s": TIMER_TICK_S,
            "definition": DEFINITION, "parks_measured_by": "stats counter processed.requests"},
        figures=figures(run, watch, rss) if watch is not None else None,
        worker_stats_at_end=run.final_stats, notes=run.notes, errors=errors,
        worker_log_tail=scratch.tails.get(worker.name, "").splitlines(),
        topics_deleted=scratch.topics_deleted)


def summary_text(result: dict[str, Any]) -> str:
    f = result["figures"]
    d = f["details"]
    par = result["parameters"]
    lines = [
        f"park_bench: {par['waits']} waits, deadline {par['deadline']}, reply fraction "
        f"{par['reply_fraction']}, complete={result['complete']}",
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
    lines += [f"  note: {note}" for note in result["notes"]]
    lines += [f"  ERROR: {err}" for err in result["errors"]]
    return "\n".join(lines)


__all__ = ["CHANNEL", "DEFINITION", "OutcomeWatch", "ParkPlan", "Run", "baseline",
           "park_topology", "run_park", "summary_text"]
