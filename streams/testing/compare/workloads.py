"""What a comparison runs: the systems, the issue's three workloads, and in which order."""

from __future__ import annotations

from dataclasses import dataclass

SYSTEMS = ("xwait", "xwait-python", "xwait-2p", "rawpipe", "faustpipe", "pypeer", "kstreams")
# Run when no --systems is given: xwait as it ships (its native record path where built),
# the floors and the peers.  `xwait-python` is xwait told XWAIT_PURE_PYTHON=1: the same
# worker deciding in Python (docs/concepts/native.md), to measure what the native path saves;
# `xwait-2p` is `xwait worker --processes 2`, so that one round holds one process, two, and
# the peer that uses both cores (the per-host figures).
DEFAULT_SYSTEMS = ("xwait", "rawpipe", "faustpipe", "pypeer", "kstreams")
XWAITS = {"xwait": "0", "xwait-python": "1", "xwait-2p": "0"}
"""The xwait systems, and the XWAIT_PURE_PYTHON each runs with."""
PROCESSES_OF = {"xwait-2p": 2}
"""The xwait systems with a fixed number of worker processes (the others: --xwait-processes)."""
# Systems that only move preloaded records (records/s, no outcomes): the floors.
PIPES = ("rawpipe", "faustpipe")
WORKLOADS = ("drain", "storm", "open")
LABELS = {"xwait": "xwait", "xwait-python": "xwait (Python rules)",
          "xwait-2p": "xwait, 2 processes", "rawpipe": "raw pipe",
          "faustpipe": "faust pipe",
          "pypeer": "Python peer", "kstreams": "Kafka Streams peer"}


@dataclass(frozen=True)
class Workload:
    """One of the issue's workloads, as loadgen arguments and the peers' timer settings."""

    name: str
    title: str
    mode: str  # loadgen --mode
    definition: str  # the kit's waits/<definition>.yaml
    mix: str
    deadline_s: float  # the definition's deadline, for the peers and loadgen's lateness
    remind_s: float  # the definition's reminder cadence, for the peers
    headline: str  # the figure the ratios are taken of
    higher_is_better: bool


DRAIN = Workload("drain", "drain W1 (replies and reviews)", "drain", "bench-long", "replies",
                 10_800.0, 3_600.0, "events_per_s", True)
STORM = Workload("storm", "timer storm (every deadline due at once)", "drain", "bench", "silent",
                 3.0, 1.0, "escalations_per_s", True)
OPEN = Workload("open", "open W1", "open", "bench", "w1", 3.0, 1.0, "reply_p99_ms", False)
BY_NAME = {w.name: w for w in (DRAIN, STORM, OPEN)}

# The figures a ratio xwait ÷ other is computed for, per workload: (figure, higher is better)
RATIO_FIGURES: dict[str, list[tuple[str, bool]]] = {
    "drain": [("events_per_s", True), ("first_outcome_s", False), ("cpu_us_per_event", False)],
    "storm": [("escalations_per_s", True), ("first_outcome_s", False),
              ("cpu_us_per_event", False)],
    "open": [("reply_p50_ms", False), ("reply_p99_ms", False), ("lateness_p99_ms", False),
             ("cpu_us_per_event", False)],
}


def applies(system: str, workload: Workload) -> bool:
    """The pipes only move preloaded records: they have no open-loop figure."""
    return not (system in PIPES and workload.mode == "open")


def schedule(systems: list[str], workloads: list[str], rounds: int
             ) -> list[tuple[int, int, str, str]]:
    """(round, place in the round's order from 1, workload, system) in the order they run.

    Within a round every workload runs on every system before the next workload, so the runs
    a ratio compares are minutes apart; every second round reverses the systems' order, so no
    system always runs first (on a broker just warmed by another, or on a cooling machine).
    """
    out = []
    for rnd in range(1, rounds + 1):
        order = systems if rnd % 2 else systems[::-1]
        for name in workloads:
            here = [s for s in order if applies(s, BY_NAME[name])]
            out += [(rnd, i, name, s) for i, s in enumerate(here, 1)]
    return out


def start_delay(workload: Workload) -> float:
    """Seconds between loadgen's launch of the processor and its start (see DELAYED_START)."""
    return workload.deadline_s if workload.name == "storm" else 0.0


__all__ = ["BY_NAME", "DEFAULT_SYSTEMS", "DRAIN", "LABELS", "OPEN", "PIPES", "RATIO_FIGURES",
           "STORM", "SYSTEMS", "WORKLOADS", "XWAITS", "PROCESSES_OF", "Workload", "applies",
           "schedule", "start_delay"]
