"""The flood's run against one real worker: bench/flood_bench.py's engine.

The target it measures (open issue): a flood of hostile records is rejected at
no less than the worker's drain rate, and valid replies in the same partitions
are not left minutes behind it.  One run, against the broker given (shared:
never started or stopped here; the run's own topics are deleted at the end):

1. creates its topics under a fresh prefix and a topology folder with the
   shipped definitions, their early-reply TTL set to the plan's so that
   replies and commands held for keys no wait has are rejected ``unmatched``
   within the run, and starts ONE ``xwait worker``;
2. parks the plan's expense-approval waits and measures the worker's parks/s:
   the drain rate of this run on this machine, the like-for-like yardstick;
3. produces the hostile records of every kind the processor refuses
   (`mix.KINDS`), over the four input topics and every partition, with a
   valid reply to a parked wait after every `reply_every` of them, a share
   through producers that compress (gzip, lz4, zstd, snappy);
4. measures hostile records/s from the first flood record's append until the
   worker has decided the last one (its positions in /xwait/stats) and
   published its rejection, the valid replies' reply->outcome latency, and
   accounts for every hostile record (`accounting.account`); checks that no
   hostile record ended, parked or changed a wait.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, KafkaError, Message, Producer

from streams import codec
from streams.codec import RecordType
from streams.config import Settings
from streams.core.durations import parse_duration_ms
from streams.definitions import load_definitions
from streams.partitioning import partition_for
from streams.testing.flood.accounting import (
    Coord,
    Rejection,
    account,
    counter_delta,
    flood_figures,
    judge_outcomes,
)
from streams.testing.flood.mix import (
    COMPRESSIONS,
    DEFINITION,
    INPUTS,
    KINDS,
    ExactTimer,
    Fate,
    ParkedWait,
    Planned,
    mix_summary,
    parked_waits,
    plan_flood,
    start_request,
)
from streams.testing.harness import BenchError
from streams.testing.harness.figures import per_s, rnd
from streams.testing.harness.kafka import close, reader
from streams.testing.harness.producing import produce
from streams.testing.harness.results import envelope
from streams.testing.harness.scratch import Scratch
from streams.testing.harness.topology import SHIPPED, make_topology
from streams.testing.harness.worker import RssSampler, check_alive, mib, start_worker
from streams.testing.workers import WorkerProcess

TIMER_TICK_S = 0.2
# Parking lasts seconds: poll often, or the poll interval is a visible share of it.
PARK_POLL_S = 0.1
# The flood lasts minutes: a slower poll costs the worker (which shares the CPU) less.
FLOOD_POLL_S = 0.2
# Accounting reads the whole plan (100,000 records: a tenth of a second): not more often.
SETTLE_POLL_S = 2.0
# How long the worker's positions may stay still before the run gives up.
STALL_S = 180.0


@dataclass(frozen=True)
class FloodPlan:
    """What one run does (bench/flood_bench.py's options)."""

    # Alike in shape with processor/tuning.py's Tuning (duplicates lists the pair),
    # deliberately: fields of two dataclasses, no logic shared.
    waits: int = 5000
    hostile: int = 100_000
    reply_every: int = 50
    compressed_fraction: float = 0.1
    early_reply_ttl: str | None = "PT30S"  # None: the shipped definitions' own
    partitions: int = 8
    seed: int = 1
    bootstrap: str = "127.0.0.1:9092"


class Producers:
    """One producer per compression codec ("none" too), with delivery reports by record index.

    The partition of every record is given (the plan chose it), so the
    partitioner does not matter.  Input topics stamp records with the broker's
    clock: the delivery report carries that append time.
    """

    def __init__(self, settings: Settings) -> None:
        self.producers = {c: Producer(settings.confluent(**{
            "acks": "all", "enable.idempotence": True, "compression.type": c,
            # The producer must outrun the worker by far, so that the rate is the worker's.
            "linger.ms": 20, "batch.size": 1_000_000, "queue.buffering.max.messages": 500_000,
            "queue.buffering.max.kbytes": 1_048_576}))
            for c in ("none", *COMPRESSIONS)}
        self.coords: list[tuple[int, int] | None] = []  # (partition, offset) by index
        self.append_ms: list[int | None] = []
        self.log_append_time = True
        self.errors: list[str] = []

    def _delivered(self, index: int, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            if len(self.errors) < 100:
                self.errors.append(str(err))
            return
        self.coords[index] = (msg.partition() or 0, msg.offset() or 0)
        kind, ts = msg.timestamp()
        self.append_ms[index] = ts
        if kind != TIMESTAMP_LOG_APPEND_TIME:
            self.log_append_time = False

    def send(self, topic: str, key: bytes | None, value: bytes | None, partition: int,
             compression: str = "none") -> int:
        index = len(self.coords)
        self.coords.append(None)
        self.append_ms.append(None)
        produce(self.producers[compression], topic, key, value, partition=partition,
                on_delivery=partial(self._delivered, index))
        if index % 2000 == 0:
            for p in self.producers.values():
                p.poll(0)
        return index

    def flush(self, timeout: float) -> None:
        end = time.monotonic() + timeout
        for p in self.producers.values():
            left = p.flush(max(end - time.monotonic(), 1.0))
            if left:
                raise BenchError(f"{left} records not delivered within {timeout:.0f}s")
        if self.errors:
            raise BenchError(f"{len(self.errors)} records failed: {self.errors[0]}")


class Watch:
    """A read_committed consumer of the outcomes and rejected topics, from their start."""

    def __init__(self, settings: Settings) -> None:
        self.outcomes_topic = settings.topic("outcomes")
        self.rejected_topic = settings.topic("rejected")
        self.roles = {settings.topic(r): r for r in INPUTS}
        self.consumer = reader(settings, [self.outcomes_topic, self.rejected_topic],
                               f"{settings.topic_prefix}-watch", **{"fetch.wait.max.ms": 50})
        # wait key -> [(outcome, reason, record timestamp ms)]
        self.outcomes: dict[str, list[tuple[str, str, int]]] = {}
        self.rejections: dict[Coord, list[Rejection]] = {}
        self.undecodable = 0

    def drain(self, timeout: float, most: int = 5000) -> int:
        got = 0
        for msg in self.consumer.consume(most, timeout=max(timeout, 0.0)):
            if msg.error() is not None:
                continue
            got += 1
            ts = msg.timestamp()[1]
            try:
                if msg.topic() == self.outcomes_topic:
                    o = codec.decode(RecordType.OUTCOME, msg.value())
                    self.outcomes.setdefault(str(o["correlationKey"]), []).append(
                        (str(o["outcome"]), str(o["reason"]), ts))
                else:
                    r = codec.decode(RecordType.REJECTED, msg.value())
                    where = (self.roles.get(str(r["topic"]), str(r["topic"])),
                             int(r["partition"]), int(r["offset"]))
                    self.rejections.setdefault(where, []).append(
                        Rejection(str(r["reason"]), ts, r["key"]))
            except codec.CodecError:
                self.undecodable += 1
        return got

    def close(self) -> None:
        close(self.consumer)


def flood_topology(folder: Path, early_ttl: str | None) -> list[str]:
    """topics.yaml and every shipped definition, their early-reply TTL set to `early_ttl`."""

    def shorten(doc: dict[str, Any], name: str) -> list[str]:
        if early_ttl is None:
            return []
        was = doc.get("early_reply_ttl", "PT10M (default)")
        doc["early_reply_ttl"] = early_ttl
        return [f"{name}: early_reply_ttl {was} -> {early_ttl}"]

    return make_topology(folder, sorted(SHIPPED.glob("*.yaml")), shorten)


def exact_timers(topology: Path) -> list[ExactTimer]:
    """The deadline and reminder a DEFINITION wait arms when it parks.

    decide() arms the deadline first, then the reminder, from a new key's
    generation 1 (`_arm_phase`): forged records of exactly these look real.
    """
    stage = load_definitions(topology / "waits")[DEFINITION].stages[0]
    out = [ExactTimer("deadline", 1, stage.deadline_ms)]
    if stage.reminder is not None:
        out.append(ExactTimer("reminder", 2, stage.reminder.interval_ms))
    return out


def say(text: str) -> None:
    print(f"flood_bench {datetime.now(UTC).strftime('%H:%M:%S')} {text}", flush=True)


def wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class Run:
    options: FloodPlan
    settings: Settings
    worker: WorkerProcess
    producers: Producers
    watch: Watch
    waits: list[ParkedWait] = field(default_factory=list)
    plan: list[Planned] = field(default_factory=list)
    flood_index0: int = 0  # producer index of the flood's first record
    marks: dict[str, float] = field(default_factory=dict)  # wall ms of phases
    stats_before_flood: dict[str, Any] = field(default_factory=dict)
    stats_at_end: dict[str, Any] | None = None
    parks_per_s: float | None = None
    rss_kib: dict[str, int | None] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def stats(self) -> dict[str, Any]:
        check_alive(self.worker)
        return self.worker.stats() or {}

    def counters(self) -> dict[str, Any]:
        return dict(self.stats().get("counters", {}))


def park(run: Run) -> None:
    """Park the valid waits; parks/s from the first request's append to the worker's count."""
    n = run.options.waits
    topic = run.settings.topic("requests")
    before = int(run.counters().get("processed.requests", 0))
    run.waits = parked_waits(run.options.seed, n, wall_ms())
    for w in run.waits:
        key = w.key.encode()
        run.producers.send(topic, key, start_request(w), partition_for(key, run.options.partitions))
    run.producers.flush(120)
    first = min(t for t in run.producers.append_ms[:n] if t is not None)
    deadline = time.monotonic() + max(120.0, n / 50)
    while True:
        if int(run.counters().get("processed.requests", 0)) - before >= n:
            done = wall_ms()
            break
        if time.monotonic() > deadline:
            raise BenchError(f"timed out waiting for the worker to process {n} requests")
        time.sleep(PARK_POLL_S)
    run.parks_per_s = per_s(n, first, done)
    run.marks["park_first_append"], run.marks["parked"] = first, done
    # The flood starts on a settled worker: every wait counted, its action out.
    deadline = time.monotonic() + 120
    while int(run.stats().get("waits", {}).get("parked", 0)) < n:
        if time.monotonic() > deadline:
            raise BenchError(f"the worker's census did not reach {n} parked waits in 120 s")
        time.sleep(PARK_POLL_S)


def positions_cover(stats: Mapping[str, Any], ends: Mapping[tuple[str, int], int]) -> bool:
    """The worker has decided every record up to `ends` (role, partition) -> last offset."""
    positions = stats.get("positions", {})
    return all(int(positions.get(str(p), {}).get(role, -1)) > last
               for (role, p), last in ends.items())


def flood(run: Run) -> None:
    """Produce the plan, then wait until the worker has decided every record of it."""
    s = run.settings
    run.stats_before_flood = run.stats()
    run.flood_index0 = len(run.producers.coords)
    started = time.monotonic()
    for rec in run.plan:
        run.producers.send(s.topic(rec.role), rec.key, rec.value, rec.partition,
                           rec.compression)
    produced = time.monotonic()
    run.producers.flush(300)
    run.marks["produce_s"] = produced - started
    run.marks["flushed_s"] = time.monotonic() - started
    coords = run.producers.coords[run.flood_index0:]
    ends: dict[tuple[str, int], int] = {}
    for rec, c in zip(run.plan, coords, strict=True):
        if c is not None:
            ends[(rec.role, c[0])] = max(ends.get((rec.role, c[0]), -1), c[1])
    appended = [t for t in run.producers.append_ms[run.flood_index0:] if t is not None]
    run.marks["flood_first_append"] = min(appended)
    run.marks["flood_last_append"] = max(appended)
    say(f"produced {len(run.plan)} records in {run.marks['produce_s']:.1f}s; "
        "waiting for the worker to decide them")
    moved, last = time.monotonic(), -1
    give_up = time.monotonic() + max(600.0, len(run.plan) / 20)
    while True:
        stats = run.stats()
        if positions_cover(stats, ends):
            run.marks["decided"] = wall_ms()
            break
        mark = sum(int(o) for pos in stats.get("positions", {}).values() for o in pos.values())
        now = time.monotonic()
        if mark != last:
            last, moved = mark, now
        elif now - moved > STALL_S:
            raise BenchError(f"the worker's positions did not move for {STALL_S:.0f}s")
        if now > give_up:
            raise BenchError("timed out waiting for the worker to decide the flood")
        time.sleep(FLOOD_POLL_S)  # the stats request costs the worker too: not faster
        run.watch.drain(0)


def flood_coords(run: Run) -> list[Coord | None]:
    out: list[Coord | None] = []
    for rec, c in zip(run.plan, run.producers.coords[run.flood_index0:], strict=True):
        out.append(None if c is None else (rec.role, c[0], c[1]))
    return out


def settle(run: Run) -> dict[str, Any]:
    """Consume rejections and outcomes until every hostile record is accounted for.

    Held records are rejected `unmatched` once their early-reply TTL has
    passed (by the partition's stream time): up to the TTL after the flood.
    """
    coords = flood_coords(run)
    replied = sum(1 for p in run.plan if p.fate is Fate.VALID)
    # The shipped definitions' TTL: the default, which most of them keep.
    ttl_s = parse_duration_ms(run.options.early_reply_ttl or "PT10M") / 1000
    give_up = time.monotonic() + ttl_s + 180
    while True:
        pause = time.monotonic() + SETTLE_POLL_S
        while time.monotonic() < pause:
            run.watch.drain(0.2)
        delta = counter_delta(run.stats_before_flood.get("counters", {}), run.counters())
        result = account(run.plan, coords, run.watch.rejections, delta)
        got = sum(1 for p in run.plan if p.fate is Fate.VALID and run.watch.outcomes.get(
            p.wait_key or ""))
        if result["unaccounted"] == 0 and got >= replied:
            return result
        if time.monotonic() > give_up:
            run.notes.append(f"gave up waiting: {result['unaccounted']} hostile records "
                             f"unaccounted, {replied - got} replied waits without an outcome")
            return result


def verdict(run: Run, accounting: Mapping[str, Any]) -> dict[str, Any]:
    """Correctness: outcomes, the census, the counters of the flood, the worker alive."""
    stats = run.stats_at_end or {}
    replied = [p.wait_key or "" for p in run.plan if p.fate is Fate.VALID]
    outcomes = {k: [(o, r) for o, r, _ in v] for k, v in run.watch.outcomes.items()}
    judged = judge_outcomes((w.key for w in run.waits), replied, outcomes)
    census = {k: int(v) for k, v in stats.get("waits", {}).items() if int(v)}
    expected = {k: v for k, v in (("parked", len(run.waits) - len(replied)),
                                  ("done", len(replied))) if v}
    delta = counter_delta(run.stats_before_flood.get("counters", {}),
                          stats.get("counters", {}))
    actions = {k: v for k, v in delta.items() if k.startswith("actions.")}
    ended = {k: v for k, v in delta.items() if k.startswith("outcomes.")}
    alive = run.worker.running
    ok = (judged["ok"] and census == expected and not actions
          and ended == ({"outcomes.reply_valid": len(replied)} if replied else {})
          and accounting["internal_errors"] == 0 and accounting["unaccounted"] == 0
          and accounting["valid_replies_rejected"] == 0 and alive)
    return {"ok": ok, "outcomes": judged, "census": census, "expected_census": expected,
            "actions_during_flood": actions, "outcomes_during_flood": ended,
            "internal_errors": accounting["internal_errors"], "worker_alive": alive}


def reply_latencies(run: Run) -> list[float]:
    """Reply append (broker) -> outcome record timestamp, ms, for every valid reply."""
    out = []
    appends = run.producers.append_ms[run.flood_index0:]
    for rec, appended in zip(run.plan, appends, strict=True):
        if rec.fate is not Fate.VALID or appended is None:
            continue
        got = run.watch.outcomes.get(rec.wait_key or "")
        if got:
            out.append(float(got[0][2] - appended))
    return out



def summary_text(result: Mapping[str, Any]) -> str:
    f = result.get("figures") or {}
    a = result.get("accounting") or {}
    c = result.get("correctness") or {}
    lat = f.get("valid_reply_to_outcome_ms") or {}
    rss = result.get("worker_rss_mib") or {}
    par = result["parameters"]
    lines = [
        f"flood_bench: {par['hostile']} hostile records, {par['waits']} parked waits, "
        f"complete={result['complete']}",
        f"  hostile records/s          {f.get('hostile_per_s')}  (all flood records "
        f"{f.get('flood_records_per_s')}/s, over {f.get('flood_seconds')} s)",
        f"  valid parks/s (yardstick)  {f.get('valid_parks_per_s')}",
        f"  hostile/s / parks/s        {f.get('hostile_to_parks_ratio')}",
        f"  valid reply->outcome ms    p50 {lat.get('p50')}  p99 {lat.get('p99')}  "
        f"max {lat.get('max')}  (n={lat.get('count')})",
        f"  accounted                  rejected {a.get('rejected')}, ignored "
        f"{a.get('ignored')}, unaccounted {a.get('unaccounted')} (held ones all rejected "
        f"after {f.get('all_rejected_after_s')} s)",
        f"  worker RSS MiB             before flood {rss.get('before_flood')}, peak "
        f"{rss.get('peak_sampled')}, VmHWM {rss.get('vmhwm')}",
        f"  correct                    {c.get('ok')}  (internal_error "
        f"{c.get('internal_errors')}, worker alive {c.get('worker_alive')})",
        "  rejected by reason         " + ", ".join(
            f"{k} {v}" for k, v in (a.get("reasons") or {}).items()),
        "  ignored by counter         " + ", ".join(
            f"{k} {v['counter']}" for k, v in (a.get("ignore_counters") or {}).items()),
    ]
    for kind, reasons in (a.get("unexpected_reasons") or {}).items():
        lines.append(f"  note: {kind} got {reasons}")
    for note in result.get("notes", []):
        lines.append(f"  note: {note}")
    for err in result.get("errors", []):
        lines.append(f"  ERROR: {err}")
    return "\n".join(lines)


def figures(run: Run, accounting: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The headline figures of a run that got to its flood (None before)."""
    if run.marks.get("flood_first_append") is None:
        return None
    a = accounting or {}
    got = flood_figures(
        sum(1 for p in run.plan if p.fate is not Fate.VALID), len(run.plan),
        run.parks_per_s, int(run.marks["flood_first_append"]),
        int(run.marks["decided"]) if "decided" in run.marks else None,
        a.get("last_immediate_rejection_ms"), a.get("last_rejection_ms"), reply_latencies(run))
    produce_s = run.marks.get("produce_s")
    got["produce_s"] = rnd(produce_s, 2)
    got["producer_per_s"] = round(len(run.plan) / produce_s, 1) if produce_s else None
    got["park_seconds"] = (round((run.marks["parked"] - run.marks["park_first_append"]) / 1000,
                                 2) if "parked" in run.marks else None)
    return got


def run_flood(plan: FloodPlan) -> dict[str, Any]:
    """One run of the plan; the result (its figures None when it never got to the flood)."""
    started = datetime.now(UTC)
    run: Run | None = None
    rss: RssSampler | None = None
    accounting: dict[str, Any] | None = None
    correctness: dict[str, Any] | None = None
    with Scratch("flood_bench", plan.bootstrap, plan.partitions,
                 timer_tick=TIMER_TICK_S) as scratch:
        changes = flood_topology(scratch.topology, plan.early_reply_ttl)
        worker = scratch.worker("flood", log_level="warning")
        try:
            scratch.check_broker()
            rss = start_worker(scratch.settings, worker)
            run = Run(plan, scratch.settings, worker, Producers(scratch.settings),
                      Watch(scratch.settings))
            say(f"worker up (pid {worker.pid}); parking {plan.waits} waits")
            park(run)
            say(f"parked at {run.parks_per_s}/s; planning the flood")
            run.rss_kib["before_flood"] = worker.rss_kib()
            run.plan = plan_flood(plan.seed, plan.hostile, run.waits, plan.partitions, wall_ms(),
                                  plan.reply_every, plan.compressed_fraction,
                                  exact_timers(scratch.topology))
            flood(run)
            say("decided; accounting for every hostile record (held ones wait for their TTL)")
            accounting = settle(run)
            run.stats_at_end = run.stats()
            run.rss_kib["vmhwm"] = worker.peak_rss_kib()
            run.rss_kib["at_end"] = worker.rss_kib()
            correctness = verdict(run, accounting)
            if not run.producers.log_append_time:
                run.notes.append("the input topics did not report LogAppendTime: append "
                                 "times are the producer's")
        finally:
            if rss is not None:
                rss.stop()
            if run is not None and run.stats_at_end is None and worker.running:
                run.stats_at_end = worker.stats()
            if run is not None:
                run.watch.close()
            scratch.failed = correctness is not None and not correctness["worker_alive"]
    got = None if run is None else figures(run, accounting)
    complete = (not scratch.errors and got is not None and correctness is not None
                and correctness["ok"])
    return envelope(
        "flood_bench", started, complete=complete,
        duration_s=round((datetime.now(UTC) - started).total_seconds(), 1),
        parameters={
            "waits": plan.waits, "hostile": plan.hostile, "reply_every": plan.reply_every,
            "compressed_fraction": plan.compressed_fraction,
            "early_reply_ttl": plan.early_reply_ttl or "shipped",
            "partitions": plan.partitions, "seed": plan.seed, "bootstrap": plan.bootstrap,
            "topic_prefix": scratch.prefix, "workers": 1,
            "guarantee": scratch.settings.guarantee.value, "timer_tick_s": TIMER_TICK_S,
            "definition": DEFINITION},
        figures=got,
        worker_rss_mib=None if run is None else {
            **{k: mib(v) for k, v in run.rss_kib.items()},
            "peak_sampled": mib(rss.peak_kib if rss else None),
            "samples": len(rss.samples) if rss else 0},
        mix=None if run is None or not run.plan else mix_summary(run.plan),
        kinds={k: {"fate": v.fate.value, "reasons": sorted(v.reasons), "doc": v.doc}
               for k, v in KINDS.items()},
        accounting=accounting, correctness=correctness,
        counters_during_flood=None if run is None or run.stats_at_end is None else
        counter_delta(run.stats_before_flood.get("counters", {}),
                      run.stats_at_end.get("counters", {})),
        topology_changes=changes, loadavg_at_end=list(os.getloadavg()),
        worker_stats_at_end=None if run is None else run.stats_at_end,
        notes=[] if run is None else run.notes, errors=scratch.errors,
        worker_log_tail=scratch.tails.get(worker.name, "").splitlines(),
        topics_deleted=scratch.topics_deleted)
