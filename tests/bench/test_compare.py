"""The comparison's bookkeeping: what runs when, and which runs a ratio divides (no broker)."""

from __future__ import annotations

from typing import Any

from streams.testing.compare import judging, report, sampling, workloads
from tests.bench.loading import load_bench

compare = load_bench("compare")


def run(rnd: int, workload: str, system: str, **figures: float) -> dict[str, Any]:
    return {"round": rnd, "workload": workload, "system": system, "figures": figures,
            "ok": True, "error": None, "loadavg_before": [1.0, 1.0, 1.0],
            "loadavg_after": [1.0, 1.0, 1.0], "wall_s": 1.0}


def open_result(runs: list[dict[str, Any]], rounds: int, **extra: Any) -> dict[str, Any]:
    """A comparison's result of open runs of xwait and the Python peer, as main() writes it."""
    return {"runs": runs, "ratios": report.ratios(runs), "notes": [], **extra,
            "timestamp": "t", "file": "f.json",
            "parameters": {"systems": ["xwait", "pypeer"], "workloads": ["open"],
                           "rounds": rounds, "waits": 10, "rate": 5.0, "seconds": 2.0,
                           "bootstrap": "b", "partitions": 8},
            "machine": {"nproc": 2, "cpu": "x", "mem_total_mib": 1024, "platform": "p"},
            "versions": {"python": "3", "librdkafka": "2"}}


def test_every_second_round_reverses_the_order_and_the_raw_pipe_skips_the_open_loop() -> None:
    plan = workloads.schedule(["xwait", "rawpipe", "pypeer"], ["drain", "open"], 2)

    assert plan == [
        (1, 1, "drain", "xwait"), (1, 2, "drain", "rawpipe"), (1, 3, "drain", "pypeer"),
        (1, 1, "open", "xwait"), (1, 2, "open", "pypeer"),
        (2, 1, "drain", "pypeer"), (2, 2, "drain", "rawpipe"), (2, 3, "drain", "xwait"),
        (2, 1, "open", "pypeer"), (2, 2, "open", "xwait"),
    ]


def test_a_ratio_divides_runs_of_the_same_round_only() -> None:
    runs = [run(1, "drain", "xwait", events_per_s=100.0),
            run(1, "drain", "pypeer", events_per_s=400.0),
            run(2, "drain", "xwait", events_per_s=300.0),
            run(2, "drain", "pypeer", events_per_s=600.0),
            run(3, "drain", "pypeer", events_per_s=50.0)]  # no xwait run in round 3

    got = [(r["round"], r["ratio"]) for r in report.ratios(runs)
           if r["figure"] == "events_per_s"]

    assert got == [(1, 0.25), (2, 0.5)]


def test_in_the_storm_the_pipes_are_measured_by_their_request_records() -> None:
    runs = [run(1, "storm", "xwait", escalations_per_s=200.0, events_per_s=200.0),
            run(1, "storm", "rawpipe", events_per_s=20000.0),
            run(1, "storm", "faustpipe", events_per_s=4000.0)]

    got = {r["over"]: r["ratio"] for r in report.ratios(runs)
           if r["figure"] == "escalations_per_s"}

    assert got == {"rawpipe": 0.01, "faustpipe": 0.05}


def test_the_faust_pipe_like_the_raw_pipe_has_no_open_loop_run() -> None:
    plan = workloads.schedule(["xwait", "faustpipe"], ["drain", "open"], 1)

    assert plan == [(1, 1, "drain", "xwait"), (1, 2, "drain", "faustpipe"),
                    (1, 1, "open", "xwait")]


def test_the_table_shows_every_round_and_a_failed_run() -> None:
    failed = run(2, "open", "pypeer")
    failed.update(ok=False, error="CompareError: boom", figures={})
    runs = [run(1, "open", "xwait", reply_p50_ms=50.0, reply_p99_ms=200.0,
                cpu_us_per_event=300.0, startup_cpu_s=2.0, loop_lag_p99_ms=21.0,
                loop_lag_max_ms=35.0, durable_p99_ms=150.0, durable_max_ms=1900.0),
            run(1, "open", "pypeer", reply_p50_ms=40.0, reply_p99_ms=100.0,
                cpu_us_per_event=150.0, startup_cpu_s=0.2),
            run(2, "open", "xwait", reply_p50_ms=60.0, reply_p99_ms=220.0,
                cpu_us_per_event=330.0, startup_cpu_s=2.2, loop_lag_p99_ms=30.0,
                loop_lag_max_ms=80.0, durable_p99_ms=160.0, durable_max_ms=170.0), failed]
    result = open_result(runs, rounds=2)

    text = report.table(result, None)

    # CPU per event leads, beside the ratio of the same round, then the latencies.
    assert "| xwait | 300 / 330 | – | 2.0 / 2.2 | 50 / 60 | 200 / 220 |" in text
    assert "| Python peer | 150 / – | 2 | 0.2 / – | 40 / – | 100 / – | – / – | 2 |" in text
    assert "failed" in text and "CompareError: boom" in text
    # The event loop's worst 5-second window under the load, every round.
    assert "window (ms, per round): p99 21 / 30, max 35 / 80." in text
    # The worker's own view says where a slow record waited (stages it did not report: –).
    assert "decided and durable 150 / 1,900, 160 / 170." in text
    assert "fetched – / –, – / –;" in text


def test_the_warm_up_run_is_listed_first_and_in_no_figure_or_ratio() -> None:
    """A warm-up on a cold broker reads far slower than the runs after it; it is shown
    as what it was and divides nothing."""
    warm = run(0, "open", "xwait", reply_p50_ms=900.0, reply_p99_ms=2300.0)
    runs = [run(1, "open", "xwait", reply_p50_ms=50.0, reply_p99_ms=200.0),
            run(1, "open", "pypeer", reply_p50_ms=40.0, reply_p99_ms=100.0)]
    result = open_result(runs, rounds=1, warm_up=warm)

    text = report.table(result, None)

    every = text[text.index("Every run"):].splitlines()
    assert every[4].startswith("| – | warm-up | open | xwait | reply_p99_ms 2,300 |")
    assert every[4].endswith("| ok (not compared) |")
    assert every[5].startswith("| 1 | 1 | open | xwait | reply_p99_ms 200 |")
    assert "2,300" not in text[:text.index("Every run")]
    assert [r["ratio"] for r in result["ratios"] if r["figure"] == "reply_p99_ms"] == [2.0]


def test_an_open_run_is_judged_by_the_broker_clock_from_requested_at() -> None:
    """A reply appended before requestedAt + deadline is received, at or after it the wait
    escalates, whatever the load generator meant; a wait without an outcome is not judged."""
    requested = {"in-time": 1_000, "late": 1_000, "silent": 1_000, "edge": 1_000,
                 "missing": 1_000, "wrongly-escalated": 1_000}
    replied = {"in-time": 3_999, "late": 4_500, "edge": 4_000, "wrongly-escalated": 2_000}
    ended = {"in-time": "RECEIVED", "late": "ESCALATED", "silent": "ESCALATED",
             "edge": "ESCALATED", "wrongly-escalated": "ESCALATED"}
    assert judging.wrong_by_broker_clock(requested, replied, ended, 3_000) == 1
    assert judging.wrong_by_broker_clock(requested, replied, {**ended, "late": "RECEIVED"},
                                         3_000) == 2


class _Message:
    """What ActionTimes reads of a confluent-kafka message: value and timestamp."""

    def __init__(self, action: str, at: int) -> None:
        self._value = ('{"action": "%s"}' % action).encode()
        self._at = at

    def value(self) -> bytes:
        return self._value

    def timestamp(self) -> tuple[int, int]:
        return (1, self._at)


def test_a_storms_first_escalation_is_timed_from_the_last_wait_parked() -> None:
    times = judging.ActionTimes()
    assert times.first_escalation_after_last_park_s() is None
    for action, at in [("SEND_REQUEST", 1_000), ("SEND_REQUEST", 9_000),
                       ("SEND_REMINDER", 9_100), ("RUN_ESCALATION", 10_500),
                       ("SEND_REQUEST", 4_000), ("RUN_ESCALATION", 9_800)]:
        times(_Message(action, at))
    assert times.first_escalation_after_last_park_s() == 0.8

    early = judging.ActionTimes()  # escalating while other partitions still park
    for action, at in [("RUN_ESCALATION", 3_000), ("SEND_REQUEST", 5_500)]:
        early(_Message(action, at))
    assert early.first_escalation_after_last_park_s() == -2.5


def test_the_cpu_of_a_runs_processor_is_counted_and_the_load_generators_is_not() -> None:
    """CPU per event is the yardstick that travels between machines: the sampler must see
    the processor's threads (a process started during the run counts from its start) and
    leave the load generator out."""
    import os
    import subprocess
    import sys

    marker = f"cpu-test-{os.getpid()}"
    # 0.6 s of CPU, then idle long enough for a sample to see all of it before the exit.
    burn = ("import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass\n"
            "time.sleep(4 * %r)\n" % sampling.CPU_POLL_S)
    sampler = sampling.CpuSampler(marker)
    sampler.start()
    env = {**os.environ, "XWAIT_TOPIC_PREFIX": marker}
    processor = subprocess.run([sys.executable, "-c", burn], env=env, check=True)
    loadgen = subprocess.run([sys.executable, "-c", burn, "loadgen.py"], env=env, check=True)
    cpu = sampler.stop()
    assert processor.returncode == loadgen.returncode == 0
    assert 0.55 <= cpu < 1.1  # the processor's 0.6 s and its start, not the load generator's


def test_xwait_as_several_processes_is_read_from_each_childs_port() -> None:
    """`--xwait-processes 2`: child i answers on the web port + i; the counters of the
    children add up and the worst loop lag of any of them is the run's."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from pathlib import Path

    from streams.config import Settings
    from streams.testing.workers import WorkerProcess, free_port

    answers = [{"counters": {"batches": 3, "decided": 10}, "ownedPartitions": [0, 1],
                "loopLagMs": {"p99_5s": 4.0, "max_5s": 9.0},
                "latencyMs": {"durable": {"n": 5, "p50": 80, "p99": 140, "max": 1900},
                              "released": {"n": 0}}},
               {"counters": {"batches": 5, "decided": 7}, "ownedPartitions": [2],
                "loopLagMs": {"p99_5s": 12.0, "max_5s": 30.0},
                "latencyMs": {"durable": {"n": 9, "p50": 90, "p99": 160, "max": 170},
                              "released": {"n": 9, "p50": 40, "p99": 95, "max": 120}}}]
    base = free_port(1)
    servers = []
    for i, answer in enumerate(answers):
        body = json.dumps(answer).encode()

        class Stats(BaseHTTPRequestHandler):
            payload = body

            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                self.send_response(200)
                self.send_header("Content-Length", str(len(self.payload)))
                self.end_headers()
                self.wfile.write(self.payload)

            def log_message(self, *args: Any) -> None:
                return None

        server = ThreadingHTTPServer(("127.0.0.1", base + i), Stats)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
    try:
        worker = WorkerProcess(Settings(), Path("unused"), "xwait")
        worker.web_port = base
        owned = [len(s["ownedPartitions"]) for s in sampling.child_stats(worker, 2) if s]
        owned_between_them = sampling.owned(worker, 2)
        poller = sampling.StatsPoller(worker, 2)
        poller.start()
        while poller.loop_lag_max_ms is None or None in poller.last:
            threading.Event().wait(0.05)
        counters = poller.stop()
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()

    assert owned == [2, 1]
    assert owned_between_them == 3  # what the start waits for: every partition
    assert counters == {"batches": 8, "decided": 17}
    assert (poller.loop_lag_p99_ms, poller.loop_lag_max_ms) == (12.0, 30.0)
    # The worst of any process per figure: a 1.9-s record of one child is not averaged away.
    assert poller.stages == {"durable": {"p99": 160.0, "max": 1900.0},
                             "released": {"p99": 95.0, "max": 120.0}}


def test_the_start_up_cpu_of_several_processes_is_their_sum_from_their_starts() -> None:
    import os
    import subprocess
    import sys
    import time

    marker = f"startup-test-{os.getpid()}"
    burn = ("import sys, time\nt = time.process_time()\n"
            "while time.process_time() - t < 0.3: pass\nsys.stdout.write('x\\n')\n"
            "sys.stdout.flush()\ntime.sleep(30)\n")
    env = {**os.environ, "XWAIT_TOPIC_PREFIX": marker}
    children = [subprocess.Popen([sys.executable, "-c", burn], env=env,  # noqa: S603
                                 stdout=subprocess.PIPE) for _ in range(2)]
    try:
        for child in children:
            assert child.stdout is not None and child.stdout.readline() == b"x\n"
        time.sleep(2 / os.sysconf("SC_CLK_TCK"))
        cpu = sampling.CpuSampler.since_start(marker)
    finally:
        for child in children:
            child.kill()
            child.wait()
            if child.stdout is not None:
                child.stdout.close()

    assert 0.55 <= cpu < 1.5  # both children's 0.3 s and their starts


def test_more_xwait_processes_than_partitions_is_refused_before_any_run() -> None:
    import pytest

    for bad in (["--xwait-processes", "0"], ["--xwait-processes", "9", "--partitions", "8"]):
        with pytest.raises(SystemExit) as exited:
            compare.parse_args(bad)
        assert exited.value.code == 2
    assert compare.parse_args(["--xwait-processes", "8"]).xwait_processes == 8


def test_xwait_deciding_in_python_runs_only_when_named_and_is_divided_like_a_peer() -> None:
    assert "xwait-python" not in compare.parse_args([]).systems
    assert compare.parse_args(["--systems", "xwait,xwait-python"]).systems == [
        "xwait", "xwait-python"]
    assert workloads.XWAITS["xwait-python"] == "1"  # its XWAIT_PURE_PYTHON
    runs = [run(1, "drain", "xwait", cpu_us_per_event=150.0),
            run(1, "drain", "xwait-python", cpu_us_per_event=300.0)]

    got = {(r["over"], r["figure"]): r["ratio"] for r in report.ratios(runs)}

    assert got == {("xwait-python", "cpu_us_per_event"): 0.5}


def test_xwait_on_two_processes_runs_in_the_same_round_as_one_process() -> None:
    from types import SimpleNamespace
    from typing import cast

    from streams.testing.compare import runs as compare_runs
    from streams.testing.compare.kit import Context, RunPlan

    args = compare.parse_args(["--systems", "xwait,xwait-2p,kstreams"])
    ctx = cast(Context, SimpleNamespace(args=args))

    def command(system: str) -> tuple[str, ...]:
        return compare_runs.xwait_command(ctx, cast(RunPlan, SimpleNamespace(system=system)))[1]

    assert args.systems == ["xwait", "xwait-2p", "kstreams"]
    assert "--processes" not in command("xwait")
    assert command("xwait-2p")[-3:] == ("worker", "--processes", "2")
    assert workloads.XWAITS["xwait-2p"] == "0"  # the native record path, like `xwait`
