"""Park waits on one worker up to 10k, 100k, 1M, 10M and measure what grows with N (issue 10).

Run: ``.venv/bin/python bench/scale_bench.py [--checkpoints 10000,100000,1000000,10000000]
[--skip-restore-above 1000000] [--skip-standby-above 1000000] [--bootstrap 127.0.0.1:9092]``;
``--plot-only FILE`` redraws the plot of a result; ``--publish docs/scale.png`` copies it.
See bench/README.md for what each figure means.

One run, against the broker given (shared: it is never stopped; the run's
topics and groups are deleted at the end):

1. creates its own topics under a fresh prefix and a topology folder with the
   repository's topics.yaml and the shipped definitions (timers shorter than
   ``--timer-floor`` stretched to it, so that nothing falls due while the run
   parks), and starts ONE ``xwait worker`` (8 partitions by default);
2. for each checkpoint N: produces the StartWait records (JSON) that bring the
   parked waits to N as fast as confluent-kafka goes, spread over the shipped
   definitions, two timers each; ~2% get an invalid reply (in review), ~2% a
   SUSPEND command; polls ``processed.requests`` until the worker has taken
   them all (parks/s) and its census counts them;
3. at the checkpoint: RSS (VmRSS, VmHWM), RocksDB bytes on disk per wait,
   status and list latency through the web API, the punctuator's tick cost
   (``latencyMs`` of /xwait/stats);
4. parks ``--sample`` waits whose deadline is ``--sample-deadline`` away, then
   restarts the worker on its own disk (SIGTERM, start: seconds until it owns
   every partition and its stream time moves), starts a worker on an empty
   disk (restore rows/s), starts a second worker beside it and, once its
   standby copies have caught up, stops the first (standby takeover);
5. checks that every sample wait got exactly one outcome;
6. writes the JSON after every checkpoint, and at the end a PNG with one panel
   per figure against N (log scale).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

import orjson
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from park_bench import (  # noqa: E402 - the sibling module, importable once on the path
    REPO,
    BenchError,
    delete_topics,
    machine,
    percentile,
    versions,
)

from streams import codec, topics  # noqa: E402
from streams.codec import RecordType  # noqa: E402
from streams.config import Settings  # noqa: E402
from streams.core.durations import parse_cycle_ms, parse_duration_ms  # noqa: E402
from streams.testing.workers import XWAIT, WorkerProcess, proc_status_kib  # noqa: E402

MIB = 1024 * 1024
DEFAULT_CHECKPOINTS = (10_000, 100_000, 1_000_000, 10_000_000)
# The shipped definitions the waits are spread over (demo-approval, on a clock
# of seconds, is left out: its waits would not stay parked).
SHIPPED = ("expense-approval", "vendor-quote", "first-valid", "probe", "two-stage-approval")
# Definitions whose invalid reply opens a review (invalid_reply: review), and an
# invalid reply for each: (channel, responseData) that fails its schema.
REVIEWABLE: dict[str, tuple[str, dict[str, Any]]] = {
    "expense-approval": ("portal", {"decision": "maybe"}),
    "vendor-quote": ("email", {"amount": -1, "currency": "usd"}),
}
# The sample's definition: no escalation level, so its deadline ends it ESCALATED.
SAMPLE_DEFINITION = "first-valid"
STATS_POLL_S = 0.2
# How long the census may take, once a worker is ready (or its input processed),
# to count every wait; a wait still missing then is reported as lost.
COUNT_GRACE_S = 30.0
# How long a phase may make no progress (counters, ownership) before the run gives up.
STALL_S = 180.0
# A standby applies what each fetch brings (streams.processor.restore), so it is
# at most a fetch behind; one this close counts as caught up, and the takeover
# reads the rest from the changelog.
STANDBY_SLACK = 1000
# How long the standby's lag may stay the same before the takeover is measured
# anyway (with the standby behind, the second restores the rest first).
STANDBY_STALL_S = 120.0
# Seconds the worker idles after its restart before the tick cost is read:
# a fresh window of `latencyMs` (one tick every 0.2 s: ~150 ticks).
TICK_SETTLE_S = 30.0
# Most seconds the list latency probes may take per checkpoint (a list walks
# every row: at 10M it takes long); at least LIST_MIN requests are made.
LIST_BUDGET_S = 90.0
LIST_MIN = 3

# The done-when targets of issue 10, checked against the largest checkpoint run.
RSS_LIMIT_MIB = 1536.0
PARKS_RATIO_MIN = 0.8
TICK_RATIO_MAX = 2.0
API_LIMIT_MS = 100.0
RESTART_LIMIT_S = 10.0
RESTORE_MIN_ROWS_S = 17_000.0
STANDBY_LIMIT_S = 5.0


# -- the waits ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Planned:
    """What wait number i of a run is: its key, definition and fate."""

    key: str
    definition: str
    fate: str  # park | review | suspend


def planned(seed: int, i: int, review: float, suspend: float) -> Planned:
    """Wait i of the run with this seed, the same every time (so no key list is kept)."""
    digest = hashlib.blake2b(f"{seed}:{i}".encode(), digest_size=16).digest()
    u = int.from_bytes(digest[2:6], "big") / 2**32
    if u < review:
        names = sorted(REVIEWABLE)
        return Planned(digest.hex(), names[digest[0] % len(names)], "review")
    fate = "suspend" if u < review + suspend else "park"
    return Planned(digest.hex(), SHIPPED[digest[0] % len(SHIPPED)], fate)


def sample_key(seed: int, n: int, j: int) -> str:
    return hashlib.blake2b(f"{seed}:sample:{n}:{j}".encode(), digest_size=16).hexdigest()


def start_record(key: str, definition: str, i: int, deadline: str | None = None) -> bytes:
    record: dict[str, Any] = {"correlationKey": key, "definition": definition,
                              "requestedAt": int(time.time() * 1000),
                              "payload": f'{{"ref": "scale-{i}", "amount": 120}}'}
    if deadline is not None:
        record["deadline"] = deadline
    return orjson.dumps(record)


def invalid_reply(key: str, definition: str) -> bytes:
    channel, data = REVIEWABLE[definition]
    return orjson.dumps({"correlationKey": key, "channel": channel,
                         "responseData": json.dumps(data), "replyId": f"{key}-r1"})


def suspend_command(key: str) -> bytes:
    return orjson.dumps({"correlationKey": key, "command": "SUSPEND",
                         "reason": "scale bench: a few percent are suspended",
                         "operator": "scale-bench"})


def stretch_topology(doc: dict[str, Any], floor_ms: int, floor_iso: str) -> list[str]:
    """Raise the timers a wait arms when it parks (deadline, reminder, poll, of the
    definition or of its stages) to the floor where they are shorter; say what changed.
    Escalation levels arm only once a deadline has passed: they are left alone."""
    changes: list[str] = []
    name = str(doc.get("name", "?"))

    def fix(holder: dict[str, Any], key: str, where: str) -> None:
        raw = holder.get(key)
        if isinstance(raw, str) and parse_duration_ms(raw) < floor_ms:
            holder[key] = floor_iso
            changes.append(f"{name}: {where} {raw} -> {floor_iso}")

    def fix_reminder(holder: dict[str, Any], where: str) -> None:
        raw = holder.get("reminder")
        if isinstance(raw, str):
            limit, interval = parse_cycle_ms(raw)
            if interval < floor_ms:
                holder["reminder"] = f"R{limit}/{floor_iso}"
                changes.append(f"{name}: {where} {raw} -> R{limit}/{floor_iso}")
        elif isinstance(raw, dict):
            fix(raw, "every", f"{where}.every")

    fix(doc, "deadline", "deadline")
    fix(doc, "poll", "poll")
    fix_reminder(doc, "reminder")
    for i, stage in enumerate(doc.get("stages") or []):
        if isinstance(stage, dict):
            fix(stage, "deadline", f"stages[{i}].deadline")
            fix_reminder(stage, f"stages[{i}].reminder")
    return changes


def make_topology(folder: Path, floor: str | None) -> list[str]:
    """topics.yaml and the shipped definitions, timers below `floor` raised to it."""
    (folder / "waits").mkdir(parents=True)
    shutil.copy(REPO / "topology" / "topics.yaml", folder / "topics.yaml")
    changes: list[str] = []
    for name in SHIPPED:
        doc = yaml.safe_load((REPO / "topology" / "waits" / f"{name}.yaml").read_text("utf-8"))
        if floor is not None:
            changes += stretch_topology(doc, parse_duration_ms(floor), floor)
        (folder / "waits" / f"{name}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False),
                                                        encoding="utf-8")
    return changes


# -- measuring ---------------------------------------------------------------------------


def du_bytes(path: Path) -> int:
    """Bytes a folder takes on disk (allocated blocks, as du counts them)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
    return total


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def http_get(url: str, timeout: float) -> tuple[int, float, Any]:
    """(status, milliseconds, JSON body or None) of one GET."""
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - loopback
            body = resp.read()
            status = resp.status
    except urllib.error.HTTPError as exc:
        body, status = exc.read(), exc.code
    ms = (time.perf_counter() - started) * 1000
    try:
        return status, ms, json.loads(body)
    except ValueError:
        return status, ms, None


def spread(values: list[float]) -> dict[str, Any]:
    def r(v: float | None) -> float | None:
        return None if v is None else round(v, 2)
    return {"p50": r(percentile(values, 50)), "p99": r(percentile(values, 99)),
            "max": r(max(values, default=None)), "n": len(values)}


def all_waits(stats: dict[str, Any] | None) -> int:
    """Every wait the census counts, done ones included (their rows are kept for days)."""
    return sum(int(n) for n in (stats or {}).get("waits", {}).values())


def stream_time_past(stats: dict[str, Any] | None, partitions: int, wall_ms: int) -> bool:
    """Every partition's stream time is at or past `wall_ms` (so its timers fire)."""
    times = (stats or {}).get("streamTime", {})
    return len(times) == partitions and min(int(t) for t in times.values()) >= wall_ms


class Stopped(BaseException):
    """SIGTERM or Ctrl-C: the run stops, writes what it has and cleans up."""


def watch(worker: WorkerProcess, done: Callable[[dict[str, Any] | None], bool],
          progress: Callable[[dict[str, Any] | None], Any], what: str,
          stall_s: float = STALL_S) -> float:
    """Poll the worker's stats until `done`; fail when `progress` stops changing for stall_s.

    Returns the monotonic time `done` first held.
    """
    last: Any = None
    moved = time.monotonic()
    while True:
        if worker.proc is not None and worker.proc.poll() is not None:
            raise BenchError(f"worker {worker.name} exited with code "
                             f"{worker.proc.returncode} while waiting for {what}")
        stats = worker.stats()
        now = time.monotonic()
        if done(stats):
            return now
        mark = progress(stats)
        if mark != last:
            last, moved = mark, now
        elif now - moved > stall_s:
            raise BenchError(f"no progress for {stall_s:.0f}s waiting for {what} "
                             f"(last: {mark!r})")
        time.sleep(STATS_POLL_S)


def changelog_ends(settings: Settings) -> dict[int, int]:
    """Per changelog partition: the offset of its last record (-1 when empty)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(settings.confluent(**{"group.id": f"{settings.app_id}-scale-probe",
                                              "enable.auto.commit": False}))
    topic = f"{settings.app_id}-waits-changelog"
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] - 1
                for p in range(settings.partitions)}
    finally:
        consumer.close()


def persisted_offsets(worker: WorkerProcess) -> dict[int, int]:
    """The changelog offset each partition database of a running worker holds, actives
    and standbys (`changelogOffsets` of /xwait/stats)."""
    offsets = (worker.stats() or {}).get("changelogOffsets") or {}
    return {int(p): int(o) for p, o in offsets.items() if o is not None}


# -- the run -------------------------------------------------------------------------------


@dataclass
class Run:
    args: argparse.Namespace
    settings: Settings
    folder: Path
    out: Path
    result: dict[str, Any]
    admin: Any = None
    producer: Any = None
    active: WorkerProcess | None = None
    workers: list[WorkerProcess] = field(default_factory=list)
    planned_n: int = 0  # waits 0..planned_n-1 produced
    expected: Counter[str] = field(default_factory=Counter)  # open waits by state
    samples_done: int = 0  # sample waits checked (ended by their deadline, rows kept)
    samples_parked: int = 0  # sample waits parked so far

    def expected_total(self) -> int:
        """Waits the worker must hold: every wait parked, sample waits included."""
        return sum(self.expected.values()) + self.samples_parked
    incarnation: int = 0
    delivery_errors: list[str] = field(default_factory=list)

    def delivered(self, err: Any, _msg: Any) -> None:
        if err is not None and len(self.delivery_errors) < 100:
            self.delivery_errors.append(str(err))

    def new_worker(self, role: str) -> WorkerProcess:
        self.incarnation += 1
        worker = WorkerProcess(self.settings, self.folder, f"{self.incarnation}-{role}",
                               log_level="info")
        self.workers.append(worker)
        return worker

    def retire(self, worker: WorkerProcess) -> None:
        """Stop a worker for good and free its disk (a 10M copy is gigabytes)."""
        worker.stop(120)
        shutil.rmtree(worker.data_dir, ignore_errors=True)

    def write(self) -> None:
        self.result["duration_s"] = round(time.monotonic() - self.result["_t0"], 1)
        data = {k: v for k, v in self.result.items() if not k.startswith("_")}
        data["targets"] = targets(data)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def say(text: str) -> None:
    print(f"scale_bench {datetime.now(UTC).strftime('%H:%M:%S')} {text}", flush=True)


def make_producer(settings: Settings) -> Any:
    from confluent_kafka import Producer

    return Producer(settings.confluent(**{
        "partitioner": "murmur2_random", "acks": "all", "enable.idempotence": True,
        # Big batches: the producer must outrun the worker by far, so that
        # parks/s is the worker's rate.
        "linger.ms": 20, "batch.size": 1_000_000, "queue.buffering.max.messages": 500_000,
        "queue.buffering.max.kbytes": 262_144}))


def send(run: Run, topic: str, key: str, value: bytes) -> None:
    while True:
        try:
            run.producer.produce(topic, key=key.encode(), value=value,
                                 on_delivery=run.delivered)
            return
        except BufferError:
            run.producer.poll(0.05)


def flush(run: Run) -> None:
    left = run.producer.flush(300)
    if left:
        raise BenchError(f"{left} records not delivered within 300 s")
    if run.delivery_errors:
        raise BenchError(f"{len(run.delivery_errors)} records failed: {run.delivery_errors[0]}")


def counters(worker: WorkerProcess) -> Counter[str]:
    stats = worker.stats() or {}
    return Counter({k: int(v) for k, v in stats.get("counters", {}).items()})


def park_segment(run: Run, n: int) -> dict[str, Any]:
    """Produce waits planned_n..n-1 and wait until the worker has taken and counted them."""
    worker = run.active
    assert worker is not None
    a, s = run.args, run.settings
    start = run.planned_n
    base = counters(worker)
    requests, replies, commands = s.topic("requests"), s.topic("replies"), s.topic("commands")
    follow: list[Planned] = []
    by_definition: Counter[str] = Counter()
    t0 = time.monotonic()
    for i in range(start, n):
        w = planned(a.seed, i, a.review_fraction, a.suspend_fraction)
        send(run, requests, w.key, start_record(w.key, w.definition, i))
        by_definition[w.definition] += 1
        if w.fate != "park":
            follow.append(w)
        if i % 5000 == 0:
            run.producer.poll(0)
    produced = time.monotonic()
    # Replies and commands after the requests: appended later, decided after them.
    for w in follow:
        if w.fate == "review":
            send(run, replies, w.key, invalid_reply(w.key, w.definition))
        else:
            send(run, commands, w.key, suspend_command(w.key))
    flush(run)
    flushed = time.monotonic()
    run.planned_n = n
    size = n - start
    fates = Counter(w.fate for w in follow)
    run.expected["parked"] += size - len(follow)
    run.expected["in_review"] += fates["review"]
    run.expected["suspended"] += fates["suspend"]
    say(f"produced {size} waits in {produced - t0:.1f}s (+{len(follow)} replies/commands); "
        "waiting for the worker")
    target = base["processed.requests"] + size
    parked_at = watch(worker, lambda st: int((st or {}).get("counters", {}).get(
        "processed.requests", 0)) >= target,
        lambda st: (st or {}).get("counters", {}).get("processed.requests"),
        f"{size} requests to be processed")
    rc = (base["processed.replies"] + fates["review"], base["processed.commands"] + fates[
        "suspend"])
    inputs_at = watch(worker, lambda st: (
        int((st or {}).get("counters", {}).get("processed.replies", 0)) >= rc[0]
        and int((st or {}).get("counters", {}).get("processed.commands", 0)) >= rc[1]),
        lambda st: ((st or {}).get("counters", {}).get("processed.replies"),
                    (st or {}).get("counters", {}).get("processed.commands")),
        "the replies and commands to be processed")
    counted_at, census = await_census(worker, run.expected_total(), COUNT_GRACE_S)
    stats = worker.stats() or {}
    seconds = parked_at - t0
    return {
        "waits": size, "from": start, "to": n,
        "parks_per_s": round(size / seconds, 1),
        "park_seconds": round(seconds, 2),
        "produce_seconds": round(produced - t0, 2),
        "produce_per_s": round(size / max(produced - t0, 1e-6), 1),
        "flushed_after_s": round(flushed - t0, 2),
        "inputs_processed_after_s": round(inputs_at - t0, 2),
        "counted_after_s": None if counted_at is None else round(counted_at - t0, 2),
        "census": census,
        "records_per_s": round((size + len(follow)) / max(inputs_at - t0, 1e-6), 1),
        "replies": fates["review"], "commands": fates["suspend"],
        "by_definition": dict(sorted(by_definition.items())),
        "waits_by_state": stats.get("waits"),
        "expected_by_state": dict(run.expected),
        "loadavg_after": list(os.getloadavg()),
    }


def measure_api(run: Run, worker: WorkerProcess) -> dict[str, Any]:
    """Status of random parked keys and first pages of the list, through the web API."""
    a = run.args
    rng = random.Random(a.seed * 7919 + run.planned_n)
    status_ms: list[float] = []
    codes: Counter[int] = Counter()
    for _ in range(a.status_samples):
        w = planned(a.seed, rng.randrange(run.planned_n), a.review_fraction, a.suspend_fraction)
        code, ms, _body = http_get(f"{worker.url}/xwait/api/waits/{w.key}", 30)
        codes[code] += 1
        status_ms.append(ms)
    list_ms: list[float] = []
    returned: list[int] = []
    list_codes: Counter[int] = Counter()
    began = time.monotonic()
    while len(list_ms) < a.list_samples and (
            len(list_ms) < LIST_MIN or time.monotonic() - began < LIST_BUDGET_S):
        code, ms, body = http_get(f"{worker.url}/xwait/api/waits?limit={a.list_limit}", 900)
        list_codes[code] += 1
        list_ms.append(ms)
        returned.append(len((body or {}).get("waits", [])) if isinstance(body, dict) else 0)
    out: dict[str, Any] = {
        "status_ms": spread(status_ms) | {"codes": {str(k): v for k, v in codes.items()}},
        "list_ms": spread(list_ms) | {"codes": {str(k): v for k, v in list_codes.items()},
                                      "limit": a.list_limit, "returned": returned[:1]},
    }
    if a.cli:
        out["cli"] = cli_times(run, worker)
    return out


def cli_times(run: Run, worker: WorkerProcess) -> dict[str, Any]:
    """`xwait status KEY` and `xwait list` as a user runs them: process start included."""
    a = run.args
    key = planned(a.seed, 0, a.review_fraction, a.suspend_fraction).key
    env = {**os.environ, "XWAIT_CONSOLE_URL": worker.url}
    found: dict[str, Any] = {}
    for name, argv in (("status_s", [str(XWAIT), "status", key, "--json"]),
                       ("list_s", [str(XWAIT), "list", "--limit", str(a.list_limit), "--json"])):
        started = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, timeout=900, check=False)
        found[name] = round(time.perf_counter() - started, 3)
        found[name.replace("_s", "_exit")] = done.returncode
    return found


def tick_cost(stats: dict[str, Any] | None) -> dict[str, Any]:
    lat = (stats or {}).get("latencyMs", {})
    tick, scan = lat.get("tick", {}), lat.get("scan_us", {})
    return {"tick_p50_ms": tick.get("p50"), "tick_p99_ms": tick.get("p99"),
            "tick_n": tick.get("n"), "scan_us_p50": scan.get("p50"),
            "scan_us_p99": scan.get("p99"), "scan_n": scan.get("n")}


def memory(worker: WorkerProcess) -> dict[str, Any]:
    pid = worker.pid
    rss = proc_status_kib(pid, "VmRSS") if pid else None
    hwm = proc_status_kib(pid, "VmHWM") if pid else None
    return {"rss_mib": None if rss is None else round(rss / 1024, 1),
            "vmhwm_mib": None if hwm is None else round(hwm / 1024, 1)}


def park_sample(run: Run, n: int) -> dict[str, Any]:
    """`--sample` waits whose deadline is `--sample-deadline` away; they must each end once."""
    worker = run.active
    assert worker is not None
    a = run.args
    keys = [sample_key(a.seed, n, j) for j in range(a.sample)]
    base = counters(worker)["processed.requests"]
    for j, key in enumerate(keys):
        send(run, run.settings.topic("requests"),
             key, start_record(key, SAMPLE_DEFINITION, -j, a.sample_deadline))
    flush(run)
    run.samples_parked += len(keys)
    due = time.time() + parse_duration_ms(a.sample_deadline) / 1000
    watch(worker, lambda st: int((st or {}).get("counters", {}).get("processed.requests", 0))
          >= base + len(keys), lambda st: (st or {}).get("counters", {}).get(
              "processed.requests"), "the sample to park")
    return {"keys": keys, "due_wall": due}


def check_sample(run: Run, sample: dict[str, Any]) -> dict[str, Any]:
    """Every sample wait has exactly one outcome on the outcomes topic."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    keys: set[str] = set(sample["keys"])
    s = run.settings
    consumer = Consumer(s.confluent(**{
        "group.id": f"{s.app_id}-scale-sample-{secrets.token_hex(3)}",
        "enable.auto.commit": False, "isolation.level": "read_committed"}))
    consumer.assign([TopicPartition(s.topic("outcomes"), p, OFFSET_BEGINNING)
                     for p in range(s.partitions)])
    seen: Counter[str] = Counter()
    ids: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    # Wait for the deadlines, then until every key has its outcome, then a while
    # longer, so that a second outcome of a key would be seen too.
    # From the deadline, or from now when the phases before took longer: at 1M
    # the restore and the standby's catch-up outlast the deadline and the
    # timeout together, and the check gave up before reading anything.
    give_up = max(sample["due_wall"], time.time()) + run.args.sample_timeout
    complete_at: float | None = None
    try:
        while True:
            for msg in consumer.consume(1000, timeout=0.5):
                if msg.error() is not None:
                    continue
                key = (msg.key() or b"").decode(errors="replace")
                if key not in keys:
                    continue
                seen[key] += 1
                try:
                    outcome = codec.decode(RecordType.OUTCOME, msg.value())
                    ids[str(outcome["outcomeId"])] += 1
                    kinds[f"{outcome['outcome']}/{outcome['reason']}"] += 1
                except codec.CodecError:
                    kinds["undecodable"] += 1
            now = time.time()
            if complete_at is None and len(seen) == len(keys):
                complete_at = now
            if complete_at is not None and now - complete_at >= run.args.sample_linger:
                break
            if now > give_up:
                break
    finally:
        consumer.close()
    counts = Counter(seen[k] for k in keys)
    return {
        "waits": len(keys), "deadline": run.args.sample_deadline,
        "with_one_outcome": counts[1], "without_outcome": counts[0],
        "with_several": sum(v for c, v in counts.items() if c > 1),
        "duplicate_outcome_ids": sum(c - 1 for c in ids.values() if c > 1),
        "outcomes": dict(kinds),
        "last_outcome_after_due_s": (None if complete_at is None
                                     else round(complete_at - sample["due_wall"], 1)),
        "exactly_once": counts[1] == len(keys),
    }


def await_census(worker: WorkerProcess, expected: int, grace_s: float
                 ) -> tuple[float | None, dict[str, Any]]:
    """Wait (at most grace_s) until the census counts `expected` waits, done ones included.

    Returns when it did (None if it did not) and what it counted: a wait the
    census lacks is a row the worker does not hold, whose timers never fire.
    """
    counted: float | None = None
    end = time.monotonic() + grace_s
    stats: dict[str, Any] | None = None
    while True:
        if worker.proc is not None and worker.proc.poll() is not None:
            raise BenchError(f"worker {worker.name} exited while its census was awaited")
        stats = worker.stats()
        if stats is not None and all_waits(stats) >= expected:
            counted = time.monotonic()
            break
        if time.monotonic() > end:
            break
        time.sleep(STATS_POLL_S)
    total = all_waits(stats)
    return counted, {"expected": expected, "counted": total,
                     "missing": max(0, expected - total), "by_state": (stats or {}).get("waits")}


def timed_ready(run: Run, worker: WorkerProcess, since: float, since_wall_ms: int
                ) -> dict[str, Any]:
    """Seconds from `since` until the worker owns every partition and its stream time is
    past `since_wall_ms` on each (ready); then until its census counts every wait."""
    p = run.settings.partitions
    marks: dict[str, float] = {}

    def done(st: dict[str, Any] | None) -> bool:
        now = time.monotonic()
        if len((st or {}).get("ownedPartitions", [])) == p:
            marks.setdefault("owned", now)
        if "owned" in marks and stream_time_past(st, p, since_wall_ms):
            marks.setdefault("stream", now)
        return len(marks) == 2

    def progress(st: dict[str, Any] | None) -> Any:
        # A restore makes no visible progress in stats: --ready-timeout bounds it.
        return (len(marks), (st or {}).get("ownedPartitions"), time.monotonic() // 60)

    watch(worker, done, progress, f"worker {worker.name} to be ready",
          stall_s=run.args.ready_timeout)
    counted, census = await_census(worker, run.expected_total(), COUNT_GRACE_S)
    return {"owns_every_partition_s": round(marks["owned"] - since, 2),
            "stream_time_moving_s": round(marks["stream"] - since, 2),
            "counts_every_wait_s": None if counted is None else round(counted - since, 2),
            "ready_s": round(max(marks["owned"], marks["stream"]) - since, 2),
            "census": census}


def restart(run: Run) -> dict[str, Any]:
    worker = run.active
    assert worker is not None
    stop_began = time.monotonic()
    worker.stop(120)
    stopped = time.monotonic()
    wall = int(time.time() * 1000)
    worker.start(wait_owned=False)
    started = worker.started_at or time.monotonic()
    got = timed_ready(run, worker, started, wall)
    got["stop_s"] = round(stopped - stop_began, 2)
    return got


def net_rate(rows: int, seconds: float | None, baseline: float | None) -> float | None:
    """Rows/s once the fixed cost of a start (the restart's ready time) is taken off."""
    if seconds is None or baseline is None or seconds - baseline <= 0.5:
        return None
    return round(rows / (seconds - baseline), 1)


def restore(run: Run) -> dict[str, Any]:
    old = run.active
    assert old is not None
    ends = changelog_ends(run.settings)
    run.retire(old)
    fresh = run.new_worker("restore")
    wall = int(time.time() * 1000)
    fresh.start(wait_owned=False)
    started = fresh.started_at or time.monotonic()
    run.active = fresh
    got = timed_ready(run, fresh, started, wall)
    rows = run.expected_total()
    got["rows"] = rows
    got["changelog_records"] = sum(e + 1 for e in ends.values())
    got["rows_per_s"] = round(rows / got["ready_s"], 1) if got["ready_s"] else None
    got["changelog_records_per_s"] = (round(got["changelog_records"] / got["ready_s"], 1)
                                      if got["ready_s"] else None)
    return got


def standby(run: Run) -> dict[str, Any]:
    first = run.active
    assert first is not None
    second = run.new_worker("standby")
    second.start(wait_owned=False)
    joined = time.monotonic()
    p = run.settings.partitions
    # Caught up: every partition's database of the second worker holds the
    # changelog up to its last record (its active ones and its standbys).
    lag: dict[str, Any] = {}

    def caught_up(_st: dict[str, Any] | None) -> bool:
        ends = changelog_ends(run.settings)
        held = persisted_offsets(second)
        behind = {q: ends[q] - held.get(q, -1) for q in range(p) if held.get(q, -1) < ends[q]}
        lag["behind"] = sum(behind.values())
        lag["partitions_behind"] = sorted(behind)
        return (len(held) == p and lag["behind"] < STANDBY_SLACK
                and bool((second.stats() or {}).get("ownedPartitions")))

    # Bounded: a standby that stops making progress (or never starts) is
    # reported as such, and the takeover is measured anyway.
    began, moved, last = time.monotonic(), time.monotonic(), None
    settled: float | None = None
    while time.monotonic() - began < run.args.standby_wait:
        if second.proc is not None and second.proc.poll() is not None:
            raise BenchError(f"worker {second.name} exited while its standbys caught up")
        if caught_up(None):
            settled = time.monotonic()
            break
        if lag.get("behind") != last:
            last, moved = lag.get("behind"), time.monotonic()
        elif time.monotonic() - moved > STANDBY_STALL_S:
            break
        time.sleep(1.0)
    shared = second.stats() or {}
    time.sleep(1.0)
    wall = int(time.time() * 1000)
    stop_began = time.monotonic()
    first.stop(120)  # SIGTERM: leaves the group at once
    stopped = time.monotonic()
    got = timed_ready(run, second, stop_began, wall)
    got["caught_up"] = settled is not None
    got["catch_up_s"] = None if settled is None else round(settled - joined, 2)
    got["waited_s"] = round(stop_began - joined, 2)
    got["behind_at_stop"] = lag.get("behind")
    got["partitions_behind_at_stop"] = lag.get("partitions_behind")
    got["second_owned_before"] = shared.get("ownedPartitions")
    got["first_stop_s"] = round(stopped - stop_began, 2)
    run.retire(first)
    run.active = second
    return got


def checkpoint(run: Run, n: int) -> dict[str, Any]:
    a = run.args
    cp: dict[str, Any] = {"n": n, "loadavg_before": list(os.getloadavg()), "skipped": {},
                          "errors": []}
    run.result["checkpoints"].append(cp)
    # Two workers' copies (during the standby phase) and the broker's topics.
    need = run.result.get("_bytes_per_wait", 1000) * (n - run.planned_n) * 4
    if free_bytes(run.folder) < need:
        raise BenchError(f"about {need / 2**30:.1f} GiB would be needed for {n} waits; "
                         f"{free_bytes(run.folder) / 2**30:.1f} GiB are free")
    say(f"checkpoint {n}: parking {n - run.planned_n} waits")
    cp["segment"] = park_segment(run, n)
    worker = run.active
    assert worker is not None
    say(f"checkpoint {n}: {cp['segment']['parks_per_s']} parks/s; measuring")
    stats = worker.stats()
    cp["waits_by_state"] = (stats or {}).get("waits")
    cp["armed_timers"] = (stats or {}).get("armedTimers")
    cp["memory"] = memory(worker)
    disk = du_bytes(worker.data_dir)
    rows = run.expected_total()
    cp["disk"] = {"bytes": disk, "mib": round(disk / MIB, 1), "rows": rows,
                  "bytes_per_wait": round(disk / max(rows, 1), 1)}
    run.result["_bytes_per_wait"] = max(300.0, disk / max(rows, 1))
    cp["tick_under_load"] = tick_cost(stats)
    cp["api"] = measure_api(run, worker)
    cp["loadavg_measured"] = list(os.getloadavg())
    run.write()
    sample = park_sample(run, n) if a.sample else None
    if a.skip_restart_above is not None and n > a.skip_restart_above:
        cp["skipped"]["restart"] = f"N={n} above --skip-restart-above {a.skip_restart_above}"
    else:
        say(f"checkpoint {n}: restart on its own disk")
        cp["restart"] = restart(run)
        time.sleep(TICK_SETTLE_S)
        cp["tick_idle"] = tick_cost(worker.stats())
        cp["memory_after_restart"] = memory(worker)
        run.write()
    if a.skip_restore_above is not None and n > a.skip_restore_above:
        cp["skipped"]["restore"] = f"N={n} above --skip-restore-above {a.skip_restore_above}"
    else:
        say(f"checkpoint {n}: restore on an empty disk")
        cp["restore"] = restore(run)
        cp["restore"]["rows_per_s_net_of_restart"] = net_rate(
            cp["restore"]["rows"], cp["restore"]["ready_s"], dig(cp, "restart", "ready_s"))
        run.write()
    if a.skip_standby_above is not None and n > a.skip_standby_above:
        cp["skipped"]["standby"] = f"N={n} above --skip-standby-above {a.skip_standby_above}"
    else:
        say(f"checkpoint {n}: standby takeover")
        cp["standby"] = standby(run)
        run.write()
    if sample is not None:
        say(f"checkpoint {n}: checking the sample's outcomes")
        cp["sample"] = check_sample(run, sample)
        run.samples_done += len(sample["keys"])
    cp["loadavg_after"] = list(os.getloadavg())
    run.write()
    return cp


# -- reporting -----------------------------------------------------------------------------


def dig(d: Any, *path: str) -> Any:
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)
    return d


def figure_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One flat row of the headline figures per checkpoint."""
    rows = []
    for cp in result.get("checkpoints", []):
        tick = cp.get("tick_idle") or cp.get("tick_under_load") or {}
        rows.append({
            "n": cp["n"],
            "rss_mib": dig(cp, "memory", "rss_mib"),
            "vmhwm_mib": dig(cp, "memory", "vmhwm_mib"),
            "bytes_per_wait": dig(cp, "disk", "bytes_per_wait"),
            "parks_per_s": dig(cp, "segment", "parks_per_s"),
            "tick_p50_ms": tick.get("tick_p50_ms"), "tick_p99_ms": tick.get("tick_p99_ms"),
            "scan_us_p50": tick.get("scan_us_p50"), "scan_us_p99": tick.get("scan_us_p99"),
            "status_p50_ms": dig(cp, "api", "status_ms", "p50"),
            "status_p99_ms": dig(cp, "api", "status_ms", "p99"),
            "list_p50_ms": dig(cp, "api", "list_ms", "p50"),
            "list_p99_ms": dig(cp, "api", "list_ms", "p99"),
            "restart_ready_s": dig(cp, "restart", "ready_s"),
            "restore_rows_per_s": dig(cp, "restore", "rows_per_s"),
            "restore_ready_s": dig(cp, "restore", "ready_s"),
            "standby_takeover_s": dig(cp, "standby", "ready_s"),
            "sample_exactly_once": dig(cp, "sample", "exactly_once"),
            "lost_waits": lost_waits(cp),
            "loadavg": cp.get("loadavg_measured") or cp.get("loadavg_before"),
        })
    return rows


PHASES = ("segment", "restart", "restore", "standby")


def lost_waits(cp: dict[str, Any]) -> dict[str, int] | None:
    """Per phase of a checkpoint: waits the worker should hold and its census lacks."""
    found = {phase: int(dig(cp, phase, "census", "missing"))
             for phase in PHASES if dig(cp, phase, "census", "missing") is not None}
    return found or None


def _ratio(a: Any, b: Any) -> float | None:
    if a is None or b is None or not b:
        return None
    return round(float(a) / float(b), 3)


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's done-when figures, judged at the largest checkpoint that measured each."""
    rows = figure_rows(result)
    out: list[dict[str, Any]] = []

    def last(name: str) -> dict[str, Any] | None:
        having = [r for r in rows if r.get(name) is not None]
        return having[-1] if having else None

    def add(name: str, want: str, at: dict[str, Any] | None, value: Any, ok: bool | None,
            **extra: Any) -> None:
        out.append({"target": name, "want": want, "at_n": None if at is None else at["n"],
                    "value": value, "ok": ok, "final": at is not None and at["n"] >= 10_000_000,
                    **extra})

    r = last("rss_mib")
    add("rss", f"RSS <= {RSS_LIMIT_MIB:.0f} MiB at 10M", r, r and r["rss_mib"],
        None if r is None else r["rss_mib"] <= RSS_LIMIT_MIB,
        vmhwm_mib=r and r["vmhwm_mib"])
    first = rows[0] if rows else None
    r = last("parks_per_s")
    ratio = _ratio(r and r["parks_per_s"], first and first["parks_per_s"])
    add("parks_ratio", f"parks/s at 10M >= {PARKS_RATIO_MIN} x parks/s at 10k", r, ratio,
        None if ratio is None or r is first else ratio >= PARKS_RATIO_MIN)
    r = last("tick_p50_ms")
    tick = _ratio(r and r["tick_p50_ms"], first and max(first["tick_p50_ms"] or 0, 1))
    scan = _ratio(r and r["scan_us_p50"], first and max(first["scan_us_p50"] or 0, 1))
    add("tick_ratio", f"tick cost at 10M / at 10k <= {TICK_RATIO_MAX} (tick p50 and scan_us "
        "p50)", r, {"tick_p50": tick, "scan_us_p50": scan},
        None if tick is None or scan is None or r is first
        else tick <= TICK_RATIO_MAX and scan <= TICK_RATIO_MAX)
    for figure, label in (("status_p99_ms", "status"), ("list_p99_ms", "list")):
        r = last(figure)
        add(label, f"{label} through the web API <= {API_LIMIT_MS:.0f} ms (p99) at 10M", r,
            r and r[figure], None if r is None else r[figure] <= API_LIMIT_MS,
            p50=r and r[figure.replace("p99", "p50")])
    r = last("restart_ready_s")
    add("restart", f"restart on its own disk ready <= {RESTART_LIMIT_S:.0f} s at 10M", r,
        r and r["restart_ready_s"], None if r is None else r["restart_ready_s"]
        <= RESTART_LIMIT_S)
    restored, took = last("restore_rows_per_s"), last("standby_takeover_s")
    ok_restore = None if restored is None else restored["restore_rows_per_s"] >= RESTORE_MIN_ROWS_S
    ok_standby = None if took is None else took["standby_takeover_s"] <= STANDBY_LIMIT_S
    add("failover", f"restore >= {RESTORE_MIN_ROWS_S:.0f} rows/s or standby takeover <= "
        f"{STANDBY_LIMIT_S:.0f} s at 1M", took or restored,
        {"restore_rows_per_s": restored and restored["restore_rows_per_s"],
         "restore_at_n": restored and restored["n"],
         "standby_takeover_s": took and took["standby_takeover_s"],
         "standby_at_n": took and took["n"]},
        None if ok_restore is None and ok_standby is None
        else bool(ok_restore) or bool(ok_standby))
    counted = [r for r in rows if r["lost_waits"] is not None]
    lost = {f"{r['n']}/{phase}": k for r in counted for phase, k in r["lost_waits"].items() if k}
    add("no_lost_waits", "after parking and after each restart and failover the worker holds "
        "every wait (its census counts them all)", counted[-1] if counted else None, lost,
        None if not counted else not lost)
    checked = [r for r in rows if r["sample_exactly_once"] is not None]
    add("timers_exactly_once", "every sample wait ends exactly once after each checkpoint's "
        "restart and failovers", checked[-1] if checked else None,
        [r["n"] for r in checked if not r["sample_exactly_once"]],
        None if not checked else all(r["sample_exactly_once"] for r in checked))
    return out


def _fmt(v: Any, digits: int = 0) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float | int):
        return f"{v:,.{digits}f}"
    return str(v)


def table(result: dict[str, Any]) -> str:
    """The figures per checkpoint as a Markdown table, then the targets."""
    head = ("| N | RSS MiB (HWM) | disk B/wait | parks/s | tick p50/p99 ms | scan p50/p99 us | "
            "status p50/p99 ms | list p50/p99 ms | restart s | restore rows/s (s) | "
            "standby s | sample once | lost | load 1/5/15 |")
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    for r in figure_rows(result):
        load = r["loadavg"] or []
        lines.append(
            f"| {r['n']:,} | {_fmt(r['rss_mib'])} ({_fmt(r['vmhwm_mib'])}) | "
            f"{_fmt(r['bytes_per_wait'])} | {_fmt(r['parks_per_s'])} | "
            f"{_fmt(r['tick_p50_ms'])}/{_fmt(r['tick_p99_ms'])} | "
            f"{_fmt(r['scan_us_p50'])}/{_fmt(r['scan_us_p99'])} | "
            f"{_fmt(r['status_p50_ms'], 1)}/{_fmt(r['status_p99_ms'], 1)} | "
            f"{_fmt(r['list_p50_ms'])}/{_fmt(r['list_p99_ms'])} | "
            f"{_fmt(r['restart_ready_s'], 1)} | "
            f"{_fmt(r['restore_rows_per_s'])} ({_fmt(r['restore_ready_s'], 1)}) | "
            f"{_fmt(r['standby_takeover_s'], 1)} | {_fmt(r['sample_exactly_once'])} | "
            f"{_fmt(sum((r['lost_waits'] or {}).values()) if r['lost_waits'] else None)} | "
            f"{'/'.join(f'{x:.1f}' for x in load[:3])} |")
    lines.append("")
    for t in result.get("targets") or targets(result):
        verdict = {True: "holds", False: "MISSED", None: "not measured"}[t["ok"]]
        at = f" at N={t['at_n']:,}" if t["at_n"] is not None else ""
        final = "" if t["final"] or t["ok"] is None else " (10M not run)"
        lines.append(f"* {t['target']}: {verdict}{at}{final}: {t['value']} (want {t['want']})")
    return "\n".join(lines)


PANELS: tuple[tuple[str, str, tuple[str, ...], float | None, bool], ...] = (
    # (title, y label, series, target line, log y)
    ("Resident memory", "MiB", ("rss_mib", "vmhwm_mib"), RSS_LIMIT_MIB, False),
    ("RocksDB on disk", "bytes per wait", ("bytes_per_wait",), None, False),
    ("Parks/s", "waits/s", ("parks_per_s",), None, False),
    ("Punctuator tick", "ms", ("tick_p50_ms", "tick_p99_ms"), None, False),
    ("Reading due timers (scan)", "us", ("scan_us_p50", "scan_us_p99"), None, False),
    ("Status via web API", "ms", ("status_p50_ms", "status_p99_ms"), API_LIMIT_MS, True),
    ("First page of the list via web API", "ms", ("list_p50_ms", "list_p99_ms"),
     API_LIMIT_MS, True),
    ("Restart on its own disk to ready", "s", ("restart_ready_s",), RESTART_LIMIT_S, False),
    ("Restore on an empty disk", "rows/s", ("restore_rows_per_s",), RESTORE_MIN_ROWS_S,
     False),
    ("Standby takeover to ready", "s", ("standby_takeover_s",), STANDBY_LIMIT_S, False),
)


def plot(result: dict[str, Any], path: Path) -> Path:
    """One panel per figure against N (log x); dashed red lines are the issue's targets."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = figure_rows(result)
    fig, axes = plt.subplots(3, 4, figsize=(18, 11))
    flat = list(axes.flat)
    ns = [r["n"] for r in rows] or [1]
    for ax, (title, unit, series, limit, logy) in zip(flat, PANELS, strict=False):
        drawn = False
        for name in series:
            pts = [(r["n"], r[name]) for r in rows if r.get(name) is not None]
            if pts:
                drawn = True
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
                for x, y in pts:
                    ax.annotate(f"{y:,.0f}" if abs(y) >= 10 else f"{y:.2g}", (x, y),
                                textcoords="offset points", xytext=(4, 4), fontsize=7)
        if limit is not None:
            ax.axhline(limit, color="red", linestyle="--", linewidth=1, label="target")
        if not drawn:
            ax.text(0.5, 0.5, "not measured", transform=ax.transAxes, ha="center",
                    color="grey")
        ax.set_xscale("log")
        ax.set_xlim(min(ns) / 2, max(ns) * 2)
        if logy and drawn:
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("parked waits (N)")
        ax.set_ylabel(unit)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    text_ax = flat[len(PANELS)]
    text_ax.axis("off")
    m = result.get("machine", {})
    lines = [f"{m.get('nproc')} cores, {m.get('mem_total_mib')} MiB, {m.get('cpu')}",
             f"{result.get('parameters', {}).get('partitions')} partitions, one worker",
             f"commit {str(dig(result, 'versions', 'git_commit'))[:9]}",
             "load average (1/5/15 min) at each checkpoint:"]
    for r in rows:
        load = r["loadavg"] or []
        lines.append(f"  N={r['n']:,}: " + " / ".join(f"{x:.1f}" for x in load[:3]))
    for cp in result.get("checkpoints", []):
        for phase, why in cp.get("skipped", {}).items():
            lines.append(f"  skipped {phase}: {why}")
    text_ax.text(0, 1, "\n".join(lines), va="top", fontsize=8, family="monospace")
    for ax in flat[len(PANELS) + 1:]:
        ax.axis("off")
    fig.suptitle(f"xwait scale bench, {result.get('timestamp', '')}", fontsize=12)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


# -- main ----------------------------------------------------------------------------------


def parse_checkpoints(text: str) -> list[int]:
    try:
        values = [int(x.replace("_", "")) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got "
                                         f"{text!r}") from None
    if not values or values != sorted(set(values)) or values[0] < 1:
        raise argparse.ArgumentTypeError("expected increasing numbers above zero")
    return values


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="scale_bench", description=(__doc__ or "").splitlines()[0])
    p.add_argument("--checkpoints", type=parse_checkpoints,
                   default=list(DEFAULT_CHECKPOINTS), help="parked waits at each checkpoint "
                   "(default 10000,100000,1000000,10000000)")
    p.add_argument("--partitions", type=int, default=8, help="partitions of every topic (8)")
    p.add_argument("--bootstrap", default=os.environ.get("XWAIT_BOOTSTRAP", "127.0.0.1:9092"),
                   help="Kafka bootstrap servers ($XWAIT_BOOTSTRAP or 127.0.0.1:9092)")
    p.add_argument("--out", type=Path, default=None,
                   help="JSON file (default bench/results/scale-<timestamp>.json)")
    p.add_argument("--review-fraction", type=float, default=0.02,
                   help="share of waits that get an invalid reply: in review (0.02)")
    p.add_argument("--suspend-fraction", type=float, default=0.02,
                   help="share of waits that get a SUSPEND command (0.02)")
    p.add_argument("--timer-floor", default="P1D",
                   help="timers of the shipped definitions shorter than this are raised to it, "
                        "so no wait's timer falls due during the run; 'none' keeps them (P1D)")
    p.add_argument("--sample", type=int, default=200,
                   help="waits with a short deadline parked at each checkpoint, each of which "
                        "must end exactly once after the restart and failovers (200; 0: none)")
    p.add_argument("--sample-deadline", default="PT60S", help="their deadline (PT60S)")
    p.add_argument("--sample-timeout", type=float, default=300.0,
                   help="seconds after the sample's deadline to wait for its outcomes (300)")
    p.add_argument("--sample-linger", type=float, default=10.0,
                   help="seconds to keep reading outcomes after the last sample wait ended, "
                        "to see a second outcome (10)")
    p.add_argument("--status-samples", type=int, default=20, help="status requests (20)")
    p.add_argument("--list-samples", type=int, default=10,
                   help=f"list requests (10; fewer, at least {LIST_MIN}, once they have taken "
                        f"{LIST_BUDGET_S:.0f} s)")
    p.add_argument("--list-limit", type=int, default=50, help="waits a list asks for (50)")
    p.add_argument("--no-cli", dest="cli", action="store_false",
                   help="do not also time `xwait status` and `xwait list` as processes")
    p.add_argument("--skip-restart-above", type=int, default=None, metavar="N",
                   help="no restart phase at checkpoints above N (default: always)")
    p.add_argument("--skip-restore-above", type=int, default=1_000_000, metavar="N",
                   help="no restore from an empty disk at checkpoints above N (1000000: "
                        "restoring 10M at ~5k rows/s takes half an hour)")
    p.add_argument("--skip-standby-above", type=int, default=1_000_000, metavar="N",
                   help="no standby takeover at checkpoints above N (1000000: the standby "
                        "first restores every partition, as long as a restore)")
    p.add_argument("--standby-wait", type=float, default=1800.0,
                   help="most seconds the second worker's standbys get to catch up before "
                        "the first is stopped anyway (1800)")
    p.add_argument("--ready-timeout", type=float, default=1800.0,
                   help="seconds a restart, restore or standby may take (1800)")
    p.add_argument("--seed", type=int, default=1, help="seed of the keys and the mix (1)")
    p.add_argument("--workdir", type=Path, default=None,
                   help="folder for the workers' data (default: a new temporary folder)")
    p.add_argument("--keep", action="store_true", help="keep the workers' data and logs")
    p.add_argument("--plot-only", type=Path, default=None, metavar="JSON",
                   help="run nothing: draw the plot (and print the table) of a result file")
    p.add_argument("--publish", type=Path, default=None, metavar="PNG",
                   help="also copy the plot to this (tracked) path, e.g. docs/scale.png")
    args = p.parse_args(argv)
    if args.partitions < 1:
        p.error("--partitions: expected a number above zero")
    if not (0 <= args.review_fraction and 0 <= args.suspend_fraction
            and args.review_fraction + args.suspend_fraction < 1):
        p.error("--review-fraction and --suspend-fraction: expected shares adding up below 1")
    for name in ("sample_deadline",) + (() if args.timer_floor == "none" else ("timer_floor",)):
        try:
            parse_duration_ms(getattr(args, name))
        except ValueError as exc:
            p.error(f"--{name.replace('_', '-')}: {exc}")
    return args


def publish(png: Path, target: Path | None) -> None:
    if target is not None:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(png, target)
        print(f"scale_bench: copied the plot to {target}")


def render(json_path: Path, target: Path | None) -> int:
    result = json.loads(json_path.read_text(encoding="utf-8"))
    result["targets"] = targets(result)
    png = plot(result, json_path.with_suffix(".png"))
    print(table(result))
    print(f"scale_bench: wrote {png}")
    publish(png, target)
    return 0


def _stop(signum: int, _frame: FrameType | None) -> None:
    raise Stopped(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.plot_only is not None:
        return render(args.plot_only, args.publish)
    signal.signal(signal.SIGTERM, _stop)
    started = datetime.now(UTC)
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    out: Path = args.out or REPO / "bench" / "results" / f"scale-{stamp}.json"
    prefix = f"scalebench-{secrets.token_hex(4)}"
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="scale-bench-", dir=args.workdir))
    floor = None if args.timer_floor == "none" else args.timer_floor
    changes = make_topology(folder / "topology", floor)
    settings = Settings(bootstrap=args.bootstrap, topic_prefix=prefix,
                        app_id=f"{prefix}-processor", partitions=args.partitions,
                        topology=folder / "topology", data_dir=folder / "data")
    result: dict[str, Any] = {
        "benchmark": "scale_bench", "complete": False,
        "timestamp": started.isoformat(timespec="seconds"),
        "parameters": {
            "checkpoints": args.checkpoints, "partitions": args.partitions, "workers": 1,
            "bootstrap": args.bootstrap, "topic_prefix": prefix, "seed": args.seed,
            "definitions": list(SHIPPED), "review_fraction": args.review_fraction,
            "suspend_fraction": args.suspend_fraction, "timer_floor": args.timer_floor,
            "sample": args.sample, "sample_deadline": args.sample_deadline,
            "sample_definition": SAMPLE_DEFINITION,
            "status_samples": args.status_samples, "list_samples": args.list_samples,
            "list_limit": args.list_limit,
            "skip_restart_above": args.skip_restart_above,
            "skip_restore_above": args.skip_restore_above,
            "skip_standby_above": args.skip_standby_above,
            "guarantee": settings.guarantee.value, "timer_tick_s": settings.timer_tick,
            "workdir": str(folder),
        },
        "topology_changes": changes,
        "machine": machine(), "versions": versions(),
        "checkpoints": [], "errors": [], "_t0": time.monotonic(),
    }
    run = Run(args, settings, folder, out, result)
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    run.admin = AdminClient(settings.confluent())
    reachable = False
    say(f"prefix {prefix}, data in {folder}, result {out}")
    try:
        try:
            run.admin.list_topics(timeout=10)
        except KafkaException as exc:
            raise BenchError(f"the broker at {args.bootstrap} did not answer a metadata "
                             "request; is it running (scripts/kafka start)?") from exc
        reachable = True
        topics.create(settings, topics.load_specs(settings))
        run.producer = make_producer(settings)
        run.active = run.new_worker("park")
        run.active.start(wait_owned=False)
        watch(run.active, lambda st: len((st or {}).get("ownedPartitions", []))
              == settings.partitions, lambda st: (st or {}).get("ownedPartitions"),
              "the worker to own every partition")
        for n in args.checkpoints:
            checkpoint(run, n)
            say("\n" + table(result))
        result["complete"] = True
    except (Exception, Stopped, KeyboardInterrupt) as exc:  # still write what was measured
        result["errors"].append(f"{type(exc).__name__}: {exc}")
        say(f"ERROR {type(exc).__name__}: {exc}")
        if result["checkpoints"]:
            result["checkpoints"][-1]["errors"].append(f"{type(exc).__name__}: {exc}")
        result["worker_log_tails"] = {w.name: w.log_tail(30) for w in run.workers}
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        result["final_stats"] = run.active.stats() if run.active is not None else None
        for w in run.workers:
            w.stop(60)
        result["loadavg_at_end"] = list(os.getloadavg())
        if run.producer is not None:
            run.producer.flush(10)
        result["topics_deleted"] = (len(delete_topics(run.admin, settings))
                                    if reachable else 0)
        if args.keep:
            result["kept"] = str(folder)
        else:
            shutil.rmtree(folder, ignore_errors=True)
        run.write()
    final = json.loads(out.read_text(encoding="utf-8"))
    png = plot(final, out.with_suffix(".png"))
    print(table(final))
    say(f"wrote {out} and {png}")
    publish(png, args.publish)
    return 0 if result["complete"] else 1


__all__ = ["figure_rows", "main", "planned", "plot", "stretch_topology", "table", "targets"]


if __name__ == "__main__":
    sys.exit(main())
