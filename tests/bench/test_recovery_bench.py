"""bench/recovery_bench.py reads what a worker says of the partitions it took over (no broker)."""

from __future__ import annotations

from pathlib import Path

from streams.config import Settings
from streams.testing.workers import WorkerProcess
from tests.bench.loading import load_bench

recovery = load_bench("recovery_bench")

LOG = """\
[2026-12-06 10:00:00] INFO partitions taken over partitions=[0, 1, 2, 3] restored_records=0 \
seconds=0.51 steps={'fence': 0.1}
[2026-12-06 10:00:01] INFO partitions taken over partitions=[4, 5, 6, 7] restored_records=120 \
seconds=1.25 steps={'fence': 0.1}
"""


def test_a_takeover_in_several_steps_counts_every_partition_and_its_restored_records(
        tmp_path: Path) -> None:
    worker = WorkerProcess(Settings(partitions=8), tmp_path, "first")
    worker.log_path.write_text("earlier line\n" + LOG)

    got = recovery.taken_over(worker, since=len("earlier line\n"))

    assert got == {"partitions": 8, "restored_records": 120, "seconds": 1.25, "lines": 2}
    assert recovery.taken_over(worker, since=worker.log_path.stat().st_size) is None


def test_the_waits_answered_before_the_restart_are_some_of_those_parked() -> None:
    import pytest

    assert recovery.parse_args(["--waits", "500"]).replies == 100
    for bad in (["--waits", "50", "--replies", "51"], ["--replies", "0"]):
        with pytest.raises(SystemExit) as exited:
            recovery.parse_args(bad)
        assert exited.value.code == 2
