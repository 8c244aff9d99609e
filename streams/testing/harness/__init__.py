"""What every bench shares; each bench under bench/ is a short script over these pieces.

* `host`: the machine and the code a run was measured on (`machine`, `versions`, `commit`);
* `results`: one result envelope (benchmark, time, commit, machine, versions), written as
  JSON in the bench folder's `results/`, and the `-latest.md` line beside it;
* `figures`: percentiles, rates and the summaries of latencies;
* `report`: Markdown tables, the plot's backend, publishing a plot to a tracked path;
* `producing`: input records produced as users' services produce them;
* `kafka`: reading a topic from its start (the outcome watch), deleting what a run left
  on the broker;
* `worker`: a worker's stats polled until a condition holds, its memory sampled;
* `topology`: a run's topology folder (the repository's topics and chosen definitions);
* `scratch`: a run's topic prefix and folder, removed however the run ends;
* `options`: the command-line options several benches share;
* `runbook`: the skeleton of the chaos benches (a run per guarantee, judged alike).

Importable without touching `sys.path`: a bench runs as ``.venv/bin/python bench/<name>.py``
and imports only from `streams`.
"""

from __future__ import annotations

from streams.testing.harness.host import machine


class BenchError(Exception):
    """A phase timed out or the worker failed; the run is written as incomplete."""


class Stopped(BaseException):
    """SIGTERM or Ctrl-C: the run stops, writes what it has and cleans up."""


__all__ = ["BenchError", "Stopped", "machine"]
