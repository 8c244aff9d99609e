"""bench/cluster_bench.py's table: each run's counts and each failover's latency (no broker)."""

from __future__ import annotations

from tests.bench.loading import load_bench

cluster_bench = load_bench("cluster_bench")


def test_the_table_has_a_row_per_run_and_per_failover() -> None:
    run = {"guarantee": "exactly_once", "waits": 90_000, "lost": 0, "conflicting": 0,
           "wrong": 0, "in_flight": 2, "duplicate_outcomes": 0, "duplicate_actions": 0,
           "seconds": 600.0,
           "plan": {"rate": 500.0},
           "failovers": [{"action": "leader", "node": 3, "away_s": 68.2, "replies": 20_000,
                          "p50_ms": 1500, "p99_ms": 41_000, "max_ms": 52_300},
                         {"action": "wipe", "node": 1, "away_s": 70.0, "replies": 0,
                          "p50_ms": None, "p99_ms": None, "max_ms": None}]}
    text = cluster_bench.table([run])
    assert "| `exactly_once` | 90,000 | 500/s | 0 | 0 | 0 | 2 | 0 | 0 | 10 |" in text
    assert "| `exactly_once` | leader | 3 | 68.2 | 20,000 | 1.5 | 41.0 | 52.3 |" in text
    assert "| `exactly_once` | wipe | 1 | 70.0 | 0 | - | - | - |" in text
