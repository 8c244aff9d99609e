"""The scale bench's waits: which definition and fate wait number i has, its records, and the
topology whose timers are stretched so that nothing falls due while a run parks."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from streams.core.durations import parse_cycle_ms, parse_duration_ms
from streams.testing.harness.topology import SHIPPED as SHIPPED_WAITS
from streams.testing.harness.topology import make_topology

# The shipped definitions the waits are spread over (demo-approval, on a clock
# of seconds, is left out: its waits would not stay parked).
SHIPPED = ("expense-approval", "vendor-quote", "first-valid", "probe", "two-stage-approval")
# Definitions whose invalid reply opens a review (invalid_reply: review), and an
# invalid reply for each: (channel, responseData) that fails its schema.
REVIEWABLE: dict[str, tuple[str, dict[str, Any]]] = {
    "expense-approval": ("portal", {"decision": "maybe"}),
    "vendor-quote": ("email", {"amount": -1, "currency": "usd"}),
}
# The sample's definition: no escalation level, so its deadline ends it ESCALATED.
SAMPLE_DEFINITION = "first-valid"


@dataclass(frozen=True)
class Planned:
    """What wait number i of a run is: its key, definition and fate."""

    key: str
    definition: str
    fate: str  # park | review | suspend


def planned(seed: int, i: int, review: float, suspend: float) -> Planned:
    """Wait i of the run with this seed, the same every time (so no key list is kept)."""
    digest = hashlib.blake2b(f"{seed}:{i}".encode(), digest_size=16).digest()
    u = int.from_bytes(digest[2:6], "big") / 2**32
    if u < review:
        names = sorted(REVIEWABLE)
        return Planned(digest.hex(), names[digest[0] % len(names)], "review")
    fate = "suspend" if u < review + suspend else "park"
    return Planned(digest.hex(), SHIPPED[digest[0] % len(SHIPPED)], fate)


def sample_key(seed: int, n: int, j: int) -> str:
    return hashlib.blake2b(f"{seed}:sample:{n}:{j}".encode(), digest_size=16).hexdigest()


def start_record(key: str, definition: str, i: int, deadline: str | None = None) -> bytes:
    record: dict[str, Any] = {"correlationKey": key, "definition": definition,
                              "requestedAt": int(time.time() * 1000),
                              "payload": f'{{"ref": "scale-{i}", "amount": 120}}'}
    if deadline is not None:
        record["deadline"] = deadline
    return orjson.dumps(record)


def invalid_reply(key: str, definition: str) -> bytes:
    channel, data = REVIEWABLE[definition]
    return orjson.dumps({"correlationKey": key, "channel": channel,
                         "responseData": json.dumps(data), "replyId": f"{key}-r1"})


def suspend_command(key: str) -> bytes:
    return orjson.dumps({"correlationKey": key, "command": "SUSPEND",
                         "reason": "scale bench: a few percent are suspended",
                         "operator": "scale-bench"})


def stretch_topology(doc: dict[str, Any], floor_ms: int, floor_iso: str) -> list[str]:
    """Raise the timers a wait arms when it parks (deadline, reminder, poll, of the
    definition or of its stages) to the floor where they are shorter; say what changed.
    Escalation levels arm only once a deadline has passed: they are left alone."""
    changes: list[str] = []
    name = str(doc.get("name", "?"))

    def fix(holder: dict[str, Any], key: str, where: str) -> None:
        raw = holder.get(key)
        if isinstance(raw, str) and parse_duration_ms(raw) < floor_ms:
            holder[key] = floor_iso
            changes.append(f"{name}: {where} {raw} -> {floor_iso}")

    def fix_reminder(holder: dict[str, Any], where: str) -> None:
        raw = holder.get("reminder")
        if isinstance(raw, str):
            limit, interval = parse_cycle_ms(raw)
            if interval < floor_ms:
                holder["reminder"] = f"R{limit}/{floor_iso}"
                changes.append(f"{name}: {where} {raw} -> R{limit}/{floor_iso}")
        elif isinstance(raw, dict):
            fix(raw, "every", f"{where}.every")

    fix(doc, "deadline", "deadline")
    fix(doc, "poll", "poll")
    fix_reminder(doc, "reminder")
    for i, stage in enumerate(doc.get("stages") or []):
        if isinstance(stage, dict):
            fix(stage, "deadline", f"stages[{i}].deadline")
            fix_reminder(stage, f"stages[{i}].reminder")
    return changes

def scale_topology(folder: Path, floor: str | None) -> list[str]:
    """topics.yaml and the shipped definitions, timers below `floor` raised to it."""

    def stretch(doc: dict[str, Any], _name: str) -> list[str]:
        return [] if floor is None else stretch_topology(doc, parse_duration_ms(floor), floor)

    return make_topology(folder, [SHIPPED_WAITS / f"{name}.yaml" for name in SHIPPED], stretch)


__all__ = ["REVIEWABLE", "SAMPLE_DEFINITION", "SHIPPED", "Planned", "invalid_reply", "planned",
           "sample_key", "scale_topology", "start_record", "stretch_topology", "suspend_command"]
