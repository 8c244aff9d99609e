"""scripts/kafka's failures are clear, one line, non-zero."""

from __future__ import annotations

import importlib
import json
import random
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from streams.testing.workers import LOWEST_FREE_PORT, ephemeral_ports, free_broker_port
from tests.conftest import broker_was_launched
from tests.scripts import PATH, SCRIPTS, run, start_on_a_taken_port, status_and_stop


def home(folder: Path) -> dict[str, str]:
    """The environment of a broker whose files are in `folder` (a small heap: a test's)."""
    return {"PATH": PATH, "XWAIT_KAFKA_HOME": str(folder), "XWAIT_KAFKA_HEAP": "256m"}


def test_start_fails_clearly_when_the_port_is_taken(tmp_path: Path) -> None:
    port, result = start_on_a_taken_port("kafka", home(tmp_path))
    assert result.returncode == 1
    assert result.stderr.splitlines()[0] == (
        f"scripts/kafka: error: port {port} on 127.0.0.1 is taken by another process; "
        "choose another with --port or XWAIT_KAFKA_PORT"
    )
    assert not list(tmp_path.glob("*.pid")), "a failed start must leave no pid file behind"


def test_status_and_stop_of_a_broker_never_started_say_so(tmp_path: Path) -> None:
    port = free_broker_port()
    status, stop = status_and_stop("kafka", port, home(tmp_path))
    assert status.returncode == 1
    assert f"kafka not running on port {port}" in status.stdout
    assert stop.returncode == 0
    assert "no broker started by this script is running" in stop.stdout


def test_start_without_java_fails_with_one_clear_line(tmp_path: Path) -> None:
    result = run("kafka", "start", "--port", str(free_broker_port()),
                 env={"PATH": str(tmp_path), "XWAIT_KAFKA_HOME": str(tmp_path)})
    assert result.returncode == 1
    assert result.stderr.startswith("scripts/kafka: error: Java is not installed")


def test_start_reuses_a_broker_another_checkout_started(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    port = kafka_bootstrap.rsplit(":", 1)[1]
    result = run("kafka", "start", "--port", port, env=home(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "reusing it" in result.stdout
    # The test session reads the same lines: a reused broker is not the session's to stop.
    assert not broker_was_launched(result.stdout)
    stop = run("kafka", "stop", "--port", port, env=home(tmp_path))
    assert "no broker started by this script is running" in stop.stdout


def test_two_checkouts_starting_a_broker_on_one_port_at_once_both_get_one(
    tmp_path: Path,
) -> None:
    """Two fresh clones' `make test` side by side: both launched a broker on 9092 at once,
    one exited "Address already in use", and its whole suite errored (114 tests)."""
    port = str(free_broker_port())
    homes = [tmp_path / "a", tmp_path / "b"]
    starts = [subprocess.Popen([sys.executable, str(SCRIPTS / "kafka"), "start", "--port", port],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=home(folder)) for folder in homes]
    try:
        outputs = [p.communicate(timeout=240) for p in starts]
        assert [p.returncode for p in starts] == [0, 0], outputs
        assert sum(broker_was_launched(out) for out, _ in outputs) == 1, outputs
    finally:
        for folder in homes:
            run("kafka", "stop", "--port", port, env=home(folder))


def test_reset_deletes_the_broker_data_and_keeps_the_jars(tmp_path: Path) -> None:
    port = str(free_broker_port())
    kafka = tmp_path / "kafka"
    (kafka / f"data-{port}" / "requests-0").mkdir(parents=True)
    jars = tmp_path / "jars" / "lib-0"
    jars.mkdir(parents=True)
    (jars / "kafka-clients.jar").write_bytes(b"jar")
    # Worker folders are the checkout's own (.xwait/demo-worker, .xwait/worker):
    # a broker home elsewhere never takes its neighbours with it.
    (tmp_path / "demo-worker" / "v1").mkdir(parents=True)
    result = run("kafka", "reset", "--port", port,
                 env={**home(kafka), "XWAIT_KAFKA_JARS": str(tmp_path / "jars")})
    assert result.returncode == 0, result.stderr
    assert not (kafka / f"data-{port}").exists()
    assert (tmp_path / "demo-worker" / "v1").exists()
    assert (jars / "kafka-clients.jar").exists(), "reset must not download again"


def test_the_broker_port_follows_xwait_bootstrap_so_one_setting_drives_script_and_cli(
    tmp_path: Path,
) -> None:
    port = str(free_broker_port())
    env = {**home(tmp_path), "XWAIT_BOOTSTRAP": f"127.0.0.1:{port}"}
    assert f"kafka not running on port {port}" in run("kafka", "status", env=env).stdout
    # an explicit XWAIT_KAFKA_PORT still wins
    other = str(free_broker_port())
    status = run("kafka", "status", env={**env, "XWAIT_KAFKA_PORT": other})
    assert f"kafka not running on port {other}" in status.stdout


def test_node_commands_outside_a_cluster_and_too_small_clusters_are_refused(
    tmp_path: Path,
) -> None:
    env = home(tmp_path)
    kill = run("kafka", "kill", "--port", str(free_broker_port()), env=env)
    assert kill.returncode == 1
    assert "is for a node of a cluster" in kill.stderr
    two = run("kafka", "start", "--nodes", "2", env=env)
    assert two.returncode == 1
    assert "a cluster has at least 3 nodes" in two.stderr
    status = run("kafka", "status", "--nodes", "3", "--port", str(free_broker_port()), env=env)
    assert status.returncode == 1
    assert status.stdout.count("not running") == 3
    assert not list(tmp_path.glob("cluster-*/node-*/data")), "a status starts nothing"


def test_the_session_stops_only_a_broker_its_own_start_launched() -> None:
    """`make test` beside a user's broker (and worker) leaves it running, however slowly
    it answered the session's first probe."""
    assert broker_was_launched("kafka started in 6.9s (pid 4242): bootstrap 127.0.0.1:9092")
    assert not broker_was_launched("kafka already running (pid 4242): bootstrap 127.0.0.1:9092")
    assert not broker_was_launched("kafka already running on 127.0.0.1:9092 (not started from "
                                   "/x; reusing it): bootstrap 127.0.0.1:9092")


def test_two_starts_at_once_assemble_the_broker_jars_once(tmp_path: Path) -> None:
    """A test run's processes start brokers on two ports at once in a fresh clone: one
    assembles the jars while the other waits for it (both once ran Maven into one folder,
    and one failed "Failed to copy full contents")."""
    bin_dir, home = tmp_path / "bin", tmp_path / "home"
    bin_dir.mkdir()
    runs = tmp_path / "mvn-runs"
    mvn = bin_dir / "mvn"  # stands in for Maven only: what is tested is the script's lock
    mvn.write_text("#!/bin/sh\n"
                   f"echo run >> {runs}\n"
                   "for a in \"$@\"; do case $a in -DoutputDirectory=*) out=${a#*=};; esac; done\n"
                   "sleep 1\nmkdir -p \"$out\" && : > \"$out/stand-in.jar\"\n")
    mvn.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "XWAIT_KAFKA_HOME": str(home),
           "XWAIT_KAFKA_JARS": str(tmp_path / "jars")}
    starts = [subprocess.Popen([sys.executable, str(SCRIPTS / "kafka"), "start",
                                "--port", str(free_broker_port())],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
              for _ in range(2)]
    outputs = [p.communicate(timeout=120) for p in starts]

    assert runs.read_text().splitlines() == ["run"], outputs
    assert [p.name for p in (tmp_path / "jars").glob("lib-*/*.jar")] == ["stand-in.jar"]
    assert not any("Maven could not fetch" in err for _, err in outputs), outputs


def test_java_options_of_xwait_kafka_java_opts_reach_the_broker_jvm(tmp_path: Path) -> None:
    result = run("kafka", "start", "--port", str(free_broker_port()), timeout=120,
                 env={**home(tmp_path / "home"),
                      "XWAIT_KAFKA_JAVA_OPTS": "-XX:+NoSuchXwaitTestOption"})
    assert result.returncode == 1
    assert "NoSuchXwaitTestOption" in result.stdout + result.stderr


def _archive_option(pidfile: Path) -> str:
    cmdline = Path(f"/proc/{pidfile.read_text().strip()}/cmdline").read_bytes().split(b"\0")
    return next(a.decode() for a in cmdline if b"Archive" in a)


def test_a_clean_stop_leaves_the_class_archive_that_the_next_start_maps(tmp_path: Path) -> None:
    """The broker's classes are archived once (AppCDS) beside the shared jars: a start then
    costs a third less CPU."""
    port = str(free_broker_port())

    def kafka(*args: str) -> None:
        done = run("kafka", *args, "--port", port, env=home(tmp_path), timeout=180)
        assert done.returncode == 0, done.stdout + done.stderr

    pidfile = tmp_path / f"broker-{port}.pid"
    try:
        kafka("start")
        first = _archive_option(pidfile)
        kafka("stop")
        kafka("start")
        second = _archive_option(pidfile)
        archive = Path(second.split("=", 1)[1])
        assert second.startswith("-XX:SharedArchiveFile=") and archive.stat().st_size > 0, \
            (first, second)
        assert not list(archive.parent.glob(f"*.{port}.partial"))
    finally:
        kafka("reset")


def _kafkactl(monkeypatch: pytest.MonkeyPatch, module: str) -> ModuleType:
    """scripts/kafkactl/<module>.py, as scripts/kafka imports it (its folder on the path)."""
    monkeypatch.syspath_prepend(str(SCRIPTS))
    return importlib.import_module(f"kafkactl.{module}")


def test_controller_ports_in_the_ephemeral_range_are_chosen_outside_it_and_kept(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 49: `start --nodes 3 --port 59092` put the controllers on 60092-60094, client
    source ports of the kernel: a node connected to itself and died, and starts were
    refused while other processes' connections held them."""
    ports = _kafkactl(monkeypatch, "ports")
    ephemeral = range(32768, 61000)

    def free(_port: int) -> bool:
        return False

    assert ports.plan([29092, 29093, 29094], None, ephemeral, free, True) == [30092, 30093,
                                                                             30094]
    clients = [59092, 59093, 59094]
    got = ports.plan(clients, None, ephemeral, free, True)
    assert len(set(got)) == 3 and all(ports.usable(p, ephemeral) for p in got)
    assert not set(got) & set(clients)
    assert ports.plan(clients, None, ephemeral, free, True) == got  # the same base, the same
    assert ports.plan(clients, got, ephemeral, free, False) == got  # a later node finds them
    assert ports.plan(clients, None, ephemeral, free, False) is None  # never chosen: none
    # Another process took one: a start with no node running chooses again...
    assert got[0] not in ports.plan(clients, got, ephemeral, lambda p: p == got[0], True)
    # ...a node started beside running ones keeps the recorded ones (the check names it).
    assert ports.plan(clients, got, ephemeral, lambda p: p == got[0], False) == got
    # Past 65535 is no port either (a broker on 64959 once failed to bind 65959).
    [high] = ports.plan([64959], None, ephemeral, free, True)
    assert ports.usable(high, ephemeral)


def test_a_broker_whose_controller_port_would_be_ephemeral_starts_with_one_outside_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    taken = _kafkactl(monkeypatch, "wire").port_in_use
    ephemeral = ephemeral_ports()
    if ephemeral.start - 1000 < LOWEST_FREE_PORT:
        pytest.skip(f"no port below the ephemeral range {ephemeral} is 1000 away from it")
    candidates = random.Random().sample(range(ephemeral.start - 1000, ephemeral.start), 200)
    base = str(next(p for p in candidates if not taken(p)))

    def kafka(*args: str) -> subprocess.CompletedProcess[str]:
        return run("kafka", *args, "--port", base, env=home(tmp_path), timeout=180)

    try:
        started = kafka("start")
        assert started.returncode == 0, started.stdout + started.stderr
        controller = json.loads((tmp_path / f"broker-{base}.json").read_text())["controllerPort"]
        assert controller not in ephemeral and controller != int(base) + 1000
        assert f"the controller listens on 127.0.0.1:{controller}" in started.stdout
        assert taken(controller)  # the broker's controller listens there
        status = kafka("status")
        assert status.returncode == 0 and "answers metadata requests" in status.stdout
        assert kafka("stop").returncode == 0
        again = kafka("start")  # the recorded port, without a word
        assert again.returncode == 0, again.stdout + again.stderr
        assert "controller listens" not in again.stdout
        assert (f"CONTROLLER://127.0.0.1:{controller}\n"
                in (tmp_path / f"server-{base}.properties").read_text())
    finally:
        kafka("reset")
