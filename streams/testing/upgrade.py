"""The documented upgrade from the previous release, under load.

`run_upgrade` runs a fleet of an earlier release (`streams.testing.releases`:
its own virtualenv, its own example topology, topics made by its own
`xwait topics create`) under the W1 load of `streams.testing.chaos`, then
does what CHANGELOG.md and docs/guides/operations.md ("Upgrades and rollbacks")
tell a user to do:

1. a worker of this build started while the old fleet runs must refuse to
   join (exit 2, one line: stop every worker of the earlier version first) -
   a mixed group would give one partition to two workers;
2. stop every old worker (SIGTERM to all at once);
3. start the new workers on the same hosts' data folders; each restores its
   partitions from the changelog the old release wrote (the rows did not
   change), and the fleet is ready when every `/readyz` answers 200;
4. (`late_join`) an old worker started again beside the new fleet - an old
   pod restarted mid-rollout, a rollback - makes every new worker stop with
   the same line instead of sharing the partitions; it is stopped and the new
   fleet started again.

The load never stops: requests and replies appended while no worker runs
are decided once the new fleet is up, by the broker's clock.  Every wait is
judged as in `chaos` (lost, conflicting, wrong, duplicate ids), and the
waits parked by the old fleet and ended by the new one are counted by how
they ended (a reply received, a deadline fired after reminders): every
parked wait continues across the upgrade.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streams.config import Settings
from streams.testing.chaos import DEFINITION, Load, Report, Stage, Watch, judge
from streams.testing.releases import Release
from streams.testing.rolling import latencies, settle
from streams.testing.workers import XWAIT, WorkerProcess, free_port, settings_env

REFUSED = "workers of an earlier version are running"


@dataclass
class UpgradePlan:
    """What one run does; the defaults are the bench's."""

    waits: int = 40_000
    rate: float = 250.0
    old_workers: int = 2
    new_workers: int = 2
    warmup_s: float = 40.0  # load on the old fleet before the upgrade
    # After the upgrade, an old worker starts again beside the new fleet (an old pod
    # restarted mid-rollout, a rollback): the new workers must stop rather than share
    # the partitions; then it is stopped and the new fleet started again.
    late_join: bool = True
    late_join_after_s: float = 15.0
    stop_timeout_s: float = 60.0
    ready_timeout_s: float = 300.0
    settle_s: float = 300.0
    seed: int = 1


@dataclass
class UpgradeReport:
    chaos: Report
    old_version: str
    refusal: dict[str, Any] = field(default_factory=dict)
    late_join: dict[str, Any] = field(default_factory=dict)
    upgrade: dict[str, Any] = field(default_factory=dict)
    carried: dict[str, Any] = field(default_factory=dict)
    windows: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {**self.chaos.as_dict(), "old_version": self.old_version,
                "refusal": self.refusal, "late_join": self.late_join,
                "upgrade": self.upgrade, "carried": self.carried,
                "windows": self.windows}

    @property
    def refused(self) -> bool:
        return self.refusal.get("exit_code") == 2 and REFUSED in self.refusal.get("line", "")


def old_topology(release: Release, folder: Path) -> Path:
    """The release's own topics.yaml beside the chaos definition."""
    topo = folder / "topology-old"
    (topo / "waits").mkdir(parents=True, exist_ok=True)
    shutil.copy(release.topology / "topics.yaml", topo / "topics.yaml")
    (topo / "waits" / "chaos.yaml").write_text(DEFINITION)
    return topo


def create_topics_with(release: Release, settings: Settings, topology: Path) -> None:
    """The topics, made by the release's own `xwait topics create`, as its users made them."""
    env = {**os.environ, **settings_env(settings), "XWAIT_TOPOLOGY": str(topology)}
    done = subprocess.run([str(release.xwait), "topics", "create"], env=env,  # noqa: S603
                          capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"xwait {release.version} topics create: {done.stderr}")


def stop_all(workers: list[WorkerProcess], timeout: float) -> dict[str, int | None]:
    """SIGTERM to every worker at once, then wait for each (SIGKILL after `timeout`)."""
    for w in workers:
        if w.running and w.proc is not None:
            os.killpg(w.proc.pid, signal.SIGTERM)
    codes: dict[str, int | None] = {}
    for w in workers:
        w.stop(timeout=timeout)
        codes[w.name] = None if w.proc is None else w.proc.returncode
    return codes


def try_mixed_start(settings: Settings, folder: Path, timeout: float = 120.0
                    ) -> dict[str, Any]:
    """Start a worker of this build beside the old fleet: how it ends, and its last line."""
    env = {**os.environ, **settings_env(settings),
           "XWAIT_DATA_DIR": str(folder / "data-mixed"), "XWAIT_WEB_PORT": str(free_port())}
    started = time.monotonic()
    try:
        done = subprocess.run([str(XWAIT), "worker"], env=env,  # noqa: S603
                              capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else ""
        return {"exit_code": None, "line": "still running after "
                f"{timeout:.0f}s (not refused): {err[-300:]}", "seconds": timeout}
    lines = done.stderr.strip().splitlines()
    return {"exit_code": done.returncode, "line": lines[-1] if lines else "",
            "seconds": round(time.monotonic() - started, 1)}


def carried_over(load: Load, watch: Watch, switch_ms: int) -> dict[str, Any]:
    """Waits parked before the old fleet was stopped and ended after: how each ended."""
    ended: Counter[str] = Counter()
    for w in load.waits:
        got = watch.where.get(w.key)
        if w.request_appended is None or w.request_appended >= switch_ms or not got:
            continue
        record_ms = got[0][2]
        if record_ms < switch_ms:
            continue
        outcome = watch.outcomes[w.key][0][1]
        replied = w.reply_appended is not None
        when = ("" if not replied else " (reply before the switch)"
                if w.reply_appended is not None and w.reply_appended < switch_ms
                else " (reply after the switch)")
        ended[f"{outcome}{when}"] += 1
    return {"waits": sum(ended.values()), "by_outcome": dict(sorted(ended.items()))}


def late_join(old: WorkerProcess, new: list[WorkerProcess], plan: UpgradePlan,
              event: Callable[..., None]) -> dict[str, Any]:
    """An old worker starts beside the running new fleet: every new one must stop with
    the refusal; then the old one is stopped and the new fleet started again."""
    joined = time.monotonic()
    old.start(wait_owned=False)
    deadline = joined + plan.ready_timeout_s
    while any(w.running for w in new) and time.monotonic() < deadline:
        time.sleep(0.2)
    stopped_s = round(time.monotonic() - joined, 1)
    codes = {w.name: None if w.running or w.proc is None else w.proc.returncode for w in new}
    said = {w.name: REFUSED in w.log_tail(300) for w in new}
    event("an old worker joined the new fleet", stopped_s=stopped_s, exit_codes=codes,
          refused=said)
    old.stop()
    for w in new:
        w.stop()
        w.start(wait_owned=False)
    for w in new:
        w.wait_ready(plan.ready_timeout_s)
    again_s = round(time.monotonic() - joined, 1)
    event("old worker stopped, new fleet ready again", seconds=again_s)
    return {"new_stopped_s": stopped_s, "exit_codes": codes, "refused": said,
            "all_refused": all(said.values()) and all(c not in (None, 0)
                                                     for c in codes.values()),
            "ready_again_s": again_s}


def run_upgrade(settings: Settings, folder: Path, release: Release, plan: UpgradePlan,
                log: Callable[[str], None] = print) -> UpgradeReport:
    """Run the plan: `settings` are the new build's (chaos topology); topics are made here."""
    started = time.monotonic()  # the run's clock counts the old release making the topics
    topo_old = old_topology(release, folder)
    create_topics_with(release, settings, topo_old)
    stage = Stage(settings, plan, log, started)  # its load warms up on those topics
    chaos, waits = stage.report, stage.waits
    load, watch, event = stage.load, stage.watch, stage.event
    report = UpgradeReport(chaos, release.version)
    old = [WorkerProcess(settings, folder, f"w{i + 1}", command=(str(release.xwait), "worker"),
                         env={"XWAIT_TOPOLOGY": str(topo_old)})
           for i in range(plan.old_workers)]
    new = [WorkerProcess(settings, folder, f"w{i + 1}") for i in range(plan.new_workers)]
    rejoining = WorkerProcess(settings, folder, "old-again", command=(str(release.xwait), "worker"),
                              env={"XWAIT_TOPOLOGY": str(topo_old)})

    load_started_ms = switch_ms = ready_ms = 0
    try:
        for w in old:
            w.start(wait_owned=False)
        for w in old:  # the old release has no /readyz: each owns partitions
            w.wait_until(lambda s: bool(s["ownedPartitions"]), plan.ready_timeout_s,
                         "owns no partition")
        event(f"fleet of {release.version} running",
              owned={w.name: (w.stats() or {}).get("ownedPartitions") for w in old})
        # Before the load: on a busy machine the refused start took 52 s, and under
        # the load the switch then came after the last wait had ended (none left
        # to carry over).  The load's warm-up is then measured from its own start.
        report.refusal = try_mixed_start(settings, folder)
        event("a worker of this build started beside them", **report.refusal)
        watch.start()
        load_started_ms = int(time.time() * 1000)
        load.start()
        load.idle(plan.warmup_s)
        switch_ms = int(time.time() * 1000)
        stopping = time.monotonic()
        codes = stop_all(old, plan.stop_timeout_s)
        stop_s = time.monotonic() - stopping
        event(f"every {release.version} worker stopped", exit_codes=codes,
              seconds=round(stop_s, 1))
        starting = time.monotonic()
        for w in new:
            w.start(wait_owned=False)
        for w in new:
            w.wait_ready(plan.ready_timeout_s)
        ready_ms = int(time.time() * 1000)
        restored = {w.name: sum(r["records"] for r in (w.stats() or {}).get(
            "restores", {}).values()) for w in new}
        report.upgrade = {"stop_s": round(stop_s, 1),
                          "start_to_ready_s": round(time.monotonic() - starting, 1),
                          "no_worker_s": round((ready_ms - switch_ms) / 1000, 1),
                          "restored_records": restored}
        event("new fleet ready", **report.upgrade,
              owned={w.name: (w.stats() or {}).get("ownedPartitions") for w in new})
        if plan.late_join:
            load.idle(plan.late_join_after_s)
            report.late_join = late_join(rejoining, new, plan, event)
        load.join()
        settle(stage, new, plan.waits, plan.settle_s)
        event("settled", ended=watch.ended())
    finally:
        load.close()
        for w in [*old, *new, rejoining]:
            w.stop()
        watch.stopped.set()
        watch.join(10)
    report.chaos = judge(chaos, waits, watch, load, started)
    if switch_ms:
        report.carried = carried_over(load, watch, switch_ms)
        report.windows = [
            {"window": "before (old fleet)", **latencies(load, watch, load_started_ms,
                                                          switch_ms)}]
        if ready_ms:
            report.windows += [
                {"window": "upgrade (stop to ready)",
                 **latencies(load, watch, switch_ms, ready_ms)},
                {"window": "after (new fleet)",
                 **latencies(load, watch, ready_ms, int(time.time() * 1000))}]
    for row in report.windows:
        log(json.dumps({"window": row}))
    return report


__all__ = ["REFUSED", "UpgradePlan", "UpgradeReport", "carried_over", "late_join",
           "run_upgrade", "stop_all", "try_mixed_start"]
