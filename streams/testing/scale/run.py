"""One scale run (bench/scale_bench.py): a worker of its own on the shared broker, waits
parked up to each checkpoint and measured there; the result written after every phase."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from streams import topics
from streams.testing.harness import BenchError
from streams.testing.harness.figures import dig
from streams.testing.harness.results import envelope
from streams.testing.harness.scratch import Scratch
from streams.testing.harness.worker import MIB, owned, stoppable, watch
from streams.testing.scale.phases import (
    TICK_SETTLE_S,
    Run,
    ScalePlan,
    big_batches,
    check_sample,
    du_bytes,
    free_bytes,
    measure_api,
    memory,
    net_rate,
    park_sample,
    park_segment,
    restart,
    restore,
    say,
    standby,
    tick_cost,
)
from streams.testing.scale.report import table
from streams.testing.scale.waits import SAMPLE_DEFINITION, SHIPPED, scale_topology


def parameters(plan: ScalePlan, prefix: str, guarantee: str, timer_tick: float,
               workdir: Path) -> dict[str, Any]:
    return {
        "checkpoints": list(plan.checkpoints), "partitions": plan.partitions, "workers": 1,
        "bootstrap": plan.bootstrap, "topic_prefix": prefix, "seed": plan.seed,
        "definitions": list(SHIPPED), "review_fraction": plan.review_fraction,
        "suspend_fraction": plan.suspend_fraction, "timer_floor": plan.timer_floor or "none",
        "sample": plan.sample, "sample_deadline": plan.sample_deadline,
        "sample_definition": SAMPLE_DEFINITION,
        "status_samples": plan.status_samples, "list_samples": plan.list_samples,
        "list_limit": plan.list_limit,
        "skip_restart_above": plan.skip_restart_above,
        "skip_restore_above": plan.skip_restore_above,
        "skip_standby_above": plan.skip_standby_above,
        "guarantee": guarantee, "timer_tick_s": timer_tick, "workdir": str(workdir)}


def begin(run: Run) -> None:
    """The broker checked, the topics made, a worker owning every partition
    (bench/restore_bench.py begins the same way)."""
    scratch = run.scratch
    say(f"prefix {scratch.prefix}, data in {scratch.folder}, result {run.out}")
    scratch.check_broker()
    topics.create(scratch.settings, topics.load_specs(scratch.settings))
    start(run, "park")


def start(run: Run, role: str) -> None:
    """A new worker of the run, started, owning every partition."""
    run.active = run.new_worker(role)
    run.active.start(wait_owned=False)
    p = run.settings.partitions
    watch(run.active, lambda st: owned(st) == p, lambda st: (st or {}).get("ownedPartitions"),
          "the worker to own every partition")


def checkpoint(run: Run, n: int) -> dict[str, Any]:
    a = run.plan
    cp: dict[str, Any] = {"n": n, "loadavg_before": list(os.getloadavg()), "skipped": {},
                          "errors": []}
    run.result["checkpoints"].append(cp)
    # Two workers' copies (during the standby phase) and the broker's topics.
    need = run.result.get("_bytes_per_wait", 1000) * (n - run.planned_n) * 4
    if free_bytes(run.scratch.folder) < need:
        raise BenchError(f"about {need / 2**30:.1f} GiB would be needed for {n} waits; "
                         f"{free_bytes(run.scratch.folder) / 2**30:.1f} GiB are free")
    say(f"checkpoint {n}: parking {n - run.planned_n} waits")
    cp["segment"] = park_segment(run, n)
    worker = run.worker
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

    def runs(phase: str, limit: int | None, what: str) -> bool:
        """Whether `phase` runs at this checkpoint (else it is noted as skipped)."""
        if limit is not None and n > limit:
            cp["skipped"][phase] = f"N={n} above --skip-{phase}-above {limit}"
            return False
        say(f"checkpoint {n}: {what}")
        return True

    if runs("restart", a.skip_restart_above, "restart on its own disk"):
        cp["restart"] = restart(run)
        time.sleep(TICK_SETTLE_S)
        cp["tick_idle"] = tick_cost(worker.stats())
        cp["memory_after_restart"] = memory(worker)
        run.write()
    if runs("restore", a.skip_restore_above, "restore on an empty disk"):
        cp["restore"] = restore(run)
        cp["restore"]["rows_per_s_net_of_restart"] = net_rate(
            cp["restore"]["rows"], cp["restore"]["ready_s"], dig(cp, "restart", "ready_s"))
        run.write()
    if runs("standby", a.skip_standby_above, "standby takeover"):
        cp["standby"] = standby(run)
        run.write()
    if sample is not None:
        say(f"checkpoint {n}: checking the sample's outcomes")
        cp["sample"] = check_sample(run, sample)
        run.samples_done += len(sample["keys"])
    cp["loadavg_after"] = list(os.getloadavg())
    run.write()
    return cp


def run_scale(plan: ScalePlan, out: Path, workdir: Path | None = None,
              keep: bool = False) -> dict[str, Any]:
    """Run the plan; the result, also written to `out` after every phase."""
    started = datetime.now(UTC)
    with stoppable(), Scratch("scale_bench", plan.bootstrap, plan.partitions,
                              workdir=workdir, keep=keep, tail_lines=30) as scratch:
        settings = scratch.settings
        changes = scale_topology(scratch.topology, plan.timer_floor)
        result = envelope(
            "scale_bench", started, complete=False,
            parameters=parameters(plan, scratch.prefix, settings.guarantee.value,
                                  settings.timer_tick, scratch.folder),
            topology_changes=changes, checkpoints=[], errors=scratch.errors)
        run = Run(plan, scratch, out, result, big_batches(settings))
        try:
            begin(run)
            for n in plan.checkpoints:
                checkpoint(run, n)
                say("\n" + table(result))
            result["complete"] = True
        except BaseException as exc:
            if result["checkpoints"]:
                result["checkpoints"][-1]["errors"].append(f"{type(exc).__name__}: {exc}")
            raise  # recorded by the scratch
        finally:
            result["final_stats"] = run.active.stats() if run.active is not None else None
            result["loadavg_at_end"] = list(os.getloadavg())
            run.sender.producer.flush(10)
    run.close()
    return result


__all__ = ["checkpoint", "begin", "run_scale", "start"]
