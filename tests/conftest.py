"""Shared fixtures: the real Kafka broker, and an isolated topic prefix per test.

The broker comes from `scripts/kafka`, the same script a user runs: a broker
already answering on XWAIT_KAFKA_PORT (default 9092) is reused, otherwise one
is started for the run and stopped at its end.

`make test` runs the suite on five processes (pytest-xdist): each process asks
for the broker under a lock, the run's controller stops it at the very end if
one of them launched it (once no other checkout's run uses it:
tests/broker_users.py), and each test module (the console's package, the
registry's two modules) stays on one process with its topics and workers.
The slowest modules go first, so that the processes end together.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from hypothesis import settings as hypothesis_settings

from streams.config import Settings
from streams.testing.workers import free_broker_port, free_port
from tests import broker_users
from tests.prefixes import made, unique_prefix

REPO = Path(__file__).resolve().parent.parent
KAFKA_SCRIPT = REPO / "scripts" / "kafka"
REGISTRY_SCRIPT = REPO / "scripts" / "registry"

NO_CONSOLE = "http://127.0.0.1:9"
"""A worker URL where nothing listens (the discard port): the SDK and CLI check keys
against a worker only when one answers, and a test must never reach a stray worker
someone runs on the default port 6066."""


RUN_DIR = "_XWAIT_TEST_RUN_DIR"
"""Environment variable naming a folder the run's processes share (set by the controller)."""
RUN_PID = "_XWAIT_TEST_RUN_PID"
"""Environment variable holding the pid of the run's controller (tests/broker_users.py)."""
_OWN_RUN_DIR = pytest.StashKey[Path]()

# Modules started first, slowest first (the cluster's package about 5 minutes, the crash
# tests 4.8 spread test by test, the upgrade 1.8, the rolling restart 1.3): the
# rest fills the other processes meanwhile.  A module missing here only starts later.
SLOW_FIRST = ("tests/cluster/", "tests/e2e/test_crash.py", "tests/e2e/test_upgrade.py",
              "tests/e2e/test_rolling_restart.py", "tests/e2e/test_leaving_worker.py",
              "tests/console/", "tests/e2e/test_scaling.py")
# Modules that share a session's or package's costly fixture run on one process.
GROUPS = {"tests/console/": "console", "tests/codec/test_codec_registry.py": "registry",
          "tests/e2e/test_registry.py": "registry", "tests/cluster/": "cluster",
          "tests/kit/": "kit"}


# Hypothesis's default 200 ms deadline per example measures the machine, not the code:
# beside the suite's brokers and workers an Avro example took 250 ms once and failed a
# CI run.  Every property test runs without it (its example counts stay as set).
hypothesis_settings.register_profile("xwait", deadline=None)
hypothesis_settings.load_profile("xwait")

# The JVM options of every broker the run starts (scripts/kafka, XWAIT_KAFKA_JAVA_OPTS):
# the JIT's first tier only.  The suite's twenty-odd brokers live seconds to minutes, too
# short for the optimising compiler to pay for itself: on two busy cores they took 426
# CPU-seconds with it and 322 without (pytest 504 s with it; 434-499 s in three runs
# without).  A user's own setting wins.
TEST_BROKER_JAVA_OPTS = "-XX:TieredStopAtLevel=1"


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault("XWAIT_KAFKA_JAVA_OPTS", TEST_BROKER_JAVA_OPTS)
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_WholeModules(), "xwait-whole-modules")
    if hasattr(config, "workerinput") or os.environ.get(RUN_DIR):
        return  # an xdist worker (or a run inside a run): the controller owns the folder
    run_dir = Path(tempfile.mkdtemp(prefix="xwait-test-run-"))
    os.environ[RUN_DIR] = str(run_dir)  # xdist's workers start later and inherit it
    os.environ[RUN_PID] = str(os.getpid())
    config.stash[_OWN_RUN_DIR] = run_dir


def pytest_unconfigure(config: pytest.Config) -> None:
    """After every process is done: stop the broker if this run launched it, once no
    other checkout's run uses it any more (tests/broker_users.py)."""
    run_dir = config.stash.get(_OWN_RUN_DIR, None)
    if run_dir is None:
        return
    for used in run_dir.glob("uses-*"):
        port = used.name.removeprefix("uses-")
        if (run_dir / f"launched-{port}").exists():
            broker_users.stop_after_the_others(
                port, run_dir.name, functools.partial(_kafka, "stop", "--port", port),
                say=lambda line: print(line, file=sys.stderr, flush=True))
        else:
            broker_users.unregister(port, run_dir.name)
    shutil.rmtree(run_dir, ignore_errors=True)
    os.environ.pop(RUN_DIR, None)
    os.environ.pop(RUN_PID, None)


# Modules whose tests share no costly fixture (each starts its own broker) and take
# minutes together: each test goes to whichever process is free.
SPREAD = ("tests/e2e/test_crash.py",)


def _module_group(nodeid: str) -> str:
    """What runs on one process: a test's module, or the group of modules sharing a fixture
    (or, in a module of SPREAD, the test alone)."""
    where = nodeid.split("::", 1)[0]
    if where in SPREAD:
        return nodeid
    return next((group for prefix, group in GROUPS.items() if where.startswith(prefix)), where)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The slowest modules first (each module's tests keep their order)."""
    def rank(item: pytest.Item) -> int:
        where = item.nodeid.split("::", 1)[0]
        return next((i for i, p in enumerate(SLOW_FIRST) if where.startswith(p)),
                    len(SLOW_FIRST))

    items.sort(key=rank)


class _WholeModules:
    """Registered only with pytest-xdist (`-p no:xdist` knows no such hook)."""

    @staticmethod
    def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
        """Hand whole modules (and groups) to the two processes, in collection order.

        xdist's own `--dist loadgroup` marks tests through their node ids, which
        pytest 9.2 no longer lets it rewrite; its `loadscope` scheduler, asked
        for a test's scope, gets the module or group here instead.
        """
        from xdist.scheduler import LoadScopeScheduling

        class ByModule(LoadScopeScheduling):  # type: ignore[misc]  # xdist ships no types
            def _split_scope(self, nodeid: str) -> str:
                return _module_group(nodeid)

        config.option.loadscopereorder = False  # keep the slowest first, as collected
        return ByModule(config, log)


@pytest.fixture(autouse=True)
def _no_stray_console(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XWAIT_CONSOLE_URL", NO_CONSOLE)


def _kafka(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(KAFKA_SCRIPT), *args],
        capture_output=True, text=True, check=False, timeout=300,
    )


def _script(script: Path, *args: str, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, check=False,
        timeout=900, env=None if env is None else {**os.environ, **env},
    )


@dataclass(frozen=True)
class SaslBroker:
    """A second broker of this session: SASL_PLAINTEXT (PLAIN) on `sasl_bootstrap`."""

    sasl_bootstrap: str
    username: str
    password: str


@pytest.fixture(scope="session")
def sasl_broker() -> Iterator[SaslBroker]:
    """Started through scripts/kafka --sasl-port (its own port and data), stopped at the end.

    The shared broker is never touched: this one lives beside it for the
    SASL tests only, and its data folder is deleted when the session ends.
    """
    port = free_broker_port()
    sasl_port = free_port()
    users = "xwait:xwait-secret"
    started = _script(KAFKA_SCRIPT, "start", "--port", str(port), "--sasl-port", str(sasl_port),
                      env={"XWAIT_KAFKA_SASL_USERS": users, "XWAIT_KAFKA_HEAP": "256m"})
    if started.returncode != 0:
        pytest.fail(f"scripts/kafka start --sasl-port failed:\n{started.stdout}{started.stderr}")
    try:
        yield SaslBroker(f"127.0.0.1:{sasl_port}", "xwait", "xwait-secret")
    finally:
        _script(KAFKA_SCRIPT, "stop", "--port", str(port))
        home = REPO / ".xwait" / "kafka"
        shutil.rmtree(home / f"data-{port}", ignore_errors=True)
        for leftover in home.glob(f"*-{port}.*"):  # its config, log and stdout
            leftover.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def schema_registry() -> Iterator[str]:
    """A real Schema Registry (scripts/registry: Apicurio, in memory) for the session.

    Returns its Confluent-compatible URL.  It starts in seconds from what
    `make registry-app` assembled (`make test` runs it first): the Maven build
    (minutes on a fresh machine) is never run here, where nobody sees it; an
    app not assembled fails the registry's tests with the command that
    assembles it.
    """
    port = free_port()
    started = _script(REGISTRY_SCRIPT, "start", "--port", str(port), "--no-assemble")
    if started.returncode != 0:
        pytest.fail(f"scripts/registry start failed:\n{started.stdout}{started.stderr}")
    try:
        yield started.stdout.strip().rsplit(" ", 1)[-1]
    finally:
        _script(REGISTRY_SCRIPT, "stop", "--port", str(port))


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    port = os.environ.get("XWAIT_KAFKA_PORT") or _bootstrap_port() or "9092"
    bootstrap = f"127.0.0.1:{port}"
    run_dir = Path(os.environ.get(RUN_DIR) or tempfile.gettempdir())
    # One lock of the machine's: the run's other processes, and other checkouts' runs,
    # wait while one starts it or stops it (tests/broker_users.py).
    with broker_users.exclusive(port):
        if not _answers(bootstrap):
            result = _kafka("start", "--port", port)
            if result.returncode != 0:
                pytest.fail(f"scripts/kafka start failed:\n{result.stdout}\n{result.stderr}")
            # Only a broker this start launched is this run's to stop (at its very
            # end, pytest_unconfigure): one that was slow to answer the probe (a
            # busy machine) but already ran - the user's, with their worker on
            # it - is reused and left running.
            if broker_was_launched(result.stdout):
                (run_dir / f"launched-{port}").touch()
        broker_users.register(port, run_dir.name, int(os.environ.get(RUN_PID) or os.getpid()))
        (run_dir / f"uses-{port}").touch()
    yield bootstrap
    _delete_topics_made(bootstrap)


def _answers(bootstrap: str) -> bool:
    """Whether a broker answers a metadata request on `bootstrap`.

    Its client is gone when this returns: a local of the session's fixture
    would live, connected, until the session ends.
    """
    probe = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 2000})
    try:
        probe.list_topics(timeout=3)
    except Exception:  # noqa: BLE001 - any failure means: no broker there yet
        return False
    return True


def broker_was_launched(start_output: str) -> bool:
    """Whether `scripts/kafka start` printed that it launched a broker (not reused one)."""
    return any(line.startswith("kafka started in ") for line in start_output.splitlines())


def _bootstrap_port() -> str | None:
    """The port of XWAIT_BOOTSTRAP when it names this machine, as scripts/kafka reads it."""
    host, sep, port = os.environ.get("XWAIT_BOOTSTRAP", "").rpartition(":")
    return port if sep and host in ("127.0.0.1", "localhost") and port.isdigit() else None


def _delete_topics_made(bootstrap: str) -> None:
    """Delete the topics of every prefix this session made (see tests/prefixes.py)."""
    prefixes = made()
    if not prefixes:
        return
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        names = [t for t in admin.list_topics(timeout=10).topics if t.startswith(prefixes)]
    except Exception:  # noqa: BLE001 - a broker gone already has nothing to clean
        return
    for name, future in (admin.delete_topics(names, operation_timeout=30).items()
                         if names else ()):
        try:
            future.result(timeout=60)
        except Exception as exc:  # noqa: BLE001 - report, never fail a finished session
            print(f"could not delete test topic {name}: {exc}", file=sys.stderr)


@pytest.fixture
def settings(kafka_bootstrap: str, tmp_path: Path) -> Settings:
    """Settings with a topic prefix of its own, so tests never share topics."""
    prefix = unique_prefix("t")
    return Settings(
        bootstrap=kafka_bootstrap,
        topic_prefix=prefix,
        app_id=f"{prefix}-processor",
        partitions=4,
        data_dir=tmp_path / "data",
        console_url=NO_CONSOLE,
    )
