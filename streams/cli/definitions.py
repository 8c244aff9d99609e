"""`xwait definitions`: list the wait definitions of topology/waits, and validate them.

Loading is the validation: the same loader the worker uses at start-up, so a
definition this command accepts is one the worker accepts, and a broken one is
named here (file, field, what was expected) before a worker refuses to start.
"""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta
from typing import Any

import isodate

from streams.cli import EXIT_FAILED, EXIT_OK, emit
from streams.config import Settings
from streams.core.definition import ReminderPolicy, Stage, WaitDefinition
from streams.core.errors import DefinitionError
from streams.definitions import load_definitions


def iso_duration(ms: int) -> str:
    """86_400_000 -> 'P1D', 45_000 -> 'PT45S': the ISO 8601 form the YAML files use.

    isodate, which parses the definitions' durations, also writes them: the
    same library both ways, so what this prints reads back as the same value.
    """
    return str(isodate.duration_isoformat(timedelta(milliseconds=ms)))


def _reminder(r: ReminderPolicy | None) -> dict[str, Any] | None:
    return None if r is None else {"every": iso_duration(r.interval_ms), "limit": r.limit}


def _stage(s: Stage) -> dict[str, Any]:
    return {
        "name": s.name,
        "party": s.party,
        "deadline": iso_duration(s.deadline_ms),
        "reminder": _reminder(s.reminder),
        "escalation": [{"target": lv.target, "deadline": iso_duration(lv.deadline_ms)}
                       for lv in s.escalation],
    }


def _row(d: WaitDefinition) -> dict[str, Any]:
    return {
        "name": d.name,
        "variant": d.variant.value,
        "channels": list(d.channels),  # empty: any channel is accepted
        "parties": list(d.parties),
        "deadline": iso_duration(d.stages[0].deadline_ms) if len(d.stages) == 1 else None,
        "stages": [_stage(s) for s in d.stages],
        "invalidReply": d.invalid_reply.value,
        "earlyReplyTtl": iso_duration(d.early_reply_ttl_ms),
        "retention": iso_duration(d.retention_ms),
        "poll": None if d.poll_interval_ms is None else iso_duration(d.poll_interval_ms),
        "source": d.source,
    }


def _deadline_text(d: WaitDefinition) -> str:
    if len(d.stages) == 1:
        return iso_duration(d.stages[0].deadline_ms)
    return ", ".join(f"{s.name} {iso_duration(s.deadline_ms)}" for s in d.stages)


def run_definitions(args: argparse.Namespace, settings: Settings) -> int:
    folder = settings.topology / "waits"
    try:
        found = load_definitions(folder)
    except DefinitionError as exc:
        print(f"xwait: invalid wait definition: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if not found:
        print(f"xwait: no wait definitions (*.yaml) in {folder}", file=sys.stderr)
        return EXIT_FAILED
    rows = [found[name] for name in sorted(found)]
    lines = [f"{'NAME':<24} {'VARIANT':<15} {'CHANNELS':<22} DEADLINE"] + [
        f"{d.name:<24} {d.variant.value:<15} {','.join(d.channels) or '(any)':<22} "
        f"{_deadline_text(d)}"
        for d in rows
    ]
    emit({"folder": str(folder), "definitions": [_row(d) for d in rows]}, args.json,
         "\n".join(lines))
    return EXIT_OK
