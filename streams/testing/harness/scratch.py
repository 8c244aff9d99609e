"""A run's scratch space on the shared broker and on disk, removed at the end.

The park, flood, recovery, scale and restore benches each run workers of
their own beside whatever else uses the broker (it is never started or
stopped here).  A `Scratch` gives the run a topic prefix and a folder of its
own, the `Settings` of its workers, and takes it all away when the run ends,
however it ends::

    with Scratch("flood_bench", args.bootstrap, args.partitions) as run:
        run.check_broker()
        worker = run.worker("flood")
        ...
    # here: every worker stopped, the run's topics and groups deleted, the
    # folder removed; what went wrong is in run.errors, never raised
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any

from confluent_kafka.admin import AdminClient

from streams.config import Settings
from streams.testing.harness import Stopped
from streams.testing.harness.kafka import check_broker, delete_topics
from streams.testing.workers import WorkerProcess


class Scratch:
    """`name` (``flood_bench``) names the prefix (``floodbench-<hex>``) and the folder
    (``flood-bench-...`` under `workdir` or the temporary folder); `settings` are the
    workers' (topology, timer_tick, ...) beside the prefix, app id and data folder."""

    def __init__(self, name: str, bootstrap: str, partitions: int, *,
                 workdir: Path | None = None, keep: bool = False, tail_lines: int = 40,
                 **settings: Any) -> None:
        self.prefix = f"{name.replace('_', '')}-{secrets.token_hex(4)}"
        if workdir is not None:
            workdir.mkdir(parents=True, exist_ok=True)
        self.folder = Path(tempfile.mkdtemp(prefix=f"{name.replace('_', '-')}-", dir=workdir))
        self.topology = self.folder / "topology"
        self.settings = Settings(bootstrap=bootstrap, topic_prefix=self.prefix,
                                 app_id=f"{self.prefix}-processor", partitions=partitions,
                                 topology=self.topology, data_dir=self.folder / "data",
                                 **settings)
        self.admin = AdminClient(self.settings.confluent())
        self.keep = keep
        self.workers: list[WorkerProcess] = []
        self.errors: list[str] = []
        self.tail_lines = tail_lines
        # The last lines of each worker's log when the run failed (read before the
        # folder goes): worker name -> text.
        self.tails: dict[str, str] = {}
        self.failed = False  # set by a bench that judged the run failed without an error
        self.reachable = False
        self.topics_deleted = 0

    def check_broker(self) -> None:
        """Fail the run at once, with a hint, when the broker does not answer."""
        check_broker(self.admin, self.settings.bootstrap)
        self.reachable = True

    def worker(self, name: str, log_level: str = "info") -> WorkerProcess:
        """A worker of the run (not started), stopped when the run ends."""
        worker = WorkerProcess(self.settings, self.folder, name, log_level=log_level)
        self.workers.append(worker)
        return worker

    def __enter__(self) -> Scratch:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 _tb: TracebackType | None) -> bool:
        if exc is not None:
            self.errors.append("interrupted" if isinstance(exc, KeyboardInterrupt)
                               else f"{type(exc).__name__}: {exc}")
        for w in self.workers:
            w.stop(60)
        if self.errors or self.failed:
            self.tails = {w.name: w.log_tail(self.tail_lines) for w in self.workers}
        if self.reachable:
            self.topics_deleted = len(delete_topics(self.admin, self.settings))
        if not self.keep:
            shutil.rmtree(self.folder, ignore_errors=True)
        # What failed is recorded, not raised: the result is written either way.
        return exc is None or isinstance(exc, Exception | KeyboardInterrupt | Stopped)


__all__ = ["Scratch"]
