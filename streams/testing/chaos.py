"""A realistic load through real workers while they are killed, moved and cut off.

`run_chaos` offers waits at a steady rate in the W1 mix (60% a valid reply,
10% an invalid reply that an operator then accepts in review, 30% silent)
with reply delays spread across the deadline, so replies race their
deadlines; meanwhile it kills the worker with SIGKILL while it is behind
(restarting it on its own disk or on an empty one), lets a second worker
join and leave, freezes the worker past its session timeout beside a second
worker and wakes it as a zombie (`zombie`), and restarts or freezes the
broker.  Then it waits for every wait to end and judges each against the
broker's clock:

* expected: a valid or invalid reply appended before the wait's deadline
  (requestedAt + the definition's deadline) and committed no later than the
  worker's commit grace after it ends it RECEIVED (an invalid one after
  review); one appended at or after it, or none, ends it ESCALATED.  Append
  times come from the broker (the input topics use LogAppendTime), so the
  verdict does not depend on how fast the machine or the worker is.  A reply
  appended before the deadline whose acknowledgement (it comes once the
  reply is committed) reached the load only after deadline + grace was in
  flight across the boundary: either outcome is right (`in_flight`);
* lost: no outcome; conflicting: two outcome ids, or two kinds; wrong: one
  outcome, not the expected one; duplicates: records repeating an outcomeId
  (or an actionId) that a read_committed consumer saw.

Replies are produced only once their request's append is confirmed, so no
reply ever overtakes its request (that race is tested on its own elsewhere).
"""

from __future__ import annotations

import heapq
import json
import random
import secrets
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from streams import codec
from streams.config import Guarantee, Settings
from streams.processor.gaps import EndOffsets
from streams.processor.punctuator import grace_for_replicas
from streams.processor.sequencer import CLOCKED_ROLES
from streams.testing.workers import WorkerProcess

# How long the watch may read nothing while a partition holds records beyond it before
# it takes another consumer (see Watch._renew_if_stuck).
WATCH_STALL_S = 10.0

DEFINITION = """\
# The chaos run's wait: replies race a short deadline; invalid replies go to review.
name: chaos
variant: single-channel
channels: [portal]
reminder: {every: PT2S, limit: 2}
deadline: PT6S
invalid_reply: review
early_reply_ttl: PT10M
retention: PT2H
response_schema:
  type: object
  required: [approved]
  properties:
    approved: {type: boolean}
"""
DEADLINE_MS = 6_000
# How often the settling run records where the load and the worker stand (an event).
SETTLE_SAMPLE_S = 15.0
# How long a Load waits for its producer to be ready (Load.warm) before it gives up.
LOAD_WARM_TIMEOUT_S = 60.0


@dataclass
class Plan:
    """What one run does; the defaults are sized for the test suite."""

    waits: int = 2_000
    rate: float = 200.0  # requests offered per second
    kills: int = 3  # SIGKILLs of the first worker, each while it is behind
    empty_disk: int = 1  # how many of those restarts start on an empty disk
    joins: int = 1  # a second worker joins, then leaves (SIGTERM)
    broker_restarts: int = 0  # needs `broker` callbacks
    # The worker frozen (SIGSTOP) past its session timeout while behind, beside a second
    # worker that takes every partition meanwhile, then woken: a zombie that believes it
    # still owns them.  With `zombie_keeps_peer` False the second worker is stopped a
    # few seconds later, so that the woken worker takes every partition back.
    zombies: int = 0
    zombie_keeps_peer: bool = False
    zombie_frozen_s: float | None = None  # None: the session timeout + ZOMBIE_PAST_S
    broker_freezes: int = 0  # the broker SIGSTOPped for `broker_frozen_s`; needs `broker`
    broker_frozen_s: float = 30.0
    # Instead of the actions above at random moments: (seconds from the start, action),
    # actions as above ("kill", "join", "broker", "zombie", "broker freeze") or "peer
    # joins" / "peer leaves" (the second worker started and kept / stopped).
    schedule: list[tuple[float, str]] | None = None
    down_s: tuple[float, float] = (1.0, 4.0)  # how long a killed worker stays down
    kill_backlog: int = 300  # each kill finds the worker at least this far behind
    # (kills come right after a restart too, while the worker catches up)
    settle_s: float = 180.0  # how long to wait for the last outcomes
    seed: int = 1


@dataclass
class Broker:
    """How to stop and start (and freeze with SIGSTOP, and thaw) the broker the run uses."""

    stop: Callable[[], None]
    start: Callable[[], None]
    freeze: Callable[[], None] | None = None
    thaw: Callable[[], None] | None = None


# How much longer than its session timeout a zombie is frozen: the group expels it and
# the second worker takes its partitions over (and writes to them) before it wakes.
ZOMBIE_PAST_S = 5.0


@dataclass
class Wait:
    key: str
    requested_at: int
    kind: str  # valid | invalid | silent
    delay_ms: int = 0
    request_appended: int | None = None
    reply_appended: int | None = None
    reply_acked: int | None = None  # wall ms the load had the reply's acknowledgement


@dataclass
class Report:
    guarantee: str
    plan: dict[str, Any]
    waits: int = 0
    lost: int = 0
    conflicting: int = 0
    wrong: int = 0
    in_flight: int = 0  # replies committed after deadline + grace: either outcome is right
    commit_grace_ms: int = 0  # the workers' (XWAIT_COMMIT_GRACE), what the verdicts allow
    worker_grace_ms: list[int] = field(default_factory=list)  # what a worker said it used
    # From a reply's append to its acknowledgement reaching the load (p50, p99, max ms):
    # above the time Kafka took to commit it, what the commit grace is for.
    reply_ack_ms: tuple[int, int, int] | None = None
    load_warm_s: float | None = None  # how long the load's producer took to be ready (Load.warm)
    duplicate_outcomes: int = 0
    duplicate_actions: int = 0
    outcome_records: int = 0
    received: int = 0
    escalated: int = 0
    reviews: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)
    examples: dict[str, list[str]] = field(default_factory=dict)
    seconds: float = 0.0
    # Per failover of a cluster run (streams.testing.cluster_chaos): reply->outcome.
    failovers: list[dict[str, Any]] = field(default_factory=list)
    # Transactions of the workers still running at the end that a newer owner fenced
    # (what a zombie's commits came to).
    fenced: int = 0
    # Both sides of the inputs when the run settled (`input_sides`), so that waits that
    # never ended name the side that stood still: per partition and input topic, the end
    # the load's producer had acknowledged beside the position the workers had applied;
    # the load's producer (offered, acknowledged, failed, still queued, its errors); and
    # `stalled`, the verdict in words (None: both sides reached the end).
    inputs: dict[str, dict[str, dict[str, int | None]]] = field(default_factory=dict)
    load: dict[str, Any] = field(default_factory=dict)
    stalled: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @property
    def clean(self) -> bool:
        return not (self.lost or self.conflicting or self.wrong)


class _IdempotenceState:
    """librdkafka's idemp_state of a producer, read from its statistics (its stats_cb).

    A callable of its own, not a method of the `Load`: a producer whose callback is
    bound to the object holding it is a reference cycle, freed only when the garbage
    collector comes by.  A Load's producer outlived its run that way, reconnecting
    meanwhile to the broker (or cluster) its test had stopped.
    """

    def __init__(self) -> None:
        self.value = "Init"

    def __call__(self, raw: str) -> None:
        if self.value != "Assigned":  # read until then, never again
            self.value = str(json.loads(raw).get("eos", {}).get("idemp_state", "?"))


class _ClientErrors:
    """The load producer's client-level errors (its error_cb), counted by name: a broker
    away shows as _TRANSPORT / _ALL_BROKERS_DOWN while it restarts.  A callable of its
    own for the reason `_IdempotenceState` is."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def __call__(self, err: KafkaError) -> None:
        self.counts[err.name()] += 1


class Load(threading.Thread):
    """Offers the waits at the plan's rate and answers them on schedule.

    Made ready before any run starts its clock (see `warm`): a load made
    before its workers start sends its first request at once.
    """

    def __init__(self, settings: Settings, waits: list[Wait], rate: float, rng: random.Random,
                 warm_timeout: float = LOAD_WARM_TIMEOUT_S) -> None:
        super().__init__(name="chaos-load", daemon=True)
        self.settings = settings
        self.waits = waits
        self.rate = rate
        self.rng = rng
        self.by_key = {w.key: w for w in waits}
        self._idempotence = _IdempotenceState()
        self._client_errors = _ClientErrors()
        self.producer = Producer(settings.confluent(**{
            "partitioner": "murmur2_random", "linger.ms": 5, "enable.idempotence": True,
            "statistics.interval.ms": 200, "stats_cb": self._idempotence,
            "error_cb": self._client_errors}))
        self._due: list[tuple[float, int, str, str]] = []  # (monotonic, seq, what, key)
        self._seq = 0
        self._lock = threading.Lock()
        self.requests_done = threading.Event()
        # Set by `finish`: no more requests are offered (`requests_offered` of `waits` were).
        self._finish = threading.Event()
        self.requests_offered = 0
        self.errors: list[str] = []
        self.produced: Counter[tuple[str, int]] = Counter()  # (topic, partition) -> records
        # Per input role (requests, replies, commands): records handed to the producer,
        # acknowledged by the broker, failed; and when the last acknowledgement came.
        self.offered: Counter[str] = Counter()
        self.acked: Counter[str] = Counter()
        self.failed: Counter[str] = Counter()
        self.last_ack_at: float | None = None  # time.monotonic()
        self.warm_s = self.warm(warm_timeout)

    def warm(self, timeout: float) -> float:
        """Until the producer holds its idempotent producer id and knows the leaders of the
        topics it writes; the seconds that took.

        An idempotent producer sends nothing before the broker gives it a producer id.
        A broker just started (the crash tests' own broker) answers "Coordinator load in
        progress" while it fetches a block of ids from its controller (Kafka's
        RPCProducerIdManager), and librdkafka asks again after a backoff: once (CI, a
        loaded machine), the requests of the first seconds were acknowledged
        seconds late, so every reply (sent once its request is acknowledged) came after
        its deadline (received 7, escalated 993, no review at all). Warmed here, before
        the run's clock offers any wait, the first request leaves at once.
        """
        started = time.monotonic()
        deadline = started + timeout
        topics = {self.settings.topic(role) for role in ("requests", "replies", "commands")}
        while True:
            self.producer.poll(0.05)
            if self._idempotence.value == "Assigned":
                left = max(0.1, deadline - time.monotonic())
                topics = {t for t in topics if not self._leaders_known(t, min(left, 5.0))}
                if not topics:
                    return round(time.monotonic() - started, 2)
            if time.monotonic() >= deadline:
                what = (f"the leaders of {sorted(topics)}"
                        if self._idempotence.value == "Assigned"
                        else f"an idempotent producer id (state {self._idempotence.value})")
                raise RuntimeError(
                    f"the chaos load's producer got no {what} from {self.settings.bootstrap} "
                    f"within {timeout:.0f}s: the run would offer waits nobody acknowledges")

    def _leaders_known(self, topic: str, timeout: float) -> bool:
        try:
            meta = self.producer.list_topics(topic, timeout=timeout).topics.get(topic)
        except KafkaException:
            return False
        return (meta is not None and meta.error is None and bool(meta.partitions)
                and all(p.leader >= 0 and p.error is None for p in meta.partitions.values()))

    def schedule(self, at: float, what: str, key: str) -> None:
        with self._lock:
            self._seq += 1
            heapq.heappush(self._due, (at, self._seq, what, key))

    def _delivered(self, role: str, what: str, key: str
                   ) -> Callable[[KafkaError | None, Any], None]:
        def report(err: KafkaError | None, msg: Any) -> None:
            if err is not None:
                self.failed[role] += 1
                self.errors.append(f"{what} {key}: {err}")
                return
            self.acked[role] += 1
            self.last_ack_at = time.monotonic()
            ts_type, ts = msg.timestamp()
            appended = ts if ts_type == TIMESTAMP_LOG_APPEND_TIME else None
            self.produced[(msg.topic(), msg.partition())] = max(
                self.produced[(msg.topic(), msg.partition())], msg.offset() + 1)
            wait = self.by_key[key]
            if what == "request":
                wait.request_appended = appended
                if wait.kind != "silent":  # the reply leaves once the request is in
                    left = wait.requested_at + wait.delay_ms - time.time() * 1000
                    self.schedule(time.monotonic() + max(0.0, left / 1000), wait.kind, key)
            elif what in ("valid", "invalid"):
                wait.reply_appended = appended
                wait.reply_acked = int(time.time() * 1000)
        return report

    def _send(self, role: str, key: str, record: dict[str, Any], what: str) -> None:
        self.offered[role] += 1
        self.producer.produce(self.settings.topic(role), key=key.encode(),
                              value=json.dumps(record).encode(),
                              on_delivery=self._delivered(role, what, key))

    def standing(self, started: float) -> dict[str, Any]:
        """Where the load's producer stands: per input role what it offered, had
        acknowledged and failed; how many records its queue still holds; its errors; and
        the seconds from `started` (the run's time.monotonic()) to its last
        acknowledgement."""
        self.producer.poll(0)
        return {"offered": dict(self.offered), "acknowledged": dict(self.acked),
                "failed": dict(self.failed), "queued": len(self.producer),
                "client_errors": dict(self._client_errors.counts),
                "errors": self.errors[:5],
                "last_ack_s": None if self.last_ack_at is None
                else round(self.last_ack_at - started, 1)}

    def review(self, key: str) -> None:
        """An operator accepts the invalid reply of `key` a moment after the review opens."""
        self.schedule(time.monotonic() + 0.3, "review", key)

    def run(self) -> None:
        start = time.monotonic()
        for i, wait in enumerate(self.waits):
            at = start + i / self.rate
            while True:
                self._drain_due(until=at)
                now = time.monotonic()
                if now >= at or self._finish.is_set():
                    break
                time.sleep(min(0.005, at - now))
            if self._finish.is_set():
                break
            wait.requested_at = int(time.time() * 1000)
            self._send("requests", wait.key, {"correlationKey": wait.key, "definition": "chaos",
                                              "requestedAt": wait.requested_at}, "request")
            self.requests_offered = i + 1
        self.requests_done.set()

    def finish(self) -> list[Wait]:
        """Offer no more requests (a load sized by what it runs beside, not by its count);
        the waits offered, once the load has stopped offering.  Their replies and reviews
        go on through `pump`."""
        self._finish.set()
        self.join()
        self.waits = self.waits[:self.requests_offered]
        return self.waits

    def _drain_due(self, until: float) -> None:
        self.producer.poll(0)
        while True:
            with self._lock:
                if not self._due or self._due[0][0] > min(until, time.monotonic()):
                    return
                _, _, what, key = heapq.heappop(self._due)
            if what == "valid":
                self._send("replies", key, {"correlationKey": key, "channel": "portal",
                                            "responseData": json.dumps({"approved": True})},
                           what)
            elif what == "invalid":
                self._send("replies", key, {"correlationKey": key, "channel": "portal",
                                            "responseData": json.dumps({"approved": "maybe"})},
                           what)
            else:
                self._send("commands", key, {"correlationKey": key, "command": "REVIEW",
                                             "reviewOutcome": "Accept",
                                             "reviewNote": "chaos run", "operator": "chaos"},
                           what)

    def pump(self, seconds: float) -> None:
        """After the requests: keep sending what is scheduled (replies, reviews)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self._drain_due(until=time.monotonic())
            time.sleep(0.01)

    def close(self) -> None:
        self.producer.flush(60)


class Watch(threading.Thread):
    """A read_committed consumer of outcomes and actions, from their beginning."""

    def __init__(self, settings: Settings, on_review: Callable[[str], None]) -> None:
        super().__init__(name="chaos-watch", daemon=True)
        self.settings = settings
        self.on_review = on_review
        self.outcomes: dict[str, list[tuple[str, str]]] = defaultdict(list)
        # Each outcome beside `outcomes`, for the examples: where it was read
        # (partition, offset, timestamp ms) and its reason, parkedAt and endedAt.
        self.where: dict[str, list[tuple[int, int, int, str, int, int]]] = defaultdict(list)
        self.repeated_actions: list[str] = []  # the first few, for the examples
        self.action_ids: Counter[str] = Counter()
        self.reviews_opened: set[str] = set()
        self.stopped = threading.Event()
        self.renewed = 0  # consumers replaced after they stood still below the end
        self.consumer = self._consumer()

    def _consumer(self) -> Consumer:
        return Consumer(self.settings.confluent(**{
            "group.id": f"chaos-watch-{secrets.token_hex(4)}", "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "isolation.level": "read_committed"}))

    def run(self) -> None:
        outcomes, actions = self.settings.topic("outcomes"), self.settings.topic("actions")
        # Every partition assigned, not subscribed: a group member of librdkafka 2.x
        # lost its coordinator across a broker restart, timed its session out and
        # never joined again (a crash bench run then counted 4,385 waits stuck in a
        # review the watch never saw opened).  Assigned partitions need no group.
        at = {(topic, p): OFFSET_BEGINNING for topic in (outcomes, actions)
              for p in self.consumer.list_topics(topic, timeout=30).topics[topic].partitions}
        self.consumer.assign([TopicPartition(t, p, o) for (t, p), o in at.items()])
        checked_at = time.monotonic()
        seen = dict(at)  # where each partition stood at the last check
        while not self.stopped.is_set():
            self._take(self.consumer.consume(500, timeout=0.2), at, outcomes)
            # After what was consumed is taken (`at` past it): a new consumer assigned from
            # `at` before that re-read the 500 records in hand, and an exactly_once run
            # counted 500 duplicate actions the worker had written once.
            if time.monotonic() - checked_at > WATCH_STALL_S:
                # Per partition, not "nothing read at all": a consumer went on delivering
                # some partitions after a broker restart and never again others (2,878
                # waits then sat in reviews the watch never saw opened).
                checked_at = time.monotonic()
                still = {tp for tp, offset in at.items() if seen.get(tp) == offset}
                seen = dict(at)
                if still:
                    self._renew_if_stuck(at, still)
        self.consumer.close()

    def _take(self, msgs: list[Any], at: dict[tuple[str, int], int], outcomes: str) -> None:
        for msg in msgs:
            if msg.error() is not None or msg.value() is None:
                continue
            tp, offset = (msg.topic() or "", msg.partition() or 0), msg.offset() or 0
            if offset < at.get(tp, 0):
                continue  # read already (a renewed consumer starts where this one stood)
            at[tp] = offset + 1
            if msg.topic() == outcomes:
                o = codec.decode("Outcome", msg.value())
                self.outcomes[o["correlationKey"]].append((o["outcomeId"], o["outcome"]))
                self.where[o["correlationKey"]].append(
                    (msg.partition() or 0, msg.offset() or 0, msg.timestamp()[1],
                     o["reason"], o["parkedAt"], o["endedAt"]))
            else:
                a = codec.decode("Action", msg.value())
                self.action_ids[a["actionId"]] += 1
                if self.action_ids[a["actionId"]] == 2 and len(self.repeated_actions) < 5:
                    self.repeated_actions.append(
                        f"{a['action']} of {a['correlationKey']} attempt {a['attempt']} "
                        f"id {a['actionId'][:8]} at partition {msg.partition()} offset "
                        f"{msg.offset()} ms {msg.timestamp()[1]}")
                if a["action"] == "REVIEW_NEEDED" and a["correlationKey"] not in \
                        self.reviews_opened:
                    self.reviews_opened.add(a["correlationKey"])
                    self.on_review(a["correlationKey"])

    def _renew_if_stuck(self, at: dict[tuple[str, int], int],
                        still: set[tuple[str, int]]) -> None:
        """A consumer standing still below the end of a partition: another one, from where
        this one was.  Seen after broker restarts under exactly_once: the watch read nothing
        more while 6,175 reviews it never saw opened waited for it (the worker had written
        them), and the run counted those waits lost.  `still`: the partitions that
        delivered nothing since the last check; one of them behind its end is enough."""
        try:
            positions = {(tp.topic, tp.partition): tp.offset for tp in self.consumer.position(
                [TopicPartition(t, p) for t, p in still])}
        except KafkaException:
            return
        highs = self._high_watermarks(still)
        if highs is None:
            return  # the broker is away: nothing to conclude
        behind = False
        for (topic, p), high in highs.items():
            # The consumer's position passes commit markers and aborted records that
            # deliver nothing; + 1: a commit marker may end the partition.
            here = max(positions.get((topic, p), -1), at[(topic, p)], 0)
            behind = behind or high > here + 1
        if not behind:
            return
        self.consumer.close()
        self.consumer = self._consumer()
        self.consumer.assign([TopicPartition(t, p, o) for (t, p), o in at.items()])
        self.renewed += 1

    def _high_watermarks(self, tps: set[tuple[str, int]]) -> dict[tuple[str, int], int] | None:
        """Asked on a consumer made for the question, not on the watch's own.

        A client made before a broker restart can answer with its stale
        leader epoch's error for good (`EndOffsets` found that of admin
        clients); asked on the watch's own consumer, every check would then
        conclude "the broker is away" while that consumer stood still.  One
        reading of a CI run on a busy machine where a worker that lived
        through a broker restart had 541 of 600 waits counted lost, with no
        error in its log, its inputs read to their end and no commit in
        flight when it stopped.  (A later such run had another cause, in the
        worker: its commit waited on stale metadata, `config.METADATA_REFRESH_MS`;
        `run_chaos` records the worker's standing and stacks when waits stay
        open, which told the two apart.)
        """
        probe = Consumer(self.settings.confluent(**{
            "group.id": f"chaos-watch-ends-{secrets.token_hex(4)}",
            "enable.auto.commit": False, "isolation.level": "read_committed"}))
        try:
            return {(t, p): probe.get_watermark_offsets(TopicPartition(t, p), timeout=5,
                                                        cached=False)[1] for t, p in tps}
        except KafkaException:
            return None
        finally:
            probe.close()

    def ended(self) -> int:
        return len(self.outcomes)


def expected_outcome(wait: Wait, grace_ms: int = 0) -> str | None:
    """What the broker's clock says: a reply appended before the deadline and committed
    within the grace after it is received; None: in flight then, either is right."""
    if wait.kind == "silent" or wait.reply_appended is None:
        return "ESCALATED"
    deadline = wait.requested_at + DEADLINE_MS
    if wait.reply_appended >= deadline:
        return "ESCALATED"
    if wait.reply_acked is not None and wait.reply_acked <= deadline + grace_ms:
        return "RECEIVED"
    return None


def commit_grace_ms(settings: Settings) -> int:
    """The commit grace a worker of `settings` uses (`streams.processor.punctuator`)."""
    if settings.commit_grace is not None:
        return round(settings.commit_grace * 1000)
    inputs = [settings.topic(role.value) for role in CLOCKED_ROLES]
    return grace_for_replicas(EndOffsets(settings.confluent()).replicas(inputs, timeout=30))


def make_waits(n: int, rng: random.Random) -> list[Wait]:
    waits = []
    for _ in range(n):
        roll = rng.random()
        kind = "valid" if roll < 0.6 else "invalid" if roll < 0.7 else "silent"
        # Spread across the deadline: about a quarter of the replies come too late.
        delay = int(rng.uniform(0, DEADLINE_MS * 1.3)) if kind != "silent" else 0
        waits.append(Wait(secrets.token_hex(16), 0, kind, delay))
    return waits


def _applied(stats: dict[str, Any]) -> int:
    """Input records the worker has applied (its stored positions, timers aside)."""
    positions: dict[str, dict[str, int]] = stats.get("positions", {})
    return sum(o for part in positions.values() for role, o in part.items() if role != "timers")


def _standing(stats: dict[str, Any] | None) -> dict[str, Any] | None:
    """What says where a worker stands still: its input, stream time, timers and commits."""
    if stats is None:
        return None
    keep = ("ownedPartitions", "ready", "held", "streamTime", "positions", "armedTimers",
            "timersInFlight", "latencyMs", "loopLagMs", "counters")
    return {k: stats.get(k) for k in keep}


INPUT_ROLES = ("requests", "replies", "commands")


def input_sides(report: Report, load: Load, workers: list[WorkerProcess], started: float
                ) -> None:
    """Record both sides of the inputs in `report` (`inputs`, `load`, `stalled`): what the
    load's producer had acknowledged per partition beside what the running `workers` had
    applied (each partition from its owner; None where no running worker owns it).

    Asked before the workers stop.  A wait that never ended then names its side: a
    producer that never had its requests acknowledged (after a broker restart) is the
    test's own load standing still; a worker whose applied position stays below an
    acknowledged end stopped reading its input; both at the end point past the inputs
    (the decisions, the outcomes' commit, or the watch).
    """
    applied: dict[tuple[int, str], int] = {}
    owner: dict[int, str] = {}
    for worker in workers:
        stats = worker.stats() if worker.running else None
        if stats is None:
            continue
        for p in stats.get("ownedPartitions") or []:
            owner[int(p)] = worker.name
            part = (stats.get("positions") or {}).get(str(p), {})
            for role in INPUT_ROLES:
                applied[(int(p), role)] = max(applied.get((int(p), role), 0),
                                              int(part.get(role, 0)))
    inputs: dict[str, dict[str, dict[str, int | None]]] = {}
    behind: list[str] = []
    for p in range(load.settings.partitions):
        inputs[str(p)] = {}
        for role in INPUT_ROLES:
            acked = load.produced.get((load.settings.topic(role), p), 0)
            got = applied.get((p, role)) if p in owner else None
            inputs[str(p)][role] = {"acknowledged": acked, "applied": got}
            if got is None or got < acked:
                behind.append(f"{role} {p}: {got if got is not None else 'unowned'}/{acked}")
    report.inputs = inputs
    report.load = load.standing(started)
    offered, acked = report.load["offered"], report.load["acknowledged"]
    unacked = {r: offered.get(r, 0) - acked.get(r, 0) for r in INPUT_ROLES
               if offered.get(r, 0) > acked.get(r, 0)}
    verdict = []
    if unacked:
        verdict.append(
            f"the load: its producer had no acknowledgement for {unacked} (failed "
            f"{report.load['failed']}, {report.load['queued']} still queued, last "
            f"acknowledgement {report.load['last_ack_s']} s into the run, errors "
            f"{report.load['client_errors']})")
    if behind:
        verdict.append("the worker: applied below the acknowledged end (role partition: "
                       "applied/acknowledged) " + ", ".join(behind))
    report.stalled = "; ".join(verdict) or None


def _backlog(load: Load, worker: WorkerProcess) -> int | None:
    """Input records produced but not yet applied by `worker`, or None if it does not answer."""
    stats = worker.stats()
    if stats is None:
        return None
    offered = sum(n for (topic, _), n in load.produced.items())
    return max(0, offered - _applied(stats))


def _behind(load: Load, worker: WorkerProcess, wanted: int, rng: random.Random,
            freeze_s: float = 4.0) -> int | None:
    """Put `worker` at least `wanted` records behind; its backlog just before the kill.

    A worker that keeps up with the load (the usual case: it drains faster than the run
    offers) is frozen with SIGSTOP while the load piles up ten times that, then thawed
    and killed a moment later, in the middle of catching up: the kill then finds fetched,
    undecided and uncommitted input. (Twice was enough until the worker got faster: it
    then caught up within the moment, and a CI run's kills found 153, 0 and 1 records;
    with a 3 s freeze and fetch turns of 1 MiB, one run's kills found 151, 164 and 0.
    On a machine three times faster, the 1,300 records a 4 s freeze piled up at 160
    waits a second were gone 0.02-0.15 s after the thaw: kills found 12, 5 and 0, and
    with the thaw 0-40 ms before the worker is asked its backlog, 20, 14 and 0 (it
    answers between two batches).  So the freeze piles up ten times `wanted`, and the
    CI test offers twice the load.)
    The freeze (with the heartbeat interval before it) stays under the session timeout,
    so the group does not move the partitions meanwhile.
    """
    backlog = _backlog(load, worker)
    if backlog is not None and backlog >= wanted:
        return backlog
    applied = _applied(worker.stats() or {})
    worker.freeze()
    try:
        thaw_at = time.monotonic() + freeze_s
        while time.monotonic() < thaw_at:
            if sum(load.produced.values()) - applied >= 10 * wanted:
                break
            load.pump(0.05) if load.requests_done.is_set() else time.sleep(0.05)
    finally:
        worker.thaw()
    time.sleep(rng.uniform(0.0, 0.04))  # it fetches and starts deciding
    return _backlog(load, worker)


def _zombie(load: Load, w1: WorkerProcess, w2: WorkerProcess, plan: Plan,
            rng: random.Random, event: Callable[..., None]) -> None:
    """Freeze `w1` past its session timeout while behind, beside `w2`; wake it (a zombie).

    w2 takes every partition over while w1 is frozen (if w2 is not running
    yet, it joins at the moment of the freeze: the rebalance its join starts
    expels w1).  w1 wakes believing it owns its partitions, with a backlog
    fetched and decided before the freeze: whatever it commits now is fenced
    (`streams.processor.commit` F1-F5), and the group's next assignment
    splits the partitions again, w1 keeping standby copies of w2's.  Unless
    the plan keeps the peer, w2 is then stopped, so that w1 takes every
    partition back, restoring from its own changelog offsets: the restores
    the fencing must keep honest.
    """
    partitions = w1.settings.partitions
    frozen_s = plan.zombie_frozen_s or w1.settings.session_timeout + ZOMBIE_PAST_S
    takeovers = w1.counter("takeovers")
    backlog = _behind_for_zombie(load, w1, plan.kill_backlog)
    joining = not w2.running
    if joining:
        w2.start(wait_owned=False)
    w1.freeze()
    event("worker frozen past its session timeout", backlog=backlog, seconds=frozen_s,
          peer_joins=joining)
    frozen_at = time.monotonic()
    try:
        def peer_owns_all() -> bool:
            owned = (w2.stats() or {}).get("ownedPartitions") or []
            return len(owned) == partitions and time.monotonic() - frozen_at >= frozen_s
        _wait_for(load, peer_owns_all, frozen_s + 120)
        owned = (w2.stats() or {}).get("ownedPartitions", [])
    finally:
        w1.thaw()
    event("frozen worker woken", peer_owns=owned, of=partitions,
          frozen_s=round(time.monotonic() - frozen_at, 1))
    # The zombie hears from the group at its next heartbeat and rejoins: a takeover of its
    # own again (not the stale stats of before the freeze).
    rejoined = _wait_for(load, lambda: w1.counter("takeovers") > takeovers and bool(
        (w1.stats() or {}).get("ready")), 120)
    event("woken worker rejoined" if rejoined else "woken worker did not rejoin",
          owns=(w1.stats() or {}).get("ownedPartitions"),
          peer_owns=(w2.stats() or {}).get("ownedPartitions"),
          fenced=w1.counter("transactions.fenced"), lost=w1.counter("partitions.lost"))
    if not plan.zombie_keeps_peer:
        pause = rng.uniform(2.0, 5.0)
        load.pump(pause) if load.requests_done.is_set() else time.sleep(pause)
        w2.stop()
        event("second worker left")


def _behind_for_zombie(load: Load, worker: WorkerProcess, wanted: int) -> int | None:
    """Let input pile up in front of `worker` (a short freeze, under the session timeout),
    then thaw it: it is fetching and deciding that backlog when the long freeze comes."""
    applied = _applied(worker.stats() or {})
    worker.freeze()
    try:
        thaw_at = time.monotonic() + 3.0
        while time.monotonic() < thaw_at and sum(load.produced.values()) - applied < wanted:
            load.pump(0.05) if load.requests_done.is_set() else time.sleep(0.05)
    finally:
        worker.thaw()
    time.sleep(0.3)  # it fetches and starts deciding and committing the backlog
    return _backlog(load, worker)


def _wait_for(load: Load, condition: Callable[[], bool], timeout: float) -> bool:
    """Until `condition` holds (the load goes on meanwhile); whether it did."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        load.pump(0.3) if load.requests_done.is_set() else time.sleep(0.3)
    return False


def run_chaos(settings: Settings, folder: Path, plan: Plan, broker: Broker | None = None,
              log: Callable[[str], None] = print) -> Report:
    """Run the plan against workers of `settings` (topics and topology made by the caller)."""
    rng = random.Random(plan.seed)  # noqa: S311 - a reproducible load, not a secret
    report = Report(settings.guarantee.value, dict(plan.__dict__))
    started = time.monotonic()
    waits = make_waits(plan.waits, rng)
    load = Load(settings, waits, plan.rate, rng)
    watch = Watch(settings, load.review)
    w1 = WorkerProcess(settings, folder, "w1")
    w2 = WorkerProcess(settings, folder, "w2")

    def event(kind: str, **detail: Any) -> None:
        entry = {"at": round(time.monotonic() - started, 1), "event": kind, **detail}
        report.events.append(entry)
        log(json.dumps(entry))

    actions: list[str] = (["kill"] * plan.kills + ["join"] * plan.joins
                          + ["broker"] * (plan.broker_restarts if broker else 0)
                          + ["zombie"] * plan.zombies
                          + ["broker freeze"] * (plan.broker_freezes
                                                 if broker and broker.freeze else 0))
    rng.shuffle(actions)
    empty_left = plan.empty_disk
    w1.start()
    watch.start()
    load.start()
    try:
        produce_s = plan.waits / plan.rate
        gap = produce_s / (len(actions) + 1)
        just_restarted = False
        schedule = sorted(plan.schedule or [])
        if schedule:
            actions = [action for _, action in schedule]
        for i, action in enumerate(actions):
            if schedule:
                at = started + schedule[i][0]
                while time.monotonic() < at:
                    load.pump(min(0.5, at - time.monotonic())) if load.requests_done.is_set() \
                        else time.sleep(min(0.5, max(0.0, at - time.monotonic())))
            elif action == "kill" and just_restarted:
                # The restarted worker has the backlog of its downtime: kill it while
                # it catches up, a moment after it took its partitions back.
                time.sleep(rng.uniform(0.2, 1.0))
            else:
                time.sleep(rng.uniform(0.5 * gap, gap))
            just_restarted = action == "kill"
            if action == "kill":
                backlog = _behind(load, w1, plan.kill_backlog, rng)
                w1.kill9()
                empty = empty_left > 0
                if empty:
                    w1.wipe()
                    empty_left -= 1
                event("kill -9", backlog=backlog, empty_disk=empty)
                down = rng.uniform(*plan.down_s)
                load.pump(down) if load.requests_done.is_set() else time.sleep(down)
                w1.start(timeout=180)
                event("restarted", backlog=_backlog(load, w1))
            elif action == "join":
                w2.start(timeout=180)
                event("second worker joined", owns=(w2.stats() or {}).get("ownedPartitions"))
                time.sleep(rng.uniform(2.0, 5.0))
                w2.stop()
                event("second worker left")
            elif action == "broker" and broker is not None:
                event("broker stopping", backlog=_backlog(load, w1))
                broker.stop()
                time.sleep(rng.uniform(1.0, 3.0))
                broker.start()
                event("broker started")
            elif action == "zombie":
                _zombie(load, w1, w2, plan, rng, event)
            elif action == "peer joins":
                w2.start(timeout=180)
                event("second worker joined", owns=(w2.stats() or {}).get("ownedPartitions"))
            elif action == "peer leaves":
                w2.stop()
                event("second worker left")
            elif action == "broker freeze" and broker is not None and broker.freeze \
                    and broker.thaw:
                event("broker frozen", backlog=_backlog(load, w1), seconds=plan.broker_frozen_s)
                broker.freeze()
                try:
                    pause = plan.broker_frozen_s
                    load.pump(pause) if load.requests_done.is_set() else time.sleep(pause)
                finally:
                    broker.thaw()
                event("broker thawed")
        load.join()
        # Replies and reviews still scheduled; then every wait must end.
        settle_until = time.monotonic() + plan.settle_s
        sampled = time.monotonic()
        while time.monotonic() < settle_until and watch.ended() < plan.waits:
            load.pump(1.0)
            if not w1.running:
                event("worker exited", log=w1.log_tail(20))
                break
            if time.monotonic() - sampled >= SETTLE_SAMPLE_S:
                # Over time, so that a stall shows when it began and which side moved.
                sampled = time.monotonic()
                stats = w1.stats() or {}
                run_start_s = time.time() - (time.monotonic() - started)
                event("settling", ended=watch.ended(), acknowledged=dict(load.acked),
                      applied=_applied(stats), held=stats.get("held"),
                      stream_time_s={p: round(t / 1000 - run_start_s, 1) for p, t in
                                     (stats.get("streamTime") or {}).items()})
        load.pump(2.0)  # late duplicates, if any, arrive too
        report.fenced = sum(w.counter("transactions.fenced") for w in (w1, w2) if w.running)
        input_sides(report, load, [w1, w2], started)
        if watch.ended() < plan.waits and w1.running:
            # For the report: where the worker stood, and its threads' stacks in its log.
            event("waits still open", stats=_standing(w1.stats()), stalled=report.stalled,
                  threads_in=str(w1.log_path))
            w1.dump_threads()
        event("settled", ended=watch.ended(), watch_renewed=watch.renewed)
    finally:
        load.close()
        w2.stop()
        w1.stop()
        watch.stopped.set()
        watch.join(10)
    return judge(report, waits, watch, load, started)


def judge(report: Report, waits: list[Wait], watch: Watch, load: Load, started: float
           ) -> Report:
    examples: dict[str, list[str]] = defaultdict(list)
    grace_ms = report.commit_grace_ms = commit_grace_ms(load.settings)
    report.load_warm_s = load.warm_s
    for w in waits:
        got = watch.outcomes.get(w.key, [])
        ids, kinds = {i for i, _ in got}, {k for _, k in got}
        if not got:
            report.lost += 1
            examples["lost"].append(w.key)
            continue
        if len(ids) > 1 or len(kinds) > 1:
            report.conflicting += 1
            examples["conflicting"].append(
                f"{w.key} {w.kind} requested {w.requested_at} reply appended "
                f"{w.reply_appended}: " + "; ".join(
                    f"{kind} ({reason}) id {oid[:8]} parked {parked} ended {ended} at "
                    f"partition {p} offset {offset} ms {ms}"
                    for (oid, kind), (p, offset, ms, reason, parked, ended)
                    in zip(got, watch.where[w.key], strict=True)))
            continue
        (kind,) = kinds
        report.received += kind == "RECEIVED"
        report.escalated += kind == "ESCALATED"
        expected = expected_outcome(w, grace_ms)
        report.in_flight += expected is None
        if expected is not None and kind != expected:
            report.wrong += 1
            examples["wrong"].append(f"{w.key} {w.kind} requested {w.requested_at} reply "
                                     f"appended {w.reply_appended} acknowledged "
                                     f"{w.reply_acked}: {kind}")
        report.duplicate_outcomes += len(got) - 1
        if len(got) > 1:
            examples["duplicated"].append(f"{w.key} read at (partition, offset, ms) "
                                          f"{[at[:3] for at in watch.where[w.key]]}")
    report.waits = len(waits)
    report.outcome_records = sum(len(v) for v in watch.outcomes.values())
    report.duplicate_actions = sum(n - 1 for n in watch.action_ids.values())
    if watch.repeated_actions:
        examples["repeated_actions"] = watch.repeated_actions
    report.reviews = len(watch.reviews_opened)
    acks = sorted(w.reply_acked - w.reply_appended for w in waits
                  if w.reply_acked is not None and w.reply_appended is not None)
    if acks:
        report.reply_ack_ms = (acks[len(acks) // 2], acks[min(len(acks) - 1,
                                                              int(0.99 * len(acks)))], acks[-1])
    report.examples = {k: v[:5] for k, v in examples.items()}
    report.seconds = round(time.monotonic() - started, 1)
    if load.errors:
        report.examples["producer_errors"] = load.errors[:5]
    return report


def chaos_settings(base: Settings, folder: Path, guarantee: Guarantee) -> Settings:
    """`base` with a topology holding the chaos definition and the repo's topics."""
    from streams.config import REPO_ROOT

    topo = folder / "topology"
    (topo / "waits").mkdir(parents=True, exist_ok=True)
    (topo / "topics.yaml").write_text((REPO_ROOT / "topology" / "topics.yaml").read_text())
    (topo / "waits" / "chaos.yaml").write_text(DEFINITION)
    # A worker restarted after kill -9 owns nothing until the group drops its dead
    # member, one session timeout after the kill: 7 s (not 10) takes 3 s off each restart
    # and still outlasts a 4 s freeze plus a heartbeat interval (1.2 s).
    return base.with_overrides(topology=topo, guarantee=guarantee, timer_tick=0.2,
                               session_timeout=7.0)


__all__ = ["DEADLINE_MS", "Broker", "Load", "Plan", "Report", "Watch", "chaos_settings",
           "expected_outcome", "input_sides", "judge", "make_waits", "run_chaos"]
