"""One run of one system on one workload, and its figures under one set of names.

Every run gets fresh topics (a prefix of its own, the same partition count),
its own consumer groups and data folders, all deleted when the run ends,
also when it fails.  A run that fails is recorded with its error and the
tail of the processor's log.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import secrets
import shutil
import time
import uuid
from collections.abc import Callable
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

from streams import topics
from streams.config import Guarantee, Settings
from streams.partitioning import partition_for
from streams.testing.compare.judging import judge_open_run, storm_actions
from streams.testing.compare.kit import (
    FAUSTPIPE,
    CompareError,
    Context,
    Peer,
    RunPlan,
    loadgen_argv,
    loadgen_timeout,
    mktopics,
    peer_argv,
    read_json,
    run_tool,
    tail,
)
from streams.testing.compare.report import summary_lines
from streams.testing.compare.sampling import (
    RECORD_STAGES,
    CpuSampler,
    StatsPoller,
    owned,
    startup_cpu,
)
from streams.testing.compare.workloads import (
    OPEN,
    PIPES,
    PROCESSES_OF,
    XWAITS,
    applies,
    start_delay,
)
from streams.testing.harness.kafka import delete_topics, topic_records
from streams.testing.workers import XWAIT, WorkerProcess, free_port

READY_SETTLE_S = 1.0  # after the processor answered its probes, before open load starts

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

def xwait_settings(ctx: Context, plan: RunPlan) -> Settings:
    guarantee = {"default": Settings().guarantee, "at_least_once": Guarantee.AT_LEAST_ONCE,
                 "exactly_once": Guarantee.EXACTLY_ONCE}[ctx.args.guarantee]
    return Settings(bootstrap=ctx.bootstrap, topic_prefix=plan.prefix,
                    app_id=f"{plan.prefix}-proc", partitions=ctx.partitions,
                    topology=ctx.topology, data_dir=plan.folder / "data", guarantee=guarantee)


def xwait_command(ctx: Context, plan: RunPlan) -> tuple[int, tuple[str, ...]]:
    """How many worker processes a run of this xwait system has, and the command that starts it."""
    processes: int = PROCESSES_OF.get(plan.system, ctx.args.xwait_processes)
    return processes, (str(XWAIT), "worker",
                       *(("--processes", str(processes)) if processes > 1 else ()))


def run_xwait(ctx: Context, plan: RunPlan, record: dict[str, Any]) -> dict[str, Any]:
    settings = xwait_settings(ctx, plan)
    report = topics.create(settings, topics.load_specs(settings))
    if report.mismatched:
        raise CompareError(f"topics differ from topics.yaml: {report.mismatched}")
    processes, command = xwait_command(ctx, plan)
    env = {**dict(ctx.args.xwait_env), "XWAIT_PURE_PYTHON": XWAITS[plan.system]}
    worker = WorkerProcess(settings, plan.folder, "xwait", log_level=ctx.args.xwait_log_level,
                           env=env, command=command)
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
    script = ctx.kit / "rawpipe.py" if name == "rawpipe" else FAUSTPIPE
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
        if plan.system in XWAITS:
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


__all__ = ["figures", "run_one", "warm_up"]
