"""A worker decides on the native record path where it is built, and in Python when told.

Both workers run the same wait to its outcome through the real broker; the
worker's stats say which path decided (`recordPath`), and a worker told
``XWAIT_PURE_PYTHON=1`` says so in one warning line at start
(docs/concepts/native.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streams.config import Settings
from streams.core import native
from tests.e2e.harness import Client, Watcher, WorkerProcess

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

OFF = "deciding every record with the Python rules"


def _a_wait_ends_with_its_reply(client: Client, watcher: Watcher) -> None:
    key = client.start_answered("slow-approval", {"decision": "approved"}, tenant="acme")
    seen = watcher.until(lambda s: bool(s.for_key("outcomes", key)), 60, "the outcome")
    [outcome] = seen.for_key("outcomes", key)
    assert (outcome["outcome"], outcome["reason"]) == ("RECEIVED", "reply_valid")
    assert json.loads(outcome["responseData"]) == {"decision": "approved"}


def _run(e2e: Settings, e2e_folder: Path, client: Client, watcher: Watcher, name: str,
         env: dict[str, str]) -> tuple[dict[str, object], str]:
    worker = WorkerProcess(e2e, e2e_folder, name, env=env)
    try:
        worker.start()
        _a_wait_ends_with_its_reply(client, watcher)
        stats = worker.stats()
        assert stats is not None
    finally:
        worker.stop()
    return stats, worker.log_path.read_text(errors="replace")


def test_a_worker_decides_on_the_native_record_path_where_it_is_built(
        e2e: Settings, e2e_folder: Path, client: Client, watcher: Watcher) -> None:
    if native.load() is None:
        pytest.skip(f"the native record path is not built here: {native.unavailable}")
    stats, log = _run(e2e, e2e_folder, client, watcher, "native", {"XWAIT_PURE_PYTHON": "0"})
    assert stats["recordPath"] == "native"
    assert OFF not in log


def test_a_worker_told_pure_python_decides_alike_and_says_so_once_at_start(
        e2e: Settings, e2e_folder: Path, client: Client, watcher: Watcher) -> None:
    stats, log = _run(e2e, e2e_folder, client, watcher, "pure", {"XWAIT_PURE_PYTHON": "1"})
    assert stats["recordPath"] == "python"
    assert stats["nativeDeclined"] == {}
    assert [line for line in log.splitlines() if OFF in line] == [
        line for line in log.splitlines() if f"{OFF}: XWAIT_PURE_PYTHON=1" in line]
    assert sum(OFF in line for line in log.splitlines()) == 1
