"""`xwait topics create|describe`.

Both first ask the broker for metadata with the client's 5 s budget
(`streams.client._kafka.probe`): against a broker that is down, the admin
calls of `streams.topics` would each wait out their own 15 s timeout
before failing; the probe fails in 5 s, in one line, with exit 3.
"""

from __future__ import annotations

import argparse
import time

from streams import topics
from streams.cli import EXIT_FAILED, EXIT_OK, emit
from streams.client._kafka import probe
from streams.config import Settings


def _state_row(st: topics.TopicState) -> dict[str, object]:
    return {
        "role": st.spec.role,
        "topic": st.spec.name,
        "exists": st.exists,
        "partitions": st.partitions,
        "expectedPartitions": st.spec.partitions,
        "config": st.config,
    }


def _problems(states: list[topics.TopicState]) -> list[str]:
    problems = []
    for st in states:
        if not st.exists:
            problems.append(f"{st.spec.name}: missing (run `xwait topics create`)")
        elif st.partitions != st.spec.partitions:
            problems.append(
                f"{st.spec.name}: {st.partitions} partitions, expected {st.spec.partitions}"
            )
    counts = {st.partitions for st in states if st.exists}
    if len(counts) > 1:
        problems.append(
            "co-partitioning broken: partition counts differ ("
            + ", ".join(f"{st.spec.name}={st.partitions}" for st in states if st.exists)
            + "); a wait's records would land on different workers"
        )
    return problems


# A topic the controller just created can be missing from the broker's
# metadata for a moment (KRaft propagates it asynchronously; seen here under
# load): look again for this long before calling a fresh topic missing.
CREATED_SETTLE_S = 5.0


def _settled_problems(settings: Settings, specs: list[topics.TopicSpec],
                      report: topics.CreateReport) -> list[str]:
    deadline = time.monotonic() + CREATED_SETTLE_S
    while True:
        states = topics.describe(settings, specs)
        fresh = [st for st in states if not st.exists and st.spec.name in report.created]
        if not fresh or time.monotonic() >= deadline:
            return _problems(states)
        time.sleep(0.2)


def run_topics(args: argparse.Namespace, settings: Settings) -> int:
    specs = topics.load_specs(settings)
    probe(settings)
    if args.topics_command == "create":
        report = topics.create(settings, specs)
        problems = _settled_problems(settings, specs, report) if report.mismatched else []
        text = "\n".join(
            [f"created  {name}" for name in report.created]
            + [f"existed  {name}" for name in report.existed]
            + [f"PROBLEM  {p}" for p in problems]
        )
        emit({"created": report.created, "existed": report.existed, "problems": problems},
             args.json, text)
        return EXIT_FAILED if problems else EXIT_OK
    states = topics.describe(settings, specs)
    problems = _problems(states)
    lines = [
        f"{st.spec.name:<40} {st.partitions if st.exists else '-':>4} partitions  "
        + " ".join(f"{k}={v}" for k, v in sorted(st.config.items()))
        for st in states
    ]
    lines += [f"PROBLEM  {p}" for p in problems]
    emit({"topics": [_state_row(st) for st in states], "problems": problems}, args.json,
         "\n".join(lines))
    return EXIT_FAILED if problems else EXIT_OK
