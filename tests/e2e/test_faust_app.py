"""`faust -A streams.app worker` is the same worker as `xwait worker`, as cli/worker.py says.

Before: `No module named 'streams.app'`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from streams.config import Settings
from tests.e2e.harness import Client, Watcher, WorkerProcess

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

FAUST = Path(sys.executable).parent / "faust"


def test_faust_dash_a_streams_app_runs_a_worker_that_decides_waits(
    e2e: Settings, e2e_folder: Path, client: Client, watcher: Watcher,
) -> None:
    worker = WorkerProcess(e2e, e2e_folder, "faust",
                           command=(str(FAUST), "-A", "streams.app", "worker", "-l", "info"))
    worker.start()
    try:
        key = client.start_answered("slow-approval", {"decision": "approved"})
        outcome = watcher.outcome(key, timeout=60)
        assert (outcome["outcome"], outcome["reason"]) == ("RECEIVED", "reply_valid")
    finally:
        worker.stop()
