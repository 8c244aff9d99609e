"""`xwait worker` asks the broker its start-up questions while faust is imported.

Importing faust and the processor costs ~0.8 s of CPU; the topics, the fleet
check and the definitions are ~0.3 s of broker round trips.  Begun in a thread
before the import, the round trips cost a restarted worker nothing
(streams/frame/preflight.py).  Timing is a benchmark's (bench/recovery_bench.py);
these assert the order, and that the thread's failures reach the user as before.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from streams.config import Settings
from streams.errors import TopologyError
from streams.frame import preflight

# Run in a fresh interpreter: this one has imported faust for other tests.
ORDER = """
import json, sys, types
from streams.cli import worker
from streams.config import Settings

seen = {}
def begin(settings, definitions=None):
    seen["faust imported when begun"] = "faust" in sys.modules
    return "the answer's future"
def run(settings, started=None):
    seen["run was given"] = started
worker.prepare = lambda settings: None
worker.preflight.begin = begin
app = types.ModuleType("streams.frame.app")  # stands in for faust's side
app.run = run
sys.modules["streams.frame.app"] = app
worker.run_worker(Settings())
print(json.dumps(seen))
"""


def test_the_broker_is_asked_before_faust_is_imported_and_the_answer_handed_to_run() -> None:
    done = subprocess.run([sys.executable, "-c", ORDER], capture_output=True, text=True,
                          timeout=60, check=True)
    assert json.loads(done.stdout) == {"faust imported when begun": False,
                                       "run was given": "the answer's future"}


def test_what_the_thread_raises_is_raised_where_the_answer_is_asked(tmp_path: Path) -> None:
    (tmp_path / "waits").mkdir()
    settings = Settings(topology=tmp_path, data_dir=tmp_path / "data")  # no topics.yaml
    started = preflight.begin(settings, definitions={})  # returns; the thread finds out
    with pytest.raises(TopologyError, match="topics.yaml: cannot read"):
        started.result(timeout=60)
