"""A chaos run whose waits never end names the side that stood still (issue 49).

`streams.testing.chaos.input_sides` puts the load producer's acknowledged end
of each input partition beside the position the worker applied: a crash test
that lost waits said only "817 waits never ended", and could not tell a
producer that never had its requests acknowledged after a broker restart from
a worker that stopped reading.
"""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace
from typing import Any

from streams.config import Settings
from streams.testing.chaos import Report, input_sides

SETTINGS = Settings(topic_prefix="sides", partitions=2)


def _load(acked_ends: dict[tuple[str, int], int], offered: int, acked: int,
          queued: int = 0) -> Any:
    standing = {"offered": {"requests": offered}, "acknowledged": {"requests": acked},
                "failed": {}, "queued": queued, "client_errors": {"_TRANSPORT": 3},
                "errors": [], "last_ack_s": 12.5}
    produced = Counter({(SETTINGS.topic(role), p): n for (role, p), n in acked_ends.items()})
    return SimpleNamespace(settings=SETTINGS, produced=produced,
                           standing=lambda started: standing)


def _worker(applied: dict[int, dict[str, int]]) -> Any:
    stats = {"ownedPartitions": sorted(applied),
             "positions": {str(p): roles for p, roles in applied.items()}}
    return SimpleNamespace(name="w1", running=True, stats=lambda: stats)


def test_requests_never_acknowledged_name_the_load() -> None:
    report = Report("at_least_once", {})
    load = _load({("requests", 0): 90, ("requests", 1): 95}, offered=1000, acked=185,
                 queued=815)
    worker = _worker({0: {"requests": 90}, 1: {"requests": 95}})

    input_sides(report, load, [worker], started=0.0)

    assert report.stalled is not None
    assert report.stalled.startswith("the load: its producer had no acknowledgement for "
                                     "{'requests': 815}")
    assert "815 still queued" in report.stalled
    assert "the worker" not in report.stalled
    assert report.inputs["1"]["requests"] == {"acknowledged": 95, "applied": 95}


def test_acknowledged_requests_not_applied_name_the_worker() -> None:
    report = Report("at_least_once", {})
    load = _load({("requests", 0): 500, ("requests", 1): 500}, offered=1000, acked=1000)
    worker = _worker({0: {"requests": 90}, 1: {"requests": 500}})

    input_sides(report, load, [worker], started=0.0)

    assert report.stalled == ("the worker: applied below the acknowledged end (role "
                              "partition: applied/acknowledged) requests 0: 90/500")
    assert report.load["queued"] == 0


def test_both_sides_at_the_end_name_neither() -> None:
    report = Report("at_least_once", {})
    load = _load({("requests", 0): 500, ("requests", 1): 500}, offered=1000, acked=1000)
    worker = _worker({0: {"requests": 500}, 1: {"requests": 500}})

    input_sides(report, load, [worker], started=0.0)

    assert report.stalled is None
