"""The phases of a scale run on one worker: park a segment, measure at the checkpoint, restart
on its own disk, restore on an empty one, hand over to a standby, check a sample's timers."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from streams import codec
from streams.codec import RecordType
from streams.config import Settings
from streams.core.durations import parse_duration_ms
from streams.testing.harness import BenchError
from streams.testing.harness.figures import summary
from streams.testing.harness.kafka import changelog_ends, close, key_text, reader
from streams.testing.harness.producing import Sender
from streams.testing.harness.results import write_json
from streams.testing.harness.scratch import Scratch
from streams.testing.harness.worker import counters, watch
from streams.testing.scale.report import targets
from streams.testing.scale.waits import (
    SAMPLE_DEFINITION,
    Planned,
    invalid_reply,
    planned,
    sample_key,
    start_record,
    suspend_command,
)
from streams.testing.workers import XWAIT, WorkerProcess, proc_status_kib

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

def all_waits(stats: dict[str, Any] | None) -> int:
    """Every wait the census counts, done ones included (their rows are kept for days)."""
    return sum(int(n) for n in (stats or {}).get("waits", {}).values())


def stream_time_past(stats: dict[str, Any] | None, partitions: int, wall_ms: int) -> bool:
    """Every partition's stream time is at or past `wall_ms` (so its timers fire)."""
    times = (stats or {}).get("streamTime", {})
    return len(times) == partitions and min(int(t) for t in times.values()) >= wall_ms

def persisted_offsets(worker: WorkerProcess) -> dict[int, int]:
    """The changelog offset each partition database of a running worker holds, actives
    and standbys (`changelogOffsets` of /xwait/stats)."""
    offsets = (worker.stats() or {}).get("changelogOffsets") or {}
    return {int(p): int(o) for p, o in offsets.items() if o is not None}



@dataclass(frozen=True)
class ScalePlan:
    """What a run does (bench/scale_bench.py's options; bench/restore_bench.py uses the
    parking and restore phases with these defaults)."""

    checkpoints: tuple[int, ...] = (10_000, 100_000, 1_000_000, 10_000_000)
    partitions: int = 8
    bootstrap: str = "127.0.0.1:9092"
    review_fraction: float = 0.02
    suspend_fraction: float = 0.02
    timer_floor: str | None = "P1D"  # None: the definitions' own timers
    sample: int = 200
    sample_deadline: str = "PT60S"
    sample_timeout: float = 300.0
    sample_linger: float = 10.0
    status_samples: int = 20
    list_samples: int = 10
    list_limit: int = 50
    cli: bool = True
    skip_restart_above: int | None = None
    skip_restore_above: int | None = 1_000_000
    skip_standby_above: int | None = 1_000_000
    standby_wait: float = 1800.0
    ready_timeout: float = 1800.0
    seed: int = 1


@dataclass
class Run:
    plan: ScalePlan
    scratch: Scratch
    out: Path
    result: dict[str, Any]
    sender: Sender
    active: WorkerProcess | None = None
    planned_n: int = 0  # waits 0..planned_n-1 produced
    expected: Counter[str] = field(default_factory=Counter)  # open waits by state
    samples_done: int = 0  # sample waits checked (ended by their deadline, rows kept)
    samples_parked: int = 0  # sample waits parked so far
    incarnation: int = 0
    started: float = field(default_factory=time.monotonic)

    @property
    def settings(self) -> Settings:
        return self.scratch.settings

    @property
    def worker(self) -> WorkerProcess:
        """The worker the run measures now."""
        if self.active is None:
            raise BenchError("no worker is running")
        return self.active

    def expected_total(self) -> int:
        """Waits the worker must hold: every wait parked, sample waits included."""
        return sum(self.expected.values()) + self.samples_parked

    def new_worker(self, role: str) -> WorkerProcess:
        self.incarnation += 1
        return self.scratch.worker(f"{self.incarnation}-{role}")

    def retire(self, worker: WorkerProcess) -> None:
        """Stop a worker for good and free its disk (a 10M copy is gigabytes)."""
        worker.stop(120)
        shutil.rmtree(worker.data_dir, ignore_errors=True)

    def close(self) -> None:
        """After the scratch is cleaned up: what went wrong, what it deleted (or kept), the
        result written."""
        for error in self.scratch.errors:
            say(f"ERROR {error}")
        if self.scratch.tails:
            self.result["worker_log_tails"] = self.scratch.tails
        self.result["topics_deleted"] = self.scratch.topics_deleted
        if self.scratch.keep:
            self.result["kept"] = str(self.scratch.folder)
        self.write()

    def write(self) -> None:
        """The result as it stands (after every phase: a run of hours keeps what it got)."""
        self.result["duration_s"] = round(time.monotonic() - self.started, 1)
        data = {k: v for k, v in self.result.items() if not k.startswith("_")}
        data["targets"] = targets(data)
        write_json(self.out, data)


def big_batches(settings: Settings) -> Sender:
    """A producer that outruns the worker by far (big batches), so that parks/s is the
    worker's rate."""
    return Sender(settings, **{"linger.ms": 20, "batch.size": 1_000_000,
                               "queue.buffering.max.messages": 500_000,
                               "queue.buffering.max.kbytes": 262_144})


def say(text: str) -> None:
    print(f"scale_bench {datetime.now(UTC).strftime('%H:%M:%S')} {text}", flush=True)


def park_segment(run: Run, n: int) -> dict[str, Any]:
    """Produce waits planned_n..n-1 and wait until the worker has taken and counted them."""
    worker = run.worker
    a, s = run.plan, run.settings
    start = run.planned_n
    base = counters(worker)
    requests, replies, commands = s.topic("requests"), s.topic("replies"), s.topic("commands")
    follow: list[Planned] = []
    by_definition: Counter[str] = Counter()
    t0 = time.monotonic()
    for i in range(start, n):
        w = planned(a.seed, i, a.review_fraction, a.suspend_fraction)
        run.sender.send(requests, w.key, start_record(w.key, w.definition, i))
        by_definition[w.definition] += 1
        if w.fate != "park":
            follow.append(w)
        if i % 5000 == 0:
            run.sender.producer.poll(0)
    produced = time.monotonic()
    # Replies and commands after the requests: appended later, decided after them.
    for w in follow:
        if w.fate == "review":
            run.sender.send(replies, w.key, invalid_reply(w.key, w.definition))
        else:
            run.sender.send(commands, w.key, suspend_command(w.key))
    run.sender.flush(300)
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
    a = run.plan
    rng = random.Random(a.seed * 7919 + run.planned_n)  # noqa: S311 - reproducible keys
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
        "status_ms": summary(status_ms, 2, "n") | {"codes": {str(k): v for k, v in codes.items()}},
        "list_ms": summary(list_ms, 2, "n") | {"codes": {str(k): v for k, v in list_codes.items()},
                                      "limit": a.list_limit, "returned": returned[:1]},
    }
    if a.cli:
        out["cli"] = cli_times(run, worker)
    return out


def cli_times(run: Run, worker: WorkerProcess) -> dict[str, Any]:
    """`xwait status KEY` and `xwait list` as a user runs them: process start included."""
    a = run.plan
    key = planned(a.seed, 0, a.review_fraction, a.suspend_fraction).key
    env = {**os.environ, "XWAIT_CONSOLE_URL": worker.url}
    found: dict[str, Any] = {}
    for name, argv in (("status_s", [str(XWAIT), "status", key, "--json"]),
                       ("list_s", [str(XWAIT), "list", "--limit", str(a.list_limit), "--json"])):
        started = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True,  # noqa: S603 - xwait itself
                              timeout=900, check=False)
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
    worker = run.worker
    a = run.plan
    keys = [sample_key(a.seed, n, j) for j in range(a.sample)]
    base = counters(worker)["processed.requests"]
    for j, key in enumerate(keys):
        run.sender.send(run.settings.topic("requests"), key,
                        start_record(key, SAMPLE_DEFINITION, -j, a.sample_deadline))
    run.sender.flush(300)
    run.samples_parked += len(keys)
    due = time.time() + parse_duration_ms(a.sample_deadline) / 1000
    watch(worker, lambda st: int((st or {}).get("counters", {}).get("processed.requests", 0))
          >= base + len(keys), lambda st: (st or {}).get("counters", {}).get(
              "processed.requests"), "the sample to park")
    return {"keys": keys, "due_wall": due}


def check_sample(run: Run, sample: dict[str, Any]) -> dict[str, Any]:
    """Every sample wait has exactly one outcome on the outcomes topic."""
    keys: set[str] = set(sample["keys"])
    s = run.settings
    consumer = reader(s, [s.topic("outcomes")], f"{s.app_id}-scale-sample")
    seen: Counter[str] = Counter()
    ids: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    # Wait for the deadlines, then until every key has its outcome, then a while
    # longer, so that a second outcome of a key would be seen too.
    # From the deadline, or from now when the phases before took longer: at 1M
    # the restore and the standby's catch-up outlast the deadline and the
    # timeout together, and the check gave up before reading anything.
    give_up = max(sample["due_wall"], time.time()) + run.plan.sample_timeout
    complete_at: float | None = None
    try:
        while True:
            for msg in consumer.consume(1000, timeout=0.5):
                if msg.error() is not None:
                    continue
                key = key_text(msg)
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
            if complete_at is not None and now - complete_at >= run.plan.sample_linger:
                break
            if now > give_up:
                break
    finally:
        close(consumer)
    counts = Counter(seen[k] for k in keys)
    return {
        "waits": len(keys), "deadline": run.plan.sample_deadline,
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
          stall_s=run.plan.ready_timeout)
    counted, census = await_census(worker, run.expected_total(), COUNT_GRACE_S)
    return {"owns_every_partition_s": round(marks["owned"] - since, 2),
            "stream_time_moving_s": round(marks["stream"] - since, 2),
            "counts_every_wait_s": None if counted is None else round(counted - since, 2),
            "ready_s": round(max(marks["owned"], marks["stream"]) - since, 2),
            "census": census}


def restart(run: Run) -> dict[str, Any]:
    worker = run.worker
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
    old = run.worker
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
    first = run.worker
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
    while time.monotonic() - began < run.plan.standby_wait:
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
