"""Fixtures for end-to-end tests: topics, workers, a client and a watcher.

They are module-scoped: the tests of one module share topics and a worker
(each test uses keys of its own), because starting a worker costs seconds.
A module that kills or adds workers gets its own topics by being a module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from streams import topics
from streams.config import Guarantee, Settings
from tests.conftest import NO_CONSOLE
from tests.e2e.harness import Client, Watcher, WorkerProcess, e2e_settings
from tests.prefixes import unique_prefix

# How long the commands these tests run (`main` in-process, the webhook adapter) and the
# SDK's clients of `new_e2e`'s settings wait for the broker's first answer
# (XWAIT_CONNECT_TIMEOUT, 5 s by default): beside another suite at load 75 the shared
# broker took longer, and `reply --wait` or the adapter's start said "Kafka unreachable"
# (exit 3).  tests/cli checks the default fails fast.
PATIENT_CONNECT_TIMEOUT_S = "30"


@pytest.fixture(scope="package", autouse=True)
def _patient_commands() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XWAIT_CONNECT_TIMEOUT", PATIENT_CONNECT_TIMEOUT_S)
        yield


@pytest.fixture(scope="module")
def e2e_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("e2e")


def new_e2e(bootstrap: str, folder: Path, tag: str = "e", partitions: int = 4,
            guarantee: Guarantee = Guarantee.AT_LEAST_ONCE) -> Settings:
    """Settings with topics of their own and the fast definitions of tests/e2e/waits."""
    prefix = unique_prefix(tag)
    base = Settings(bootstrap=bootstrap, topic_prefix=prefix, app_id=f"{prefix}-processor",
                    partitions=partitions, console_url=NO_CONSOLE,
                    connect_timeout=float(PATIENT_CONNECT_TIMEOUT_S))
    s = e2e_settings(base, folder, guarantee)
    topics.create(s, topics.load_specs(s))
    return s


@pytest.fixture(scope="module")
def e2e(kafka_bootstrap: str, e2e_folder: Path) -> Settings:
    return new_e2e(kafka_bootstrap, e2e_folder)


@pytest.fixture(scope="module")
def workers(e2e: Settings, e2e_folder: Path) -> Iterator[Callable[..., WorkerProcess]]:
    started: list[WorkerProcess] = []

    def start(name: str = "w1", wait_owned: bool = True) -> WorkerProcess:
        worker = WorkerProcess(e2e, e2e_folder, name)
        started.append(worker)
        return worker.start(wait_owned=wait_owned)

    yield start
    for worker in started:
        worker.stop()


@pytest.fixture(scope="module")
def worker(workers: Callable[..., WorkerProcess]) -> WorkerProcess:
    return workers()


@pytest.fixture(scope="module")
def client(e2e: Settings) -> Client:
    return Client(e2e)


@pytest.fixture(scope="module")
def watcher(e2e: Settings) -> Iterator[Watcher]:
    w = Watcher(e2e)
    yield w
    w.close()
