"""A rolling restart of a fleet under load: what a user sees while each worker is replaced.

`run_rolling` starts N workers of one app (with two or more, faust gives
every partition a standby on another worker), offers the W1 load of
`streams.testing.chaos` (replies racing a 6 s deadline, an operator answering
reviews) and, once the load runs, restarts the workers one after the other
the way an orchestrator's rolling update does:

    SIGTERM -> the process exits (it gives its partitions up first) -> start it
    again on its own disk -> wait until `GET /readyz` answers 200 on every worker
    -> a pause -> the next worker.

The load runs either for its count of waits (`RollPlan.waits` at its rate) or,
with `RollPlan.tail_s`, until the whole roll is done and `tail_s` more: then
`waits` is only a cap, and however long the restarts take to be ready (21-28 s
each on a busy machine, against 3-5 s on a quiet one) the last restart still has
replies to judge.

Then every wait is judged on the contract's clock as in `chaos` (lost,
conflicting, wrong, duplicate ids), and the reply->outcome latency (the
outcome record's timestamp minus the reply's append time) is cut into
windows: before the roll, the whole roll, and each restart (from its
SIGTERM to the next one's, the last to its readiness plus the pause).
Escalations' lateness (outcome record minus the deadline it fired for) is
given per window too: timers held by a restart show there.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streams.config import Settings
from streams.testing.chaos import Load, Report, Stage, Watch, input_sides, judge
from streams.testing.cluster_chaos import percentile
from streams.testing.workers import WorkerProcess


@dataclass
class RollPlan:
    """What one run does; the defaults are the issue's bench (500 waits/s, three workers)."""

    waits: int = 60_000
    rate: float = 500.0
    workers: int = 3
    rounds: int = 1  # how many times the whole fleet is rolled
    warmup_s: float = 20.0  # load before the first restart (the "before" window)
    pause_s: float = 10.0  # after the fleet is ready again, before the next restart
    stop_timeout_s: float = 60.0  # SIGTERM to exit; SIGKILL after (counted)
    ready_timeout_s: float = 180.0
    settle_s: float = 300.0
    seed: int = 1
    # None: the load offers `waits` and stops, wherever the roll is by then.  Seconds: the
    # load offers waits until every restart is ready again, then this long more (`waits`
    # is the cap; reaching it before the roll is done is reported as `load_ended_early`).
    tail_s: float | None = None


@dataclass
class Restart:
    worker: str
    sigterm_ms: int  # wall clock of the SIGTERM
    stop_s: float = 0.0  # SIGTERM -> the process exited
    exit_code: int | None = None
    killed: bool = False  # did not exit within stop_timeout_s: SIGKILL
    ready_s: float = 0.0  # start -> its own /readyz 200
    fleet_ready_s: float = 0.0  # start -> every worker's /readyz 200
    end_ms: int = 0  # wall clock where its window ends (the next SIGTERM, or the roll's end)


@dataclass
class RollReport:
    chaos: Report
    restarts: list[Restart] = field(default_factory=list)
    windows: list[dict[str, Any]] = field(default_factory=list)
    load_ended_ms: int = 0  # wall clock of the load's last request offered
    # The load offered its last request before the roll was done (the last restart ready
    # and the pause after it): the last windows judge replies to earlier requests only.
    load_ended_early: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {**self.chaos.as_dict(), "restarts": [r.__dict__ for r in self.restarts],
                "windows": self.windows, "load_ended_ms": self.load_ended_ms,
                "load_ended_early": self.load_ended_early}

    def window(self, name: str) -> dict[str, Any]:
        return next(w for w in self.windows if w["window"] == name)


def latencies(load: Load, watch: Watch, since_ms: int, until_ms: int) -> dict[str, Any]:
    """Reply->outcome of the replies appended in [since, until), and the escalations'
    lateness of deadlines due in it: p50, p99, max (ms)."""
    replies, late = [], []
    for w in load.waits:
        got = watch.where.get(w.key)
        if not got:
            continue
        _, _, record_ms, _, _, ended_ms = got[0]
        outcome = watch.outcomes[w.key][0][1]
        if w.reply_appended is not None and since_ms <= w.reply_appended < until_ms \
                and outcome == "RECEIVED":
            replies.append(max(0, record_ms - w.reply_appended))
        elif outcome == "ESCALATED" and since_ms <= ended_ms < until_ms:
            late.append(max(0, record_ms - ended_ms))
    return {"replies": len(replies), "p50_ms": percentile(replies, 0.5),
            "p99_ms": percentile(replies, 0.99), "max_ms": max(replies, default=None),
            "escalations": len(late), "late_p99_ms": percentile(late, 0.99),
            "late_max_ms": max(late, default=None)}


def settle(stage: Stage, fleet: list[WorkerProcess], waits: int, seconds: float) -> None:
    """After the last request: replies and reviews still scheduled, until `waits` waits
    ended (or `seconds`, or a worker of the fleet exited), then late duplicates, if any."""
    settle_until = time.monotonic() + seconds
    while time.monotonic() < settle_until and stage.watch.ended() < waits:
        stage.load.pump(1.0)
        gone = [w.name for w in fleet if not w.running]
        if gone:
            stage.event("worker exited", workers=gone)
            break
    stage.load.pump(2.0)


def run_rolling(settings: Settings, folder: Path, plan: RollPlan,
                log: Callable[[str], None] = print) -> RollReport:
    """Run the plan against workers of `settings` (topics and topology made by the caller)."""
    stage = Stage(settings, plan, log)
    chaos, started, waits = stage.report, stage.started, stage.waits
    load, watch, event = stage.load, stage.watch, stage.event
    report = RollReport(chaos)
    fleet = [WorkerProcess(settings, folder, f"w{i + 1}") for i in range(plan.workers)]

    def fleet_ready(timeout: float) -> None:
        for w in fleet:
            w.wait_ready(timeout)

    load_started_ms = 0
    try:
        for w in fleet:
            w.start(wait_owned=False)
        fleet_ready(plan.ready_timeout_s)
        event("fleet ready", owned={w.name: (w.stats() or {}).get("ownedPartitions")
                                    for w in fleet},
              standbys={w.name: (w.stats() or {}).get("standbyPartitions") for w in fleet})
        watch.start()
        load_started_ms = int(time.time() * 1000)
        load.start()
        load.idle(plan.warmup_s)
        for _ in range(plan.rounds):
            for w in fleet:
                r = Restart(w.name, int(time.time() * 1000))
                if report.restarts:
                    report.restarts[-1].end_ms = r.sigterm_ms
                stopping = time.monotonic()
                w.stop(timeout=plan.stop_timeout_s)  # SIGTERM; SIGKILL after the timeout
                r.stop_s = round(time.monotonic() - stopping, 2)
                r.exit_code = None if w.proc is None else w.proc.returncode
                r.killed = r.exit_code == -signal.SIGKILL
                starting = time.monotonic()
                w.start(wait_owned=False)
                r.ready_s = round(w.wait_ready(plan.ready_timeout_s), 2)
                fleet_ready(plan.ready_timeout_s)
                r.fleet_ready_s = round(time.monotonic() - starting, 2)
                report.restarts.append(r)
                event("restarted", worker=w.name, exit_code=r.exit_code, stop_s=r.stop_s,
                      ready_s=r.ready_s, fleet_ready_s=r.fleet_ready_s)
                load.idle(plan.pause_s)
        report.restarts[-1].end_ms = int(time.time() * 1000)
        report.load_ended_early = load.requests_done.is_set()
        event("roll done", load_ended_early=report.load_ended_early,
              offered=load.requests_offered)
        if plan.tail_s is not None:
            load.idle(plan.tail_s)
            waits = load.finish()
        load.join()
        report.load_ended_ms = max((w.requested_at for w in waits), default=0)
        event("load done", offered=len(waits))
        settle(stage, fleet, len(waits), plan.settle_s)
        input_sides(chaos, load, fleet, started)
        event("settled", ended=watch.ended(), stalled=chaos.stalled)
    finally:
        if load.is_alive():  # a roll that failed: stop offering before the fleet goes
            load.finish()
        load.close()
        for w in fleet:
            w.stop()
        watch.stopped.set()
        watch.join(10)
    report.chaos = judge(chaos, waits, watch, load, started)
    if report.restarts:
        first, last = report.restarts[0], report.restarts[-1]
        report.windows.append({"window": "before", **latencies(
            load, watch, load_started_ms, first.sigterm_ms)})
        report.windows.append({"window": "roll", **latencies(
            load, watch, first.sigterm_ms, last.end_ms)})
        for i, r in enumerate(report.restarts):
            report.windows.append({"window": f"restart {i + 1} ({r.worker})", **latencies(
                load, watch, r.sigterm_ms, r.end_ms)})
        report.windows.append({"window": "after", **latencies(
            load, watch, last.end_ms, int(time.time() * 1000))})
    for row in report.windows:
        log(json.dumps({"window": row}))
    return report


__all__ = ["Restart", "RollPlan", "RollReport", "latencies", "run_rolling"]
