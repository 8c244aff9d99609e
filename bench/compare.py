"""xwait, the raw and faust pipes and the bench kit's peers side by side on one broker.

Run: ``make compare`` or ``.venv/bin/python bench/compare.py [--rounds 2] [--waits 20000]
[--rate 500] [--seconds 120] [--systems xwait,rawpipe,faustpipe,pypeer,kstreams]
[--workloads drain,storm,open] [--kit ../shared/bench-kit]``. See bench/README.md.

The yardstick is the bench kit (``--kit``, by default ``../shared/bench-kit`` beside the
repository), used as it is: its ``loadgen.py`` drives and measures every system from outside,
``rawpipe.py`` is the floor a Kafka client can move, ``pypeer.py`` and ``kstreams/`` are the same
rules in plain Python and in Kafka Streams.  Beside them, ``bench/faustpipe.py`` does the raw
pipe's work but takes its records through faust's fetch, the way the worker did until it
fetched its inputs itself: what faust's fetch alone costs.
One run of this script:

1. builds the Kafka Streams peer once (``mvn -q package`` on a copy of ``kstreams/`` in
   ``--cache``, outside git), or skips it with a note when Java or Maven is missing;
2. warms the broker with an open run of the first system for ``--warm-up`` seconds (30),
   shown in the every-run table but not compared: twice the first run on a broker started
   minutes before was the slowest of its comparison by far (``warm_up``);
3. for each round (the systems' order reversed in every second round), for each workload,
   for each system: creates topics under a fresh prefix (8 partitions unless told), runs the
   workload with the kit's load generator, records its figures, the load average before and
   after, and deletes the topics, consumer groups and data folders of that run;
4. computes, per round, xwait's figure divided by each other system's figure in that round;
5. writes ``bench/results/compare-<ts>.json`` (every run, the machine, the versions),
   ``compare-<ts>.png`` (events/s and latency percentiles per system) and
   ``compare-latest.md`` (the table for the README's performance section).

Workloads (the throughput issue's table):

* ``drain``: W1 replies and reviews on waits whose timers are hours away
  (``--definition bench-long --mix replies``), all preloaded, then the processor starts:
  input events/s.
* ``storm``: silent waits whose 3 s deadline has passed by the time the processor starts
  (``--definition bench --mix silent``): escalations/s, the first escalation after start, and
  for xwait the timer records it wrote against the timers that fired.
* ``open``: W1 at ``--rate`` requests/s for ``--seconds``, replies on schedule
  (``--mode open``): reply->outcome p50/p99 and deadline lateness p99.

A run that fails is recorded with its error and the tail of the processor's log; the script
goes on with the next and exits 1 at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

sys.path.insert(0, str(Path(__file__).resolve().parent))

from park_bench import delete_topics, machine, versions  # noqa: E402 - the sibling module

from streams import codec, topics  # noqa: E402
from streams.codec import RecordType  # noqa: E402
from streams.config import Guarantee, Settings  # noqa: E402
from streams.partitioning import partition_for  # noqa: E402
from streams.testing.workers import XWAIT, WorkerProcess, free_port  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DEFAULT_KIT = REPO.parent / "shared" / "bench-kit"
DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "xwait-bench"
RESULTS = REPO / "bench" / "results"
SYSTEMS = ("xwait", "rawpipe", "faustpipe", "pypeer", "kstreams")
# Systems that only move preloaded records (records/s, no outcomes): the floors.
PIPES = ("rawpipe", "faustpipe")
WORKLOADS = ("drain", "storm", "open")
LABELS = {"xwait": "xwait", "rawpipe": "raw pipe", "faustpipe": "faust pipe",
          "pypeer": "Python peer", "kstreams": "Kafka Streams peer"}
AVRO_MAGIC = b"\xc3\x01"  # Avro single-object encoding; the peers write JSON
# How often xwait's /xwait/stats is read during a run (its last answer counts).  The loop lag
# it reports is that of the last complete 5-s window, so a read every 2 s sees every window.
# Answering costs the worker's event loop (the latency summaries sort 7 x 4,096 samples): read
# every 0.5 s, it was 2.5-2.8% of the loop's thread in open runs and storms (py-spy), charged to
# xwait's CPU per event; every 2 s, a quarter of that.
STATS_POLL_S = 2.0
READY_SETTLE_S = 1.0  # after the processor answered its probes, before open load starts
# The storm's processor starts this long after loadgen launches it: every preloaded request was
# stamped before the launch, so all deadlines have passed when it starts, however fast it starts
# (a peer that joins its group within the 3 s would otherwise wait for the deadlines, and its
# escalations/s would measure the clock).  The delay is taken off the storm's seconds.
DELAYED_START = ("import os, sys, time; time.sleep(float(sys.argv[1])); "
                 "os.execvp(sys.argv[2], sys.argv[2:])")


class CompareError(Exception):
    """One run could not be measured; it is recorded with this message."""


@dataclass(frozen=True)
class Workload:
    """One of the issue's workloads, as loadgen arguments and the peers' timer settings."""

    name: str
    title: str
    mode: str  # loadgen --mode
    definition: str  # the kit's waits/<definition>.yaml
    mix: str
    deadline_s: float  # the definition's deadline, for the peers and loadgen's lateness
    remind_s: float  # the definition's reminder cadence, for the peers
    headline: str  # the figure the ratios are taken of
    higher_is_better: bool


DRAIN = Workload("drain", "drain W1 (replies and reviews)", "drain", "bench-long", "replies",
                 10_800.0, 3_600.0, "events_per_s", True)
STORM = Workload("storm", "timer storm (every deadline due at once)", "drain", "bench", "silent",
                 3.0, 1.0, "escalations_per_s", True)
OPEN = Workload("open", "open W1", "open", "bench", "w1", 3.0, 1.0, "reply_p99_ms", False)
BY_NAME = {w.name: w for w in (DRAIN, STORM, OPEN)}

# The figures a ratio xwait ÷ other is computed for, per workload: (figure, higher is better)
RATIO_FIGURES: dict[str, list[tuple[str, bool]]] = {
    "drain": [("events_per_s", True), ("first_outcome_s", False), ("cpu_us_per_event", False)],
    "storm": [("escalations_per_s", True), ("first_outcome_s", False),
              ("cpu_us_per_event", False)],
    "open": [("reply_p50_ms", False), ("reply_p99_ms", False), ("lateness_p99_ms", False),
             ("cpu_us_per_event", False)],
}


def applies(system: str, workload: Workload) -> bool:
    """The pipes only move preloaded records: they have no open-loop figure."""
    return not (system in PIPES and workload.mode == "open")


def schedule(systems: list[str], workloads: list[str], rounds: int
             ) -> list[tuple[int, int, str, str]]:
    """(round, place in the round's order from 1, workload, system) in the order they run.

    Within a round every workload runs on every system before the next workload, so the runs
    a ratio compares are minutes apart; every second round reverses the systems' order, so no
    system always runs first (on a broker just warmed by another, or on a cooling machine).
    """
    out = []
    for rnd in range(1, rounds + 1):
        order = systems if rnd % 2 else systems[::-1]
        for name in workloads:
            here = [s for s in order if applies(s, BY_NAME[name])]
            out += [(rnd, i, name, s) for i, s in enumerate(here, 1)]
    return out


# -- the context of one comparison ----------------------------------------------------------


@dataclass
class Context:
    args: argparse.Namespace
    kit: Path
    python: str
    topology: Path
    scratch: Path
    jar: Path | None
    failed_logs: Path  # where the logs of a failed run are copied (under --out-dir)
    notes: list[str] = field(default_factory=list)

    @property
    def bootstrap(self) -> str:
        return str(self.args.bootstrap)

    @property
    def partitions(self) -> int:
        count: int = self.args.partitions
        return count

    def waits(self, workload: Workload) -> int:
        rate: float = self.args.rate
        seconds: float = self.args.seconds
        waits: int = self.args.waits
        return max(1, round(rate * seconds)) if workload.mode == "open" else waits


def kit_files(kit: Path) -> None:
    missing = [n for n in ("loadgen.py", "rawpipe.py", "pypeer.py", "mktopics.py",
                           "waits/bench.yaml", "waits/bench-long.yaml") if not (kit / n).exists()]
    if missing:
        raise CompareError(f"the bench kit at {kit} lacks {', '.join(missing)}; "
                           "give its folder with --kit")


def make_topology(folder: Path, kit: Path) -> Path:
    """The repository's topics.yaml and the kit's two definitions, unchanged, in one folder."""
    (folder / "waits").mkdir(parents=True)
    shutil.copy(REPO / "topology" / "topics.yaml", folder / "topics.yaml")
    for name in ("bench.yaml", "bench-long.yaml"):
        shutil.copy(kit / "waits" / name, folder / "waits" / name)
    return folder


def build_kstreams(kit: Path, cache: Path, notes: list[str]) -> Path | None:
    """The Kafka Streams peer's jar, built once per kit version into `cache`; None to skip it.

    The kit may be read-only, and Maven writes ``target/`` beside ``pom.xml``: the sources are
    copied to ``cache/kstreams-<hash of the sources>`` and built there.
    """
    java, mvn = shutil.which("java"), shutil.which("mvn")
    if java is None or mvn is None:
        notes.append("kstreams skipped: " + " and ".join(
            n for n, found in (("java", java), ("mvn", mvn)) if found is None) + " not found")
        return None
    src = kit / "kstreams"
    files = sorted(p for p in src.rglob("*") if p.is_file() and "target" not in p.parts)
    digest = hashlib.sha256()
    for p in files:
        digest.update(str(p.relative_to(src)).encode() + b"\0" + p.read_bytes())
    dest = cache / f"kstreams-{digest.hexdigest()[:12]}"
    jar = dest / "target" / "wait-peer.jar"
    if jar.exists():
        return jar
    building = cache / f"building-{uuid.uuid4().hex[:8]}"
    shutil.copytree(src, building, ignore=shutil.ignore_patterns("target"))
    for p in [building, *building.rglob("*")]:  # the kit's files may be read-only
        p.chmod(p.stat().st_mode | 0o200)
    print(f"compare: building the Kafka Streams peer in {dest} (mvn -q package)", flush=True)
    try:
        done = subprocess.run([mvn, "-q", "package"], cwd=building, capture_output=True,
                              text=True, timeout=1200, check=False)
    except subprocess.TimeoutExpired:
        notes.append("kstreams skipped: mvn package took more than 20 minutes")
        shutil.rmtree(building, ignore_errors=True)
        return None
    if done.returncode != 0 or not (building / "target" / "wait-peer.jar").exists():
        tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
        notes.append(f"kstreams skipped: mvn package failed: {' | '.join(tail)}")
        shutil.rmtree(building, ignore_errors=True)
        return None
    if dest.exists():  # another run built it meanwhile
        shutil.rmtree(building, ignore_errors=True)
    else:
        building.rename(dest)
    return jar


# -- processes --------------------------------------------------------------------------------


def tail(path: Path, lines: int = 30) -> list[str]:
    try:
        return path.read_bytes().decode(errors="replace").splitlines()[-lines:]
    except OSError:
        return []


def reap(marker: str) -> list[int]:
    """Kill (by pid) what is left of a run: processes whose command or environment holds its
    unique prefix. Only needed when the load generator itself had to be killed."""
    killed = []
    me = os.getpid()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == me:
            continue
        try:
            text = (d / "cmdline").read_bytes() + (d / "environ").read_bytes()
        except OSError:
            continue
        if marker.encode() in text:
            with contextlib.suppress(OSError):
                os.kill(int(d.name), signal.SIGKILL)
                killed.append(int(d.name))
    return killed


def run_tool(argv: list[str], log: Path, timeout: float, marker: str) -> None:
    """Run one of the kit's scripts to its end; its output goes to `log`.

    On a timeout it gets SIGINT first (loadgen then stops the processor it started), then
    SIGKILL, and anything still carrying the run's prefix is killed.
    """
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        code = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        reap(marker)
        raise CompareError(f"{Path(argv[1]).name} took more than {timeout:.0f}s") from None
    if code != 0:
        raise CompareError(f"{Path(argv[1]).name} exited with {code}: "
                           + " | ".join(tail(log, 4)))


class Peer:
    """A peer process started here (open mode); loadgen starts it itself in drain mode."""

    def __init__(self, argv: list[str], log: Path) -> None:
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        self.log = log

    def stop(self) -> None:
        if self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def wait_group_ready(admin: AdminClient, group: str, partitions: int, timeout: float,
                     alive: Callable[[], bool]) -> float:
    """Until the consumer group is stable with `partitions` input partitions assigned."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if not alive():
            raise CompareError(f"the process of group {group} exited before it was ready")
        with contextlib.suppress(KafkaException):
            found = admin.describe_consumer_groups([group], request_timeout=10)[group]
            desc = found.result(timeout=10)
            assigned = sum(len(m.assignment.topic_partitions) for m in desc.members
                           if m.assignment is not None)
            if desc.state == ConsumerGroupState.STABLE and assigned >= partitions:
                return round(time.monotonic() - t0, 2)
        time.sleep(0.5)
    raise CompareError(f"group {group} did not get its {partitions} partitions in {timeout:.0f}s")


def wait_answering(ctx: Context, plan: RunPlan, timeout: float,
                   alive: Callable[[], bool]) -> None:
    """Until the processor answers a probe request on every partition with an action.

    A consumer group that is stable may still be starting its tasks (a Kafka Streams
    application initialises its transactions and stores after the assignment): open load sent
    before then would measure the start-up. The probes are waits of their own (keys loadgen
    does not know, so it ignores their outcomes); each ends at its deadline during the run.
    """
    keys: dict[int, str] = {}
    while len(keys) < ctx.partitions:
        key = f"probe-{uuid.uuid4().hex}"
        keys.setdefault(partition_for(key.encode(), ctx.partitions), key)
    waiting = set(keys.values())
    actions = f"{plan.prefix}.actions"
    conf = {"bootstrap.servers": ctx.bootstrap}
    consumer = Consumer({**conf, "group.id": f"{plan.prefix}-probe",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    producer = Producer({**conf, "partitioner": "murmur2_random"})
    try:
        consumer.assign([TopicPartition(actions, p, OFFSET_BEGINNING)
                         for p in range(ctx.partitions)])
        now_ms = int(time.time() * 1000)
        for key in waiting:  # the StartWait loadgen sends, as JSON
            producer.produce(f"{plan.prefix}.requests", key=key.encode(), value=json.dumps({
                "correlationKey": key, "definition": plan.workload.definition,
                "tenant": "acme", "payload": "{}", "parties": [], "deadline": None,
                "requestedAt": now_ms}).encode())
        producer.flush(30)
        give_up = time.monotonic() + timeout
        while waiting:
            if not alive():
                raise CompareError("the processor exited before it answered")
            if time.monotonic() > give_up:
                raise CompareError(f"{len(waiting)} of {ctx.partitions} probe requests "
                                   f"unanswered after {timeout:.0f}s")
            for m in consumer.consume(500, timeout=0.3):
                if m.error() is None:
                    waiting.discard((m.key() or b"").decode(errors="replace"))
    finally:
        with contextlib.suppress(KafkaException, RuntimeError):
            consumer.close()


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# How often CpuSampler reads /proc: a process that exits between two reads loses at most
# this much of its CPU time (a drain's processor is stopped by loadgen at the end).
CPU_POLL_S = 0.2


def _cpu_ticks(pid: str) -> tuple[int, int] | None:
    """(utime + stime of every thread of the process, its start time) in clock ticks."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # after the command name, which may hold spaces
    return int(fields[11]) + int(fields[12]), int(fields[19])


class CpuSampler(threading.Thread):
    """CPU seconds (utime + stime, all threads) of the processor's processes over a run.

    The processor is whatever carries the run's prefix in its command line or environment,
    but the load generator and the kit's tools.  A process started before the sampler counts
    from the sampler's start (open runs: the load window only); one started after it, from
    its own start (drains: start-up included, see `startup_cpu_s` of the open runs).
    """

    EXCLUDE = (b"loadgen.py", b"mktopics.py")

    def __init__(self, marker: str) -> None:
        super().__init__(name="cpu-sampler", daemon=True)
        self.marker = marker.encode()
        self.base: dict[str, int] = {}
        self.last: dict[str, int] = {}
        self.names: dict[str, str] = {}
        self._done = threading.Event()
        with open("/proc/uptime", encoding="ascii") as f:
            self._born_after = int(float(f.read().split()[0]) * CLOCK_TICKS)

    def _sample(self) -> None:
        me = str(os.getpid())
        for d in Path("/proc").iterdir():
            pid = d.name
            if not pid.isdigit() or pid == me:
                continue
            if pid not in self.last:
                try:
                    cmdline = (d / "cmdline").read_bytes()
                    text = cmdline + (d / "environ").read_bytes()
                except OSError:
                    continue
                if self.marker not in text or any(x in cmdline for x in self.EXCLUDE):
                    continue
                self.names[pid] = cmdline.replace(b"\0", b" ").decode(errors="replace")[:80]
            got = _cpu_ticks(pid)
            if got is None:
                continue
            ticks, started = got
            if pid not in self.base:
                self.base[pid] = 0 if started >= self._born_after else ticks
            self.last[pid] = ticks

    @classmethod
    def since_start(cls, marker: str) -> float:
        """CPU seconds the processor's processes spent from their own starts until now."""
        sampler = cls(marker)
        sampler._born_after = 0  # every process was started after it
        sampler._sample()
        return sum(sampler.last.values()) / CLOCK_TICKS

    def run(self) -> None:
        while not self._done.is_set():
            self._sample()
            self._done.wait(CPU_POLL_S)

    def stop(self) -> float:
        """CPU seconds of the processor's processes since the start (their sum)."""
        self._sample()
        self._done.set()
        self.join(5)
        return sum(self.last[p] - self.base[p] for p in self.last) / CLOCK_TICKS


def child_stats(worker: WorkerProcess, processes: int) -> list[dict[str, Any] | None]:
    """/xwait/stats of each worker process (`xwait worker --processes N`: child i serves on
    the web port + i); None for one that does not answer."""
    return [worker.stats(i) for i in range(processes)]


RECORD_STAGES = ("taken", "released", "durable")


class StatsPoller(threading.Thread):
    """Keeps the last /xwait/stats answer of each of xwait's worker processes while they run
    (loadgen stops them), and the worst event-loop lag any reported: p99 and max of a
    5-second window (`loopLagMs`)."""

    def __init__(self, worker: WorkerProcess, processes: int = 1) -> None:
        super().__init__(name="stats-poller", daemon=True)
        self.worker = worker
        self.last: list[dict[str, Any] | None] = [None] * processes
        self.loop_lag_p99_ms: float | None = None
        self.loop_lag_max_ms: float | None = None
        # The worker's own view of a record's path (`latencyMs`, ms from its broker append):
        # fetched (`taken`), released in append order, decided and durable. Per stage the
        # worst p99 and max any answer showed (each covers the stage's last 4,096 records).
        self.stages: dict[str, dict[str, float]] = {}
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            for i, stats in enumerate(child_stats(self.worker, len(self.last))):
                if stats is None:
                    continue
                self.last[i] = stats
                lag = stats.get("loopLagMs") or {}
                if "p99_5s" in lag:
                    self.loop_lag_p99_ms = max(self.loop_lag_p99_ms or 0.0, lag["p99_5s"])
                    self.loop_lag_max_ms = max(self.loop_lag_max_ms or 0.0, lag["max_5s"])
                self._worst_stages(stats.get("latencyMs") or {})
            self._done.wait(STATS_POLL_S)

    def _worst_stages(self, latency: dict[str, Any]) -> None:
        for stage in RECORD_STAGES:
            got = latency.get(stage) or {}
            if not got.get("n"):
                continue
            worst = self.stages.setdefault(stage, {"p99": 0.0, "max": 0.0})
            for figure in ("p99", "max"):
                worst[figure] = max(worst[figure], float(got.get(figure) or 0.0))

    def stop(self) -> dict[str, Any]:
        """The counters of the last answers, summed over the processes."""
        self._done.set()
        self.join(5)
        total: dict[str, Any] = {}
        for stats in self.last:
            for name, value in (stats or {}).get("counters", {}).items():
                total[name] = total.get(name, 0) + value if isinstance(value, int) else value
        return total


# -- counting what a run left on its topics -----------------------------------------------------


def topic_records(conf: dict[str, str], topic: str, partitions: int,
                  kind: Callable[[bytes], str] | None = None,
                  timeout: float = 120,
                  each: Callable[[Any], None] | None = None) -> tuple[int, dict[str, int]]:
    """Records on `topic` (read_committed, from the start), and counts by `kind` when given;
    `each` sees every record (a confluent-kafka message)."""
    consumer = Consumer({**conf, "group.id": f"compare-count-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        ends = {}
        for p in range(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)
            if high > low:
                ends[p] = high
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        count = 0
        kinds: dict[str, int] = {}
        give_up = time.monotonic() + timeout
        while ends and time.monotonic() < give_up:
            msgs = consumer.consume(5000, timeout=0.5)
            for m in msgs:
                if m.error() is not None:
                    continue
                count += 1
                if each is not None:
                    each(m)
                if kind is not None:
                    k = kind(m.value() or b"")
                    kinds[k] = kinds.get(k, 0) + 1
            if not msgs:  # read_committed skips markers: ask where the consumer stands
                positions = consumer.position([TopicPartition(topic, p) for p in ends])
                if all(tp.offset >= ends[tp.partition] for tp in positions):
                    break
        return count, kinds
    finally:
        with contextlib.suppress(KafkaException, RuntimeError):
            consumer.close()


def wrong_by_broker_clock(requested: dict[str, int], replied: dict[str, int],
                          ended: dict[str, str], deadline_ms: int) -> int:
    """Waits whose first outcome is not what the broker's clock says.

    The contract: a reply appended before the request's `requestedAt` plus the
    deadline is received (an invalid one too: the bench's reviews accept it),
    otherwise the wait escalates.  The load generator judges by when it meant
    to send each reply; on a loaded machine it sends some late, and then calls
    a correct escalation wrong (1,940 of 60,000 in one open round).
    """
    wrong = 0
    for key, at in requested.items():
        if key not in ended:
            continue  # missing: counted as such by the load generator
        reply = replied.get(key)
        expected = "RECEIVED" if reply is not None and reply < at + deadline_ms else "ESCALATED"
        wrong += ended[key] != expected
    return wrong


def judge_open_run(settings: Settings, partitions: int, deadline_ms: int) -> int:
    """`wrong_by_broker_clock` of an open run's topics (requests, replies, outcomes)."""
    requested: dict[str, int] = {}
    replied: dict[str, int] = {}
    ended: dict[str, str] = {}

    def key(m: Any) -> str:
        return (m.key() or b"").decode(errors="replace")

    def request(m: Any) -> None:
        requested[key(m)] = int(codec.decode(RecordType.START_WAIT, m.value())["requestedAt"])

    def reply(m: Any) -> None:
        at = m.timestamp()[1]
        replied[key(m)] = min(at, replied.get(key(m), at))

    def outcome(m: Any) -> None:
        ended.setdefault(key(m), str(codec.decode(RecordType.OUTCOME, m.value())["outcome"]))

    conf = settings.confluent()
    for role, visit in (("requests", request), ("replies", reply), ("outcomes", outcome)):
        topic_records(conf, settings.topic(role), partitions, each=visit)
    return wrong_by_broker_clock(requested, replied, ended, deadline_ms)


def action_kind(value: bytes) -> str:
    """An action record's kind, from xwait's Avro or a peer's JSON."""
    try:
        if value[:2] == AVRO_MAGIC:
            return str(codec.decode(RecordType.ACTION, value)["action"])
        return str(json.loads(value)["action"])
    except (codec.CodecError, ValueError, KeyError, TypeError):
        return "<undecodable>"


class ActionTimes:
    """When a storm's waits were parked and escalated, from the action records' timestamps.

    The issue's storm target is "the first escalation <= 5 s after the last
    wait parked"; the load generator times the first outcome from the process
    start, which for a processor that escalates only once its backlog of
    requests is stored (xwait's stream time) is mostly the time to park them.
    Both are reported.
    """

    def __init__(self) -> None:
        self.last_parked: int | None = None
        self.first_escalated: int | None = None

    def __call__(self, m: Any) -> None:
        kind, at = action_kind(m.value() or b""), m.timestamp()[1]
        if kind == "SEND_REQUEST":
            self.last_parked = max(at, self.last_parked or at)
        elif kind == "RUN_ESCALATION":
            self.first_escalated = min(at, self.first_escalated or at)

    def first_escalation_after_last_park_s(self) -> float | None:
        """Negative when escalations began before the last wait was parked."""
        if self.last_parked is None or self.first_escalated is None:
            return None
        return round((self.first_escalated - self.last_parked) / 1000, 2)


def storm_actions(conf: dict[str, str], topic: str, partitions: int,
                  record: dict[str, Any]) -> None:
    """A storm run's actions by kind, and its first escalation after the last park."""
    times = ActionTimes()
    _, record["actions_by_kind"] = topic_records(conf, topic, partitions, action_kind,
                                                 each=times)
    record["first_escalation_after_last_park_s"] = times.first_escalation_after_last_park_s()


# -- one run ---------------------------------------------------------------------------------


@dataclass
class RunPlan:
    round: int
    position: int  # place of the system in this round's order, from 1
    workload: Workload
    system: str
    prefix: str
    folder: Path


def start_delay(workload: Workload) -> float:
    """Seconds between loadgen's launch of the processor and its start (see DELAYED_START)."""
    return workload.deadline_s if workload.name == "storm" else 0.0


def loadgen_argv(ctx: Context, plan: RunPlan, *, start_cmd: list[str] | None = None,
                 log: Path | None = None, pid: int | None = None,
                 preload_only: bool = False) -> list[str]:
    w = plan.workload
    if start_cmd is not None and start_delay(w):  # exec keeps the pid loadgen reads RSS of
        start_cmd = [ctx.python, "-c", DELAYED_START, f"{start_delay(w):g}", *start_cmd]
    argv = [ctx.python, str(ctx.kit / "loadgen.py"), "--bootstrap", ctx.bootstrap,
            "--prefix", plan.prefix, "--definition", w.definition, "--mode", w.mode,
            "--waits", str(ctx.waits(w)), "--mix", w.mix, "--deadline-s", f"{w.deadline_s:g}",
            "--schemas", str(REPO / "schemas"), "--stall-s", f"{ctx.args.stall_s:g}",
            "--seed", str(ctx.args.seed), "--out", str(plan.folder / "loadgen.json")]
    if w.mode == "open":
        argv += ["--rate", f"{ctx.args.rate:g}"]
    if start_cmd is not None:
        argv += ["--start-cmd", shlex.join(start_cmd)]
    if log is not None:
        argv += ["--log", str(log)]
    if pid is not None:
        argv += ["--pid", str(pid)]
    if preload_only:
        argv += ["--preload-only"]
    return argv


def loadgen_timeout(ctx: Context, w: Workload) -> float:
    stall: float = ctx.args.stall_s
    if w.mode == "open":
        seconds: float = ctx.args.seconds
        return seconds + 300
    return max(300.0, ctx.waits(w) / 20 + 2 * stall)


def read_json(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return data
    except (OSError, ValueError) as exc:
        raise CompareError(f"no result in {path.name}: {exc}") from exc


def mktopics(ctx: Context, plan: RunPlan) -> None:
    run_tool([ctx.python, str(ctx.kit / "mktopics.py"), ctx.bootstrap, plan.prefix,
              str(ctx.partitions)], plan.folder / "mktopics.log", 120, plan.prefix)


def xwait_settings(ctx: Context, plan: RunPlan) -> Settings:
    guarantee = {"default": Settings().guarantee, "at_least_once": Guarantee.AT_LEAST_ONCE,
                 "exactly_once": Guarantee.EXACTLY_ONCE}[ctx.args.guarantee]
    return Settings(bootstrap=ctx.bootstrap, topic_prefix=plan.prefix,
                    app_id=f"{plan.prefix}-proc", partitions=ctx.partitions,
                    topology=ctx.topology, data_dir=plan.folder / "data", guarantee=guarantee)


def run_xwait(ctx: Context, plan: RunPlan, record: dict[str, Any]) -> dict[str, Any]:
    settings = xwait_settings(ctx, plan)
    report = topics.create(settings, topics.load_specs(settings))
    if report.mismatched:
        raise CompareError(f"topics differ from topics.yaml: {report.mismatched}")
    processes: int = ctx.args.xwait_processes
    command = (str(XWAIT), "worker", *(("--processes", str(processes)) if processes > 1 else ()))
    worker = WorkerProcess(settings, plan.folder, "xwait", log_level=ctx.args.xwait_log_level,
                           env=dict(ctx.args.xwait_env), command=command)
    if processes > 1:  # child i serves on the web port + i
        worker.web_port = free_port(*range(1, processes))
    record["processor"] = {"guarantee": settings.guarantee.value, "processes": processes,
                           "env": {k: v for k, v in worker.environment().items()
                                   if k not in ("XWAIT_DATA_DIR", "XWAIT_WEB_PORT")}}
    record["log"] = worker.log_path
    poller = StatsPoller(worker, processes)
    w = plan.workload
    cpu = CpuSampler(plan.prefix)
    try:
        if w.mode == "drain":
            poller.start()
            cpu.start()
            run_tool(loadgen_argv(ctx, plan, start_cmd=worker.command_line(),
                                  log=worker.log_path),
                     plan.folder / "loadgen.log", loadgen_timeout(ctx, w), plan.prefix)
        else:
            worker.start(wait_owned=False)
            worker.wait_until(lambda _first: owned(worker, processes) == ctx.partitions,
                              180, "does not own every partition")
            wait_answering(ctx, plan, 120, lambda: worker.running)
            record["ready_s"] = round(time.monotonic() - (worker.started_at or 0), 2)
            time.sleep(READY_SETTLE_S)
            record["startup_cpu_s"] = (startup_cpu(worker.pid) if processes == 1
                                       else CpuSampler.since_start(plan.prefix))
            poller.start()
            cpu.start()
            run_tool(loadgen_argv(ctx, plan, pid=worker.pid), plan.folder / "loadgen.log",
                     loadgen_timeout(ctx, w), plan.prefix)
    finally:
        record["cpu_s"] = cpu.stop() if cpu.is_alive() else None
        record["worker_counters"] = poller.stop() if poller.is_alive() else {}
        record["loop_lag_p99_ms"] = poller.loop_lag_p99_ms  # the worst 5 s window's
        record["loop_lag_max_ms"] = poller.loop_lag_max_ms
        record["stages_ms"] = poller.stages
        worker.stop()
    result = read_json(plan.folder / "loadgen.json")
    if w.mode == "open" and result.get("wrong_outcome"):
        result["wrong_by_sender_schedule"] = result["wrong_outcome"]
        result["wrong_outcome"] = judge_open_run(settings, ctx.partitions,
                                                 round(w.deadline_s * 1000))
    if w.name == "storm":
        conf = settings.confluent()
        record["timer_records"], _ = topic_records(conf, settings.topic("timers"),
                                                   ctx.partitions)
        storm_actions(conf, settings.topic("actions"), ctx.partitions, record)
    return result


def owned(worker: WorkerProcess, processes: int) -> int:
    """Partitions xwait's worker processes own between them (those that answer)."""
    return sum(len((s or {}).get("ownedPartitions", [])) for s in child_stats(worker, processes))


def startup_cpu(pid: int | None) -> float | None:
    """CPU seconds a processor spent from its start until now (it is ready, idle)."""
    got = _cpu_ticks(str(pid)) if pid is not None else None
    return None if got is None else round(got[0] / CLOCK_TICKS, 2)


def peer_argv(ctx: Context, plan: RunPlan) -> tuple[list[str], str]:
    """The peer's command line and its consumer group."""
    w = plan.workload
    if plan.system == "pypeer":
        group = f"{plan.prefix}-py"
        return ([ctx.python, str(ctx.kit / "pypeer.py"), "--bootstrap", ctx.bootstrap,
                 "--prefix", plan.prefix, "--group", group, "--deadline-s", f"{w.deadline_s:g}",
                 "--remind-s", f"{w.remind_s:g}"], group)
    assert ctx.jar is not None
    group = f"{plan.prefix}-ks"
    guarantee = {"default": [], "at_least_once": ["-Dguarantee=at_least_once"],
                 "exactly_once": ["-Dguarantee=exactly_once_v2"]}[ctx.args.guarantee]
    return (["java", f"-Ddeadline.ms={round(w.deadline_s * 1000)}",
             f"-Dremind.ms={round(w.remind_s * 1000)}", f"-Dapp.id={group}",
             f"-Dstate.dir={plan.folder / 'ks-state'}", *guarantee, "-jar", str(ctx.jar),
             ctx.bootstrap, plan.prefix], group)


def run_peer(ctx: Context, plan: RunPlan, record: dict[str, Any],
             admin: AdminClient) -> dict[str, Any]:
    mktopics(ctx, plan)
    argv, group = peer_argv(ctx, plan)
    log = plan.folder / f"{plan.system}.log"
    record["log"] = log
    record["processor"] = {"command": argv, "guarantee": (
        "none (state in memory)" if plan.system == "pypeer" else
        {"default": "exactly_once_v2 (its default)", "at_least_once": "at_least_once",
         "exactly_once": "exactly_once_v2"}[ctx.args.guarantee])}
    w = plan.workload
    cpu = CpuSampler(plan.prefix)
    if w.mode == "drain":
        cpu.start()
        try:
            run_tool(loadgen_argv(ctx, plan, start_cmd=argv, log=log),
                     plan.folder / "loadgen.log", loadgen_timeout(ctx, w), plan.prefix)
        finally:
            record["cpu_s"] = cpu.stop()
    else:
        peer = Peer(argv, log)
        try:
            started = time.monotonic()
            alive = lambda: peer.proc.poll() is None  # noqa: E731
            wait_group_ready(admin, group, 3 * ctx.partitions, 180, alive)
            wait_answering(ctx, plan, 120, alive)
            record["ready_s"] = round(time.monotonic() - started, 2)
            time.sleep(READY_SETTLE_S)
            record["startup_cpu_s"] = startup_cpu(peer.proc.pid)
            cpu.start()
            run_tool(loadgen_argv(ctx, plan, pid=peer.proc.pid), plan.folder / "loadgen.log",
                     loadgen_timeout(ctx, w), plan.prefix)
        finally:
            record["cpu_s"] = cpu.stop() if cpu.is_alive() else None
            peer.stop()
    result = read_json(plan.folder / "loadgen.json")
    if w.name == "storm":
        storm_actions({"bootstrap.servers": ctx.bootstrap}, f"{plan.prefix}.actions",
                      ctx.partitions, record)
    return result


def run_pipe(ctx: Context, plan: RunPlan, record: dict[str, Any]) -> dict[str, Any]:
    """The raw pipe (the kit's) or the faust pipe (ours) over the preloaded records."""
    mktopics(ctx, plan)
    run_tool(loadgen_argv(ctx, plan, preload_only=True), plan.folder / "loadgen.log",
             loadgen_timeout(ctx, plan.workload), plan.prefix)
    preload = read_json(plan.folder / "loadgen.json")
    sent = preload.get("sent", {})
    expect = int(sent.get("requests", 0)) + int(sent.get("replies", 0))
    record["preload"] = preload
    name = plan.system
    record["log"] = plan.folder / f"{name}.log"
    out = plan.folder / f"{name}.json"
    script = ctx.kit / "rawpipe.py" if name == "rawpipe" else REPO / "bench" / "faustpipe.py"
    timeout = max(300.0, expect / 100)
    cpu = CpuSampler(plan.prefix)
    cpu.start()
    try:
        run_tool([ctx.python, str(script), "--bootstrap", ctx.bootstrap,
                  "--prefix", plan.prefix, "--expect", str(expect), "--partitions",
                  str(ctx.partitions), "--timeout-s", f"{timeout:.0f}", "--out", str(out)],
                 plan.folder / f"{name}.log", timeout + 60, plan.prefix)
    finally:
        record["cpu_s"] = cpu.stop()
    if name == "rawpipe":  # the faust pipe's group starts with the prefix: deleted with it
        record["rawpipe_groups_deleted"] = delete_rawpipe_group(ctx, plan.prefix)
    return read_json(out)


def delete_rawpipe_group(ctx: Context, prefix: str) -> list[str]:
    """rawpipe.py names its group ``rawpipe-<random>``: find it by its offsets on our topics
    (before the topics go, which takes the offsets with them) and delete it."""
    admin = AdminClient({"bootstrap.servers": ctx.bootstrap})
    mine = []
    with contextlib.suppress(KafkaException):
        groups = admin.list_consumer_groups(request_timeout=15).result(timeout=15)
        for g in groups.valid:
            if not g.group_id.startswith("rawpipe-"):
                continue
            found = admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(g.group_id)])[g.group_id].result(timeout=15)
            if any(tp.topic.startswith(prefix + ".") for tp in found.topic_partitions or []):
                mine.append(g.group_id)
        for future in (admin.delete_consumer_groups(mine, request_timeout=15).values()
                       if mine else []):
            future.result(timeout=15)
    return mine


def per_event(cpu_s: float | None, events: int) -> float | None:
    """CPU microseconds per input event: what travels from one machine to another."""
    return None if cpu_s is None or events <= 0 else round(cpu_s * 1e6 / events, 1)


def figures(plan: RunPlan, result: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
    """The run's figures under one set of names, whichever tool measured them."""
    cpu_s = record.get("cpu_s")
    if plan.system in PIPES:
        consumed = int(result.get("consumed") or 0)
        return {"events_per_s": result.get("records_per_s"),
                "cpu_s": cpu_s, "cpu_us_per_event": per_event(cpu_s, consumed),
                "escalations_per_s": None,
                "records": result.get("expect"), "completed": consumed,
                "seconds": result.get("seconds"),
                "first_outcome_s": result.get("first_consumed_after_start_s"),
                "peak_rss_mib": result.get("peak_rss_mib"),
                "missing": max(int(result.get("expect") or 0) - consumed, 0),
                "delivery_errors": result.get("delivery_errors")}
    kinds = result.get("outcomes_by_kind", {})
    delay = start_delay(plan.workload) if plan.workload.mode == "drain" else 0.0
    seconds = max(float(result.get("seconds") or 0) - delay, 1e-3)
    first = result.get("first_outcome_s")
    events = int(result.get("input_events_total") or 0)
    escalated = sum(v for k, v in kinds.items() if k.endswith("->ESCALATED"))
    reply = result.get("reply_to_outcome_ms", {})
    late = result.get("deadline_lateness_ms", {})
    out: dict[str, Any] = {
        "events_per_s": (round(events / seconds, 1) if delay
                         else result.get("input_events_per_s")),
        "escalations_per_s": (round(escalated / seconds, 1)
                              if plan.workload.name == "storm" else None),
        "input_events": events,
        "waits": result.get("waits"), "completed": result.get("completed"),
        "seconds": round(seconds, 2),
        "start_delay_s": delay,
        "first_outcome_s": round(first - delay, 2) if first is not None else None,
        "reply_p50_ms": reply.get("p50"), "reply_p99_ms": reply.get("p99"),
        "reply_max_ms": reply.get("max"),
        "lateness_p50_ms": late.get("p50"), "lateness_p99_ms": late.get("p99"),
        "lateness_max_ms": late.get("max"),
        "peak_rss_mib": result.get("processor_peak_rss_mib_sum"),
        "missing": result.get("missing"), "wrong_outcome": result.get("wrong_outcome"),
        "wrong_by_sender_schedule": result.get("wrong_by_sender_schedule"),
        "duplicate_outcome_ids": result.get("duplicate_outcome_ids"),
        "conflicting_outcomes": result.get("conflicting_outcomes"),
        "undecodable_outcomes": result.get("undecodable_outcomes"),
        "cpu_s": cpu_s, "cpu_us_per_event": per_event(cpu_s, events),
        "startup_cpu_s": record.get("startup_cpu_s"),
        # xwait only: its event loop's lag over the run, the worst 5 s window's p99 and max.
        "loop_lag_p99_ms": record.get("loop_lag_p99_ms"),
        "loop_lag_max_ms": record.get("loop_lag_max_ms"),
        # xwait only: the worst p99 and max of its own record stages (StatsPoller.stages).
        **{f"{stage}_{figure}_ms": (record.get("stages_ms") or {}).get(stage, {}).get(figure)
           for stage in RECORD_STAGES for figure in ("p99", "max")},
    }
    if plan.workload.name == "storm":
        actions = record.get("actions_by_kind", {})
        reminders = int(actions.get("SEND_REMINDER", 0))
        out["reminders"] = reminders
        out["escalations"] = escalated
        out["timers_fired"] = reminders + escalated
        out["timer_records"] = record.get("timer_records")  # xwait only: its timers topic
        out["first_escalation_after_last_park_s"] = record.get(
            "first_escalation_after_last_park_s")
    return out


def run_one(ctx: Context, plan: RunPlan, admin: AdminClient) -> dict[str, Any]:
    plan.folder.mkdir(parents=True)
    record: dict[str, Any] = {
        "round": plan.round, "position": plan.position, "workload": plan.workload.name,
        "system": plan.system, "prefix": plan.prefix,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "loadavg_before": [round(x, 2) for x in os.getloadavg()],
    }
    t0 = time.monotonic()
    error: str | None = None
    result: dict[str, Any] = {}
    try:
        if plan.system == "xwait":
            result = run_xwait(ctx, plan, record)
        elif plan.system in PIPES:
            result = run_pipe(ctx, plan, record)
        else:
            result = run_peer(ctx, plan, record, admin)
        record["figures"] = figures(plan, result, record)
        problems = {k: record["figures"][k] for k in (
            "missing", "wrong_outcome", "duplicate_outcome_ids", "conflicting_outcomes",
            "undecodable_outcomes") if record["figures"].get(k)}
        if problems:
            error = "incomplete: " + ", ".join(f"{k}={v}" for k, v in problems.items())
    except (CompareError, AssertionError, KafkaException, OSError) as exc:
        error = f"{type(exc).__name__}: {exc}"
    except KeyboardInterrupt:
        error = "interrupted"
        raise
    finally:
        record["wall_s"] = round(time.monotonic() - t0, 1)
        record["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
        log = record.pop("log", None)
        settings = Settings(bootstrap=ctx.bootstrap, topic_prefix=plan.prefix,
                            app_id=plan.prefix)  # its topics and groups all start with it
        record["topics_deleted"] = len(delete_topics(admin, settings))
        if error is not None:
            record["log_tail"] = tail(log, 60) if isinstance(log, Path) else []
            record["loadgen_log_tail"] = tail(plan.folder / "loadgen.log", 10)
            kept = ctx.failed_logs / plan.prefix  # the logs of a failed run, whole
            kept.mkdir(parents=True, exist_ok=True)
            for found in plan.folder.glob("*.log"):
                shutil.copy(found, kept / found.name)
            record["logs_kept"] = str(kept)
        if not ctx.args.keep_logs:
            shutil.rmtree(plan.folder, ignore_errors=True)
    record["result"] = result
    record.setdefault("figures", {})
    record["ok"] = error is None
    record["error"] = error
    return record


def sweep_groups(admin: AdminClient, prefixes: list[str], timeout: float = 90) -> list[str]:
    """Delete the consumer groups of these runs still left; the names of those that stay.

    A run deletes its groups when it ends, but a member that did not leave (a JVM killed
    during its close) keeps its group until the session times out (45 s for Kafka Streams).
    """
    give_up = time.monotonic() + timeout
    left: list[str] = []
    while time.monotonic() < give_up:
        try:
            groups = admin.list_consumer_groups(request_timeout=15).result(timeout=15)
        except KafkaException:
            return left
        left = [g.group_id for g in groups.valid if g.group_id.startswith(tuple(prefixes))]
        if not left:
            return []
        for future in admin.delete_consumer_groups(left, request_timeout=15).values():
            with contextlib.suppress(KafkaException):
                future.result(timeout=15)
        time.sleep(3)
    return left


# -- ratios, summary, table, plot --------------------------------------------------------------


def ratios(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """xwait's figure ÷ another system's, both from the same round and workload."""
    out = []
    by = {(r["round"], r["workload"], r["system"]): r for r in runs if r["figures"]}
    for (rnd, workload, system), run in sorted(by.items()):
        if system == "xwait":
            continue
        mine = by.get((rnd, workload, "xwait"))
        if mine is None:
            continue
        for figure, higher in RATIO_FIGURES[workload]:
            a = mine["figures"].get(figure)
            b = run["figures"].get(figure)
            if figure == "escalations_per_s" and system in PIPES:
                b = run["figures"].get("events_per_s")  # a request record per escalation
            if not a or not b:
                continue
            out.append({"round": rnd, "workload": workload, "figure": figure, "over": system,
                        "ratio": round(a / b, 4), "higher_is_better": higher})
    return out


def values(runs: list[dict[str, Any]], workload: str, system: str, figure: str
           ) -> list[float | None]:
    return [r["figures"].get(figure) if r["figures"] else None
            for r in sorted(runs, key=lambda r: r["round"])
            if r["workload"] == workload and r["system"] == system]


def fmt(value: Any, digits: int = 0) -> str:
    if value is None:
        return "–"
    if isinstance(value, float | int):
        if abs(value) >= 100 or digits == 0:
            return f"{value:,.0f}"
        return f"{value:,.{digits}f}"
    return str(value)


def stage_rounds(runs: list[dict[str, Any]], workload: str, stage: str) -> str:
    """`p99 / max, p99 / max, ...` of one of xwait's record stages, per round."""
    p99s = values(runs, workload, "xwait", f"{stage}_p99_ms")
    maxes = values(runs, workload, "xwait", f"{stage}_max_ms")
    return ", ".join(f"{fmt(a, 0)} / {fmt(b, 0)}" for a, b in zip(p99s, maxes, strict=True))


def per_round(vals: Iterable[Any], digits: int = 0) -> str:
    return " / ".join(fmt(v, digits) for v in vals) or "–"


def machine_line(result: dict[str, Any]) -> str:
    m, v = result["machine"], result["versions"]
    loads = [r["loadavg_before"][0] for r in result["runs"]] + \
            [r["loadavg_after"][0] for r in result["runs"]]
    load = f"{min(loads):.2f}–{max(loads):.2f}" if loads else "–"
    commit = (v.get("git_commit") or "?")[:10] + (" with local changes" if v.get("git_dirty")
                                                  else "")
    where = result["parameters"]
    return (f"{m['nproc']} CPUs ({m.get('cpu_model') or m['cpu']}), {m['mem_total_mib']:,} MiB, "
            f"{m['platform']}; Python {v['python']}, confluent-kafka {v.get('confluent-kafka')} "
            f"(librdkafka {v['librdkafka']}), {v.get('java') or 'no Java'}, Kafka Streams "
            f"{v.get('kafka_streams') or '–'}; xwait {commit}; broker {where['bootstrap']}, "
            f"{where['partitions']} partitions; 1-minute load average during the "
            f"runs {load}")


def table(result: dict[str, Any], png_name: str | None) -> str:
    """Markdown: one table per workload, every run's figure, the ratios per round."""
    runs, p = result["runs"], result["parameters"]
    systems = [s for s in SYSTEMS if s in p["systems"]]
    rounds = p["rounds"]
    rat = result["ratios"]

    def ratio(workload: str, figure: str, system: str) -> str:
        found = [r["ratio"] for r in sorted(rat, key=lambda r: r["round"])
                 if r["workload"] == workload and r["figure"] == figure and r["over"] == system]
        return " / ".join(f"{x:.3g}" for x in found) or "–"

    def correctness(workload: str, system: str) -> str:
        parts = []
        for r in sorted(runs, key=lambda r: r["round"]):
            if r["workload"] != workload or r["system"] != system:
                continue
            f = r["figures"]
            if not r["ok"] and not f:
                parts.append("failed")
                continue
            bad = {k: f.get(k) for k in ("missing", "wrong_outcome", "duplicate_outcome_ids",
                                         "conflicting_outcomes") if f.get(k)}
            parts.append("ok" if not bad else ", ".join(f"{k} {v}" for k, v in bad.items()))
        return " / ".join(parts) or "–"

    lines = [f"Machine: {machine_line(result)}. {rounds} round(s), systems interleaved, order "
             f"reversed in every second round; every run is shown (round 1 / round 2 / ...). "
             f"Run on {result['timestamp']} with `bench/compare.py` ({result['file']}).", ""]
    if p.get("xwait_processes", 1) > 1:
        lines += [f"xwait ran as `xwait worker --processes {p['xwait_processes']}`: that many "
                  "worker processes under one supervisor, their CPU summed.", ""]
    for note in result["notes"]:
        lines.append(f"Note: {note}")
    if result["notes"]:
        lines.append("")
    present = [w for w in WORKLOADS if w in p["workloads"]]
    for name in present:
        w = BY_NAME[name]
        here = [s for s in systems if applies(s, w)
                and any(r["workload"] == name and r["system"] == s for r in runs)]
        if name == "drain":
            lines += [f"**(a) Drain W1, {p['waits']:,} waits** (`--definition bench-long --mix "
                      "replies`): CPU µs per input event (utime+stime of the processor's "
                      "processes over the run, start-up included; lower is better) and input "
                      "events/s (higher is better).", "",
                      "| system | CPU µs/event | xwait ÷ system (CPU) | events/s | "
                      "xwait ÷ system | first outcome (s) | peak RSS (MiB) "
                      "| outcomes |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
            for s in here:
                lines.append(
                    f"| {LABELS[s]} | {per_round(values(runs, name, s, 'cpu_us_per_event'))} | "
                    f"{'–' if s == 'xwait' else ratio(name, 'cpu_us_per_event', s)} | "
                    f"{per_round(values(runs, name, s, 'events_per_s'))} | "
                    f"{'–' if s == 'xwait' else ratio(name, 'events_per_s', s)} | "
                    f"{per_round(values(runs, name, s, 'first_outcome_s'), 1)} | "
                    f"{per_round(values(runs, name, s, 'peak_rss_mib'))} | "
                    f"{correctness(name, s)} |")
        elif name == "storm":
            lines += [f"**(b) Timer storm, {p['waits']:,} waits** (`--definition bench --mix "
                      "silent --deadline-s 3`, every deadline due when the processor starts): "
                      "escalations/s, higher is better (the pipes: request records/s); CPU µs "
                      "per input event, start-up included.", "",
                      "| system | CPU µs/event | escalations/s | xwait ÷ system | first "
                      "escalation (s) | after the last park (s) | timer records | timers fired "
                      "| peak RSS (MiB) | outcomes |",
                      "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
            for s in here:
                fig = "events_per_s" if s in PIPES else "escalations_per_s"
                lines.append(
                    f"| {LABELS[s]} | {per_round(values(runs, name, s, 'cpu_us_per_event'))} | "
                    f"{per_round(values(runs, name, s, fig))} | "
                    f"{'–' if s == 'xwait' else ratio(name, 'escalations_per_s', s)} | "
                    f"{per_round(values(runs, name, s, 'first_outcome_s'), 1)} | "
                    f"{per_round(values(runs, name, s, 'first_escalation_after_last_park_s'), 1)}"
                    " | "
                    f"{per_round(values(runs, name, s, 'timer_records'))} | "
                    f"{per_round(values(runs, name, s, 'timers_fired'))} | "
                    f"{per_round(values(runs, name, s, 'peak_rss_mib'))} | "
                    f"{correctness(name, s)} |")
        else:
            lines += [f"**(c) Open W1 at {p['rate']:g} requests/s for {p['seconds']:g} s** "
                      "(`--mode open --mix w1`): CPU µs per input event over the load (after "
                      "start-up: its CPU-s beside it), milliseconds, lower is better.", "",
                      "| system | CPU µs/event | xwait ÷ system (CPU) | start-up CPU-s | "
                      "reply→outcome p50 | p99 | deadline lateness p99 | xwait ÷ "
                      "system (p99) | events/s | peak RSS (MiB) | outcomes |",
                      "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
            for s in here:
                lines.append(
                    f"| {LABELS[s]} | {per_round(values(runs, name, s, 'cpu_us_per_event'))} | "
                    f"{'–' if s == 'xwait' else ratio(name, 'cpu_us_per_event', s)} | "
                    f"{per_round(values(runs, name, s, 'startup_cpu_s'), 1)} | "
                    f"{per_round(values(runs, name, s, 'reply_p50_ms'))} | "
                    f"{per_round(values(runs, name, s, 'reply_p99_ms'))} | "
                    f"{per_round(values(runs, name, s, 'lateness_p99_ms'))} | "
                    f"{'–' if s == 'xwait' else ratio(name, 'reply_p99_ms', s)} | "
                    f"{per_round(values(runs, name, s, 'events_per_s'))} | "
                    f"{per_round(values(runs, name, s, 'peak_rss_mib'))} | "
                    f"{correctness(name, s)} |")
            if any(v is not None for v in values(runs, name, "xwait", "loop_lag_p99_ms")):
                lines += ["", "xwait's event loop lag over the load, the worst 5-second "
                          "window (ms, per round): p99 "
                          f"{per_round(values(runs, name, 'xwait', 'loop_lag_p99_ms'))}, max "
                          f"{per_round(values(runs, name, 'xwait', 'loop_lag_max_ms'))}."]
            if any(v is not None for v in values(runs, name, "xwait", "durable_max_ms")):
                lines += ["", "xwait's own view of a record's path, ms from its broker append, "
                          "the worst p99 / max any stats answer showed (per round): fetched "
                          f"{stage_rounds(runs, name, 'taken')}; released in append order "
                          f"{stage_rounds(runs, name, 'released')}; decided and durable "
                          f"{stage_rounds(runs, name, 'durable')}."]
        lines.append("")
    lines += ["Every run, in the order run (load average = 1 minute, before → after):", "",
              "| # | round | workload | system | headline | load | wall (s) | result |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    warm: dict[str, Any] | None = result.get("warm_up")
    shown: list[tuple[int | str, dict[str, Any]]] = [("–", warm)] if warm else []
    for i, r in shown + list(enumerate(runs, 1)):
        w = BY_NAME[r["workload"]]
        head = w.headline if r["system"] not in PIPES else "events_per_s"
        value = r["figures"].get(head) if r["figures"] else None
        lines.append(f"| {i} | {r['round'] or 'warm-up'} | {r['workload']} | "
                     f"{LABELS[r['system']]} | "
                     f"{head} {fmt(value)} | {r['loadavg_before'][0]:.2f} → "
                     f"{r['loadavg_after'][0]:.2f} | {r['wall_s']:.0f} | "
                     f"{'ok' if r['ok'] else r['error']}"
                     f"{' (not compared)' if r is warm else ''} |")
    if png_name:
        lines += ["", f"![events/s and latency per system]({png_name})"]
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], path: Path) -> None:
    """Bars: the mean over rounds; dots: every run. One panel per workload."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs, p = result["runs"], result["parameters"]
    systems = [s for s in SYSTEMS if s in p["systems"]]
    panels: list[tuple[str, str, list[tuple[str, str]]]] = []
    if "drain" in p["workloads"]:
        panels.append(("drain", f"(a) drain W1, {p['waits']:,} waits: input events/s",
                       [("events_per_s", "events/s")]))
    if "storm" in p["workloads"]:
        panels.append(("storm", f"(b) timer storm, {p['waits']:,} waits: escalations/s",
                       [("escalations_per_s", "escalations/s")]))
    if "open" in p["workloads"]:
        panels.append(("open", f"(c) open W1 at {p['rate']:g}/s for {p['seconds']:g} s: ms",
                       [("reply_p50_ms", "reply→outcome p50"),
                        ("reply_p99_ms", "reply→outcome p99"),
                        ("lateness_p99_ms", "deadline lateness p99")]))
    if not panels:
        return
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 5), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (workload, title, figs) in zip(axes[0], panels, strict=True):
        here = [s for s in systems if applies(s, BY_NAME[workload])]
        width = 0.8 / len(figs)
        top: list[float] = []
        for j, (figure, label) in enumerate(figs):
            for i, s in enumerate(here):
                key = "events_per_s" if (s in PIPES and workload == "storm") else figure
                mine = [r for r in sorted(runs, key=lambda r: r["round"])
                        if r["workload"] == workload and r["system"] == s
                        and r["figures"].get(key) is not None]
                got = [float(r["figures"][key]) for r in mine]
                x = i + (j - (len(figs) - 1) / 2) * width
                if got:
                    ax.bar(x, statistics.fmean(got), width * 0.9, color=colors[j % len(colors)],
                           label=label if i == 0 else None)
                    ax.scatter([x] * len(got), got, s=14, zorder=3,  # red: an incomplete run
                               color=["black" if r["ok"] else "red" for r in mine])
                    top += got
        ax.set_xticks(range(len(here)), [
            LABELS[s] + ("\n(records/s)" if s in PIPES and workload == "storm" else "")
            for s in here], rotation=15)
        ax.set_title(title, fontsize=10)
        positive = [v for v in top if v > 0]
        if positive and max(positive) / min(positive) > 30:
            ax.set_yscale("log")
        if len(figs) > 1:
            ax.legend(fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    m = result["machine"]
    fig.suptitle(f"xwait side by side: {m['nproc']} CPUs, {result['timestamp']}; bars = mean of "
                 f"{p['rounds']} round(s), dots = every run (red: outcomes missing or wrong)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def summary_lines(runs: list[dict[str, Any]]) -> Iterator[str]:
    for r in runs:
        f = r["figures"]
        head = BY_NAME[r["workload"]].headline if r["system"] not in PIPES else "events_per_s"
        yield (f"  round {r['round']} {r['workload']:5} {r['system']:8} {head}="
               f"{f.get(head) if f else None} load {r['loadavg_before'][0]:.2f}->"
               f"{r['loadavg_after'][0]:.2f} {'ok' if r['ok'] else r['error']}")


# -- the comparison ----------------------------------------------------------------------------


def tool_version(argv: list[str]) -> str | None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    text = (done.stdout + done.stderr).strip().splitlines()
    return re.sub(r"\x1b\[[0-9;]*m", "", text[0]).strip() if text else None


def all_versions(kit: Path) -> dict[str, Any]:
    found = versions()
    java = tool_version(["java", "-version"]) if shutil.which("java") else None
    match = re.search(r'version "([^"]+)"', java or "")
    found["java"] = f"Java {match.group(1)}" if match else java
    found["maven"] = tool_version(["mvn", "-v"]) if shutil.which("mvn") else None
    with contextlib.suppress(OSError):
        pom = (kit / "kstreams" / "pom.xml").read_text(encoding="utf-8")
        match = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", pom)
        found["kafka_streams"] = match.group(1) if match else None
    return found


def machine_info() -> dict[str, Any]:
    found = machine()
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("model name"):
                found["cpu_model"] = line.split(":", 1)[1].strip()
                break
    return found


def env_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.startswith("XWAIT_"):
        raise argparse.ArgumentTypeError(f"expected XWAIT_NAME=value, got {text!r}")
    return key, value


def names(allowed: tuple[str, ...]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        got = [n.strip() for n in text.split(",") if n.strip()]
        wrong = [n for n in got if n not in allowed]
        if wrong or not got:
            raise argparse.ArgumentTypeError(f"expected some of {','.join(allowed)}")
        return got
    return parse


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="compare", description=__doc__.splitlines()[0])
    p.add_argument("--kit", type=Path, default=Path(os.environ.get("XWAIT_BENCH_KIT",
                                                                   DEFAULT_KIT)),
                   help="the bench kit's folder ($XWAIT_BENCH_KIT or ../shared/bench-kit)")
    p.add_argument("--bootstrap", default=os.environ.get("XWAIT_BOOTSTRAP", "127.0.0.1:9092"))
    p.add_argument("--systems", type=names(SYSTEMS), default=list(SYSTEMS),
                   help="comma-separated, from " + ",".join(SYSTEMS))
    p.add_argument("--workloads", type=names(WORKLOADS), default=list(WORKLOADS),
                   help="comma-separated, from " + ",".join(WORKLOADS))
    p.add_argument("--rounds", type=int, default=2, help="rounds; order reversed in each second")
    p.add_argument("--waits", type=int, default=20_000, help="waits of drain and storm (20000)")
    p.add_argument("--rate", type=float, default=500.0, help="open: requests/s (500)")
    p.add_argument("--seconds", type=float, default=120.0, help="open: seconds of load (120)")
    p.add_argument("--partitions", type=int, default=8, help="partitions of every topic (8)")
    p.add_argument("--guarantee", choices=("default", "at_least_once", "exactly_once"),
                   default="default", help="xwait's and the Kafka Streams peer's guarantee; "
                   "default: each its own (xwait at_least_once, Kafka Streams exactly_once_v2)")
    p.add_argument("--xwait-env", type=env_pair, action="append", default=[],
                   metavar="XWAIT_NAME=value", help="an extra setting of the xwait worker")
    p.add_argument("--xwait-processes", type=int, default=1, metavar="N",
                   help="xwait as `xwait worker --processes N`: N worker processes under one "
                        "supervisor (1: the worker itself); CPU is summed over them")
    p.add_argument("--xwait-log-level", default="warning")
    p.add_argument("--stall-s", type=float, default=60.0,
                   help="loadgen gives up after this long without an outcome (60)")
    p.add_argument("--seed", type=int, default=7, help="loadgen's seed (the same for all)")
    p.add_argument("--warm-up", type=float, default=30.0, metavar="SECONDS",
                   help="an open run of this long before the first, not compared, so that no "
                        "system meets a cold broker (30; 0: none)")
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE,
                   help="where the Kafka Streams peer is built (~/.cache/xwait-bench)")
    p.add_argument("--out-dir", type=Path, default=RESULTS, help="bench/results")
    p.add_argument("--publish", type=Path, default=None, metavar="PNG",
                   help="also copy the plot here (a tracked path the README shows)")
    p.add_argument("--render", type=Path, default=None, metavar="JSON",
                   help="run nothing: draw the plot and the table again from a result file")
    p.add_argument("--keep-logs", action="store_true",
                   help="keep each run's folder (logs, loadgen JSON) in the scratch folder")
    args = p.parse_args(argv)
    if min(args.rounds, args.waits, args.partitions, args.xwait_processes) < 1 \
            or args.rate <= 0 or args.seconds <= 0:
        p.error("--rounds, --waits, --partitions, --xwait-processes, --rate and --seconds must "
                "be above zero")
    if args.xwait_processes > args.partitions:
        p.error("--xwait-processes must not exceed --partitions (a worker without a partition "
                "idles)")
    if args.warm_up < 0:
        p.error("--warm-up must be zero (none) or more seconds")
    return args


def finish(result: dict[str, Any], out: Path, png: Path, args: argparse.Namespace) -> None:
    """The plot, compare-latest.png/.md and the JSON again (with any note the plot added)."""
    drawn: Path | None = png
    try:
        plot(result, png)
    except Exception as exc:  # a plot that fails still leaves the JSON and the table
        result["notes"].append(f"no plot: {type(exc).__name__}: {exc}")
        drawn = None
    shown = drawn.name if drawn is not None else None
    if drawn is not None:
        shutil.copy(drawn, args.out_dir / "compare-latest.png")
        if args.publish is not None:
            args.publish.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(drawn, args.publish)
            shown = os.path.relpath(args.publish.resolve(), REPO)
    latest = args.out_dir / "compare-latest.md"
    latest.write_text(table(result, shown), encoding="utf-8")
    out.write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    print(f"compare: wrote {out}, {drawn}, {latest}")


def warm_up(ctx: Context, planned: list[tuple[int, int, str, str]],
            admin: AdminClient) -> dict[str, Any] | None:
    """One open run of `--warm-up` seconds before the first compared run, not compared.

    The first run on a broker started minutes before was, twice, the slowest of
    its comparison by far, whichever system it was: at 1,000 waits/s xwait's
    reply p99 read 1.5 and 2.3 s there against 0.17-0.31 s in the runs after,
    and the Kafka Streams peer run next 2.1 and 0.37 s against 0.14-0.44.  Two
    xwait runs on a broker stopped cleanly and started again just before them
    were not slow (0.24 and 0.31 s).  A broker restarted after a kill
    acknowledged five times slower for its first seconds (which also starved
    xwait's last partitions until e9f6a51); the warm-up keeps such a start out
    of the comparison.  It is shown in the every-run table.
    """
    system = next((s for _, _, _, s in planned if applies(s, OPEN)), None)
    if system is None:
        return None
    args = argparse.Namespace(**{**vars(ctx.args), "seconds": ctx.args.warm_up})
    prefix = f"cmp0-warmup-{system}-{secrets.token_hex(3)}"
    plan = RunPlan(0, 1, OPEN, system, prefix, ctx.scratch / prefix)
    print(f"compare: warm-up: open, {system}, {ctx.args.warm_up:g} s at {ctx.args.rate:g}/s "
          f"(load {os.getloadavg()[0]:.2f}; not compared)", flush=True)
    record = run_one(dataclasses.replace(ctx, args=args), plan, admin)
    print("\n".join(summary_lines([record])), flush=True)
    return record


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render is not None:
        args.out_dir.mkdir(parents=True, exist_ok=True)
        finish(json.loads(args.render.read_text(encoding="utf-8")), args.render,
               args.render.with_suffix(".png"), args)
        return 0
    started = datetime.now(UTC)
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    kit = args.kit.resolve()
    kit_files(kit)
    scratch = Path(tempfile.mkdtemp(prefix="xwait-compare-"))
    notes: list[str] = []
    jar = None
    systems = list(args.systems)
    if "kstreams" in systems:
        args.cache.mkdir(parents=True, exist_ok=True)
        jar = build_kstreams(kit, args.cache, notes)
        if jar is None:
            systems.remove("kstreams")
    ctx = Context(args, kit, sys.executable, make_topology(scratch / "topology", kit), scratch,
                  jar, args.out_dir / f"compare-{stamp}-logs", notes)
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    try:
        admin.list_topics(timeout=10)
    except KafkaException as exc:
        raise SystemExit(f"compare: the broker at {args.bootstrap} did not answer: {exc}") \
            from exc
    args.out_dir.mkdir(parents=True, exist_ok=True)
    out = args.out_dir / f"compare-{stamp}.json"
    png = args.out_dir / f"compare-{stamp}.png"
    result: dict[str, Any] = {
        "benchmark": "compare", "timestamp": started.isoformat(timespec="seconds"),
        "file": out.name,
        "parameters": {"systems": systems, "workloads": list(args.workloads),
                       "rounds": args.rounds, "waits": args.waits, "rate": args.rate,
                       "seconds": args.seconds, "open_waits": round(args.rate * args.seconds),
                       "partitions": args.partitions, "guarantee": args.guarantee,
                       "xwait_env": dict(args.xwait_env),
                       "xwait_processes": args.xwait_processes, "stall_s": args.stall_s,
                       "seed": args.seed, "warm_up_s": args.warm_up,
                       "bootstrap": args.bootstrap, "kit": str(kit),
                       "kstreams_jar": str(jar) if jar else None},
        "machine": machine_info(), "versions": all_versions(kit), "notes": notes,
        "runs": [], "ratios": [],
    }
    runs: list[dict[str, Any]] = result["runs"]
    planned = schedule(systems, list(args.workloads), args.rounds)
    print(f"compare: {len(planned)} runs ({', '.join(systems)} x {', '.join(args.workloads)} x "
          f"{args.rounds} rounds); kit {kit}", flush=True)
    for note in notes:
        print(f"compare: note: {note}", flush=True)
    try:
        if args.warm_up > 0:
            result["warm_up"] = warm_up(ctx, planned, admin)
        for i, (rnd, place, wname, system) in enumerate(planned, 1):
            prefix = f"cmp{rnd}-{wname}-{system}-{secrets.token_hex(3)}"
            plan = RunPlan(rnd, place, BY_NAME[wname], system, prefix, scratch / prefix)
            print(f"compare: [{i}/{len(planned)}] round {rnd}, {wname}, {system} "
                  f"(load {os.getloadavg()[0]:.2f})", flush=True)
            record = run_one(ctx, plan, admin)
            runs.append(record)
            print("\n".join(summary_lines([record])), flush=True)
            result["ratios"] = ratios(runs)
            out.write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    except KeyboardInterrupt:
        notes.append("interrupted: the runs after the last one recorded were not made")
    finally:
        if not args.keep_logs:
            shutil.rmtree(scratch, ignore_errors=True)
    warm = result.get("warm_up")
    made = [warm, *runs] if warm else runs  # every run on the broker, the warm-up first
    left = sweep_groups(admin, [r["prefix"] for r in made]) if made else []
    if left:
        notes.append(f"consumer groups left on the broker: {', '.join(left)}")
    result["ratios"] = ratios(runs)
    result["duration_s"] = round((datetime.now(UTC) - started).total_seconds(), 1)
    out.write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    finish(result, out, png, args)
    print("compare: every run (round 0: the warm-up, not compared):")
    print("\n".join(summary_lines(made)))
    if args.keep_logs:
        print(f"compare: every run's folder is in {scratch}")
    return 0 if runs and all(r["ok"] for r in runs) and len(runs) == len(planned) else 1


if __name__ == "__main__":
    sys.exit(main())
