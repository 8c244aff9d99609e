"""The chaos runs' load and watch: W1 waits offered at a steady rate and answered on schedule,
and a read_committed watch of what the workers decided.

`Load` offers the waits (60% a valid reply, 10% an invalid reply that an
operator then accepts in review, 30% silent) with reply delays spread across
the deadline, so replies race their deadlines; a reply is produced only once
its request's append is confirmed, so no reply overtakes its request.
`Watch` reads every outcome and action from the start, and answers each
review the workers open.  `expected_outcome` is what the broker's clock says
each wait must become (`streams.testing.chaos` judges every wait by it).
"""

from __future__ import annotations

import heapq
import json
import random
import secrets
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
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
from streams.config import Settings
from streams.processor.gaps import EndOffsets
from streams.processor.sequencer import CLOCKED_ROLES
from streams.processor.stream_clock import grace_for_replicas

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
# How long a Load waits for its producer to be ready (Load.warm) before it gives up.
LOAD_WARM_TIMEOUT_S = 60.0
# Records queued this long with no delivery report at all are purged and sent again
# through a new producer (`Load._unstick`), as the worker's commit path purges its
# stalled records (`Tuning.stall_s`).
LOAD_STALL_S = 15.0
_PURGED = getattr(KafkaError, "_PURGE_QUEUE")  # noqa: B009 - librdkafka's local code


@dataclass
class Wait:
    key: str
    requested_at: int
    kind: str  # valid | invalid | silent
    delay_ms: int = 0
    request_appended: int | None = None
    reply_appended: int | None = None
    reply_acked: int | None = None  # wall ms the load had the reply's acknowledgement


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
        self.producer = self._new_producer()
        # Producers replaced as stuck (`_unstick`), polled until their last report came.
        self._replaced: list[Producer] = []
        # Any delivery report, good or bad, is progress.  Records purged from a stuck
        # producer's queue wait here (role, what, key, topic, value) to be sent again:
        # from the load's loop, never from inside the report (librdkafka's poll).
        self._last_report_at = time.monotonic()
        self._purged: list[tuple[str, str, str, str, bytes]] = []
        self.resent = 0
        # Keys whose reply was sent again: its first copy may be in the log already,
        # appended before the copy that reported (see `_unstick`; `reread_replies`).
        self.resent_replies: set[str] = set()
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

    def _new_producer(self) -> Producer:
        return Producer(self.settings.confluent(**{
            "partitioner": "murmur2_random", "linger.ms": 5, "enable.idempotence": True,
            "statistics.interval.ms": 200, "stats_cb": self._idempotence,
            "error_cb": self._client_errors}))

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
            self._last_report_at = time.monotonic()
            if err is not None and err.code() == _PURGED:
                self._purged.append((role, what, key, msg.topic(), msg.value()))
                return
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
                "failed": dict(self.failed), "queued": self._queued(),
                "client_errors": dict(self._client_errors.counts),
                "resent": self.resent,
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

    def _queued(self) -> int:
        return len(self.producer) + sum(len(p) for p in self._replaced)

    def _unstick(self) -> None:
        """Send again, through a new producer, what a stuck one kept queued.

        After a broker restart a librdkafka producer kept 279 of a crash test's records
        queued for the rest of its run, their partition's leader "not found in cache",
        no acknowledgement after its 25th second: 40 waits counted lost that no worker
        ever saw.  When no report has come for `LOAD_STALL_S` while records are queued,
        the queue is purged, and what the purge reports is produced again by a producer
        with fresh metadata; the old one is polled until its requests in flight are
        answered.

        Queued is not "never sent": librdkafka puts the records of a request that timed
        out back in the queue to retry them, and the broker (a leader killed just after
        it replicated them) may have appended them.  A resent reply can then be in the
        log twice, and the worker rightly decides by the first copy, which no report
        ever named: its key goes into `resent_replies`, and the judge reads the replies
        topic for the first copy's append time (`reread_replies`).  A cluster run judged
        one wait "wrong" by the resent copy (appended 16 s after its deadline) that the
        worker had received by the first.
        """
        for old in list(self._replaced):
            old.poll(0)
            if not len(old):
                self._replaced.remove(old)
        now = time.monotonic()
        if len(self.producer) and now - self._last_report_at >= LOAD_STALL_S:
            self._last_report_at = now  # the resent records get their own stall's time
            stuck = self.producer
            stuck.purge(in_queue=True, in_flight=False, blocking=False)
            stuck.poll(0)  # serves the purge's reports: into `_purged`
            self._replaced.append(stuck)
            self.producer = self._new_producer()
        purged, self._purged = self._purged, []
        for role, what, key, topic, value in purged:
            self.resent += 1
            if what in ("valid", "invalid"):
                self.resent_replies.add(key)
            self.producer.produce(topic, key=key.encode(), value=value,
                                  on_delivery=self._delivered(role, what, key))

    def _drain_due(self, until: float) -> None:
        self.producer.poll(0)
        self._unstick()
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

    def idle(self, seconds: float) -> None:
        """Let `seconds` pass: pumping what is scheduled once every request is out (before
        then the load's own thread sends it)."""
        if self.requests_done.is_set():
            self.pump(seconds)
        else:
            time.sleep(seconds)

    def close(self) -> None:
        self.producer.flush(60)
        for old in self._replaced:
            old.flush(10)


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


def first_appends(settings: Settings, topic: str, keys: set[str] | None = None,
                  timeout: float = 60.0) -> dict[str, int]:
    """The broker's append time of the first record of each key (of `keys`, or every
    key) in `topic`, read whole from its beginning to its end."""
    consumer = Consumer(settings.confluent(**{
        "group.id": f"appended-{secrets.token_hex(4)}", "enable.partition.eof": True,
        "enable.auto.commit": False}))
    try:
        partitions = consumer.list_topics(topic, timeout=timeout).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        left, times = set(partitions), dict[str, int]()
        deadline = time.monotonic() + timeout
        while left and time.monotonic() < deadline:
            for msg in consumer.consume(500, timeout=0.2):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:  # noqa: SLF001
                        left.discard(msg.partition())
                    continue
                key = (msg.key() or b"").decode()
                if keys is None or key in keys:
                    times.setdefault(key, msg.timestamp()[1])
        if left:
            raise RuntimeError(f"{topic}: partitions {sorted(left)} not read to their end "
                               f"within {timeout:.0f} s")
        return times
    finally:
        consumer.close()


def reread_replies(load: Load) -> None:
    """Each resent reply judged by its first copy in the log (see `Load._unstick`): appended
    earlier than the copy that reported, it was never acknowledged, so when Kafka committed
    it is unknown (`reply_acked` None: in flight, unless appended after its deadline)."""
    if not load.resent_replies:
        return
    first = first_appends(load.settings, load.settings.topic("replies"), load.resent_replies)
    for key in load.resent_replies:
        wait = load.by_key[key]
        at = first.get(key)
        if at is not None and (wait.reply_appended is None or at < wait.reply_appended):
            wait.reply_appended, wait.reply_acked = at, None


def reviews_due(waits: Iterable[Wait]) -> int:
    """How many reviews the workers must open: invalid replies appended before their
    deadline (one appended at or after it escalates the wait instead)."""
    return sum(w.kind == "invalid" and w.reply_appended is not None
               and w.reply_appended < w.requested_at + DEADLINE_MS for w in waits)


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
    """The commit grace a worker of `settings` uses (`streams.processor.stream_clock`)."""
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


__all__ = ["DEADLINE_MS", "DEFINITION", "LOAD_WARM_TIMEOUT_S", "Load", "Wait", "Watch",
           "commit_grace_ms", "expected_outcome", "first_appends", "make_waits",
           "reread_replies", "reviews_due"]
