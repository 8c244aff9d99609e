"""`xwait topics create|describe`.

Both first ask the broker for metadata with the client's 5 s budget
(`streams.client._kafka.probe`): against a broker that is down, the admin
calls of `streams.topics` would each wait out their own 15 s timeout
before failing; the probe fails in 5 s, in one line, with exit 3.
"""

from __future__ import annotations

import argparse

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
        "replicationFactor": st.replication_factor,
        "expectedReplicationFactor": st.spec.replication_factor,
        "underReplicated": list(st.under_replicated),
        "leaderless": list(st.leaderless),
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
        problems += [f"{st.spec.name}: {p}" for p in st.config_problems]
        problems += [f"{st.spec.name}: {p}" for p in st.replica_problems]
    counts = {st.partitions for st in states if st.exists}
    if len(counts) > 1:
        problems.append(
            "co-partitioning broken: partition counts differ ("
            + ", ".join(f"{st.spec.name}={st.partitions}" for st in states if st.exists)
            + "); a wait's records would land on different workers"
        )
    return problems


def run_topics(args: argparse.Namespace, settings: Settings) -> int:
    specs = topics.load_specs(settings)
    probe(settings)
    if args.topics_command == "create":
        report = topics.create(settings, specs)
        # streams.topics.create waits until the topics it made show in the metadata.
        problems = _problems(topics.describe(settings, specs)) if report.mismatched else []
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
        f"{st.replication_factor if st.exists else '-'} replicas  "
        + " ".join(f"{k}={v}" for k, v in sorted(st.config.items()))
        for st in states
    ]
    lines += [f"PROBLEM  {p}" for p in problems]
    emit({"topics": [_state_row(st) for st in states], "problems": problems}, args.json,
         "\n".join(lines))
    return EXIT_FAILED if problems else EXIT_OK
