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
The load and the watch are `streams.testing.load`.
"""

from __future__ import annotations

import json
import random
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streams.config import Guarantee, Settings
from streams.testing.load import (
    DEADLINE_MS,
    DEFINITION,
    Load,
    Wait,
    Watch,
    commit_grace_ms,
    expected_outcome,
    make_waits,
    reread_replies,
    reviews_due,
)
from streams.testing.workers import WorkerProcess, standing

# How often the settling run records where the load and the worker stand (an event).
SETTLE_SAMPLE_S = 15.0


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
    # Replies the load sent again through a new producer (`Load._unstick`), each judged by
    # its first copy in the log (`reread_replies`).
    replies_resent: int = 0
    # The counts of the run: alike in shape with a wait's own counts (streams/core/state.py;
    # duplicates lists the pair), deliberately: fields of two records, no logic shared.
    duplicate_outcomes: int = 0
    duplicate_actions: int = 0
    outcome_records: int = 0
    received: int = 0
    escalated: int = 0
    reviews: int = 0
    # Invalid replies appended before their deadline: each one a review the workers must
    # open.  0 on a machine so busy that every reply came late: the run then says
    # nothing of the review flow (the tests skip that check and say so).
    reviewable: int = 0
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


class Stage:
    """What every chaos run starts with: its random source (the plan's seed), its report,
    the waits, the load offering them, the watch of what the workers decided, and the
    run's events, timed from its start, kept in the report and logged as they come
    (`event`).  Nothing is started: the run starts the watch and the load when its
    workers are up.  `started`: the run's clock when it started before the stage (the
    load warms up on the topics, which a run may have to make first)."""

    def __init__(self, settings: Settings, plan: Any, log: Callable[[str], None],
                 started: float | None = None) -> None:
        self.rng = random.Random(plan.seed)  # noqa: S311 - a reproducible load, not a secret
        self.report = Report(settings.guarantee.value, dict(plan.__dict__))
        self.started = time.monotonic() if started is None else started
        self.waits = make_waits(plan.waits, self.rng)
        self.load = Load(settings, self.waits, plan.rate, self.rng)
        self.watch = Watch(settings, self.load.review)
        self.log = log

    def event(self, kind: str, **detail: Any) -> None:
        entry = {"at": round(time.monotonic() - self.started, 1), "event": kind, **detail}
        self.report.events.append(entry)
        self.log(json.dumps(entry))

    def settle(self, worker: WorkerProcess, seconds: float) -> None:
        """After the last request: replies and reviews still scheduled, then until every
        wait ended (or `seconds`, or `worker` exited), then late duplicates, if any."""
        self.load.join()
        settle_until = time.monotonic() + seconds
        sampled = time.monotonic()
        while time.monotonic() < settle_until and self.watch.ended() < len(self.waits):
            self.load.pump(1.0)
            if not worker.running:
                self.event("worker exited", log=worker.log_tail(20))
                break
            if time.monotonic() - sampled >= SETTLE_SAMPLE_S:
                # Over time, so that a stall shows when it began and which side moved.
                sampled = time.monotonic()
                stats = worker.stats() or {}
                run_start_s = time.time() - (time.monotonic() - self.started)
                self.event("settling", ended=self.watch.ended(),
                           acknowledged=dict(self.load.acked), applied=_applied(stats),
                           held=stats.get("held"),
                           stream_time_s={p: round(t / 1000 - run_start_s, 1) for p, t in
                                          (stats.get("streamTime") or {}).items()})
        self.load.pump(2.0)  # late duplicates, if any, arrive too

    def close(self) -> None:
        """The watch stopped (after the load's close and the workers' stop: the run's)."""
        self.watch.stopped.set()
        self.watch.join(10)

    def judged(self) -> Report:
        """The report with every wait judged (after `close`)."""
        return judge(self.report, self.waits, self.watch, self.load, self.started)


def _applied(stats: dict[str, Any]) -> int:
    """Input records the worker has applied (its stored positions, timers aside)."""
    positions: dict[str, dict[str, int]] = stats.get("positions", {})
    return sum(o for part in positions.values() for role, o in part.items() if role != "timers")


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
            load.idle(0.05)
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
    backlog = _behind_for_zombie(load, w1, plan.kill_backlog, rng)
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
        load.idle(pause)
        w2.stop()
        event("second worker left")


def _behind_for_zombie(load: Load, worker: WorkerProcess, wanted: int,
                       rng: random.Random) -> int:
    """Pile input up in front of `worker` (a short freeze, under the session timeout), thaw
    it, and return 0-40 ms later, while it is fetching and deciding that backlog: the long
    freeze that follows then mostly finds a batch decided and not yet committed, which the
    zombie commits on waking (and is fenced).  A worker given more time caught up first (a
    busy run froze it idle 0.3 s after the thaw with 270 records behind it): woken with
    nothing in flight, it heard it had left the group before it fetched again, and
    committed nothing to be fenced.  That can still happen (the heartbeat and the next
    batch race at the wake; once in ten busy runs); the zombie test says so when it does.
    Returns the backlog at the thaw (a frozen worker answers no stats; what it applied is
    known from before the short freeze)."""
    applied = _applied(worker.stats() or {})
    worker.freeze()
    try:
        thaw_at = time.monotonic() + 3.0
        while (time.monotonic() < thaw_at
               and sum(load.produced.values()) - applied < 10 * wanted):
            load.idle(0.05)
        backlog = max(0, sum(load.produced.values()) - applied)
    finally:
        worker.thaw()
    time.sleep(rng.uniform(0.0, 0.04))  # it fetches and starts deciding
    return backlog


def _wait_for(load: Load, condition: Callable[[], bool], timeout: float) -> bool:
    """Until `condition` holds (the load goes on meanwhile); whether it did."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        load.idle(0.3)
    return False


def run_chaos(settings: Settings, folder: Path, plan: Plan, broker: Broker | None = None,
              log: Callable[[str], None] = print) -> Report:
    """Run the plan against workers of `settings` (topics and topology made by the caller)."""
    stage = Stage(settings, plan, log)
    rng, report, load, watch, event = stage.rng, stage.report, stage.load, stage.watch, stage.event
    w1 = WorkerProcess(settings, folder, "w1")
    w2 = WorkerProcess(settings, folder, "w2")

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
                at = stage.started + schedule[i][0]
                while time.monotonic() < at:
                    load.idle(min(0.5, max(0.0, at - time.monotonic())))
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
                load.idle(down)
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
                    load.idle(pause)
                finally:
                    broker.thaw()
                event("broker thawed")
        stage.settle(w1, plan.settle_s)
        report.fenced = sum(w.counter("transactions.fenced") for w in (w1, w2) if w.running)
        input_sides(report, load, [w1, w2], stage.started)
        if watch.ended() < plan.waits and w1.running:
            # For the report: where the worker stood, and its threads' stacks in its log.
            event("waits still open", stats=standing(w1.stats()), stalled=report.stalled,
                  threads_in=str(w1.log_path))
            w1.dump_threads()
        event("settled", ended=watch.ended(), watch_renewed=watch.renewed)
    finally:
        load.close()
        w2.stop()
        w1.stop()
        stage.close()
    return stage.judged()


def judge(report: Report, waits: list[Wait], watch: Watch, load: Load, started: float
           ) -> Report:
    examples: dict[str, list[str]] = defaultdict(list)
    grace_ms = report.commit_grace_ms = commit_grace_ms(load.settings)
    report.load_warm_s = load.warm_s
    reread_replies(load)
    report.replies_resent = len(load.resent_replies)
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
            _, _, _, reason, _, ended = watch.where[w.key][0]
            examples["wrong"].append(f"{w.key} {w.kind} requested {w.requested_at} reply "
                                     f"appended {w.reply_appended} acknowledged "
                                     f"{w.reply_acked}: {kind} ({reason}) ended {ended}")
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
    report.reviewable = reviews_due(waits)
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


# The load and the watch live in streams.testing.load; named here too, as the runs that
# build on this one (rolling, upgrade, cluster_chaos) import them.
__all__ = ["DEADLINE_MS", "DEFINITION", "Broker", "Load", "Plan", "Report", "Stage", "Wait",
           "Watch", "chaos_settings", "commit_grace_ms", "expected_outcome", "input_sides", "judge",
           "make_waits", "run_chaos"]
