"""`xwait definitions`: list the wait definitions of topology/waits, and validate them;
the versions in use and how many waits follow each; `definitions remove NAME`.

Loading is the validation: the same loader the worker uses at start-up, so a
definition this command accepts is one the worker accepts, and a broken one is
named here (file, field, what was expected) before a worker refuses to start.

The versions in use come from the workers (`GET /xwait/api/versions` at
`XWAIT_CONSOLE_URL`, merged across workers): every version kept in
`<prefix>.definitions`, the waits not yet done that follow each, and which
workers park new waits on it (the newest of their files).
"""

from __future__ import annotations

import argparse
from datetime import timedelta
from typing import Any

import isodate

from streams.cli import EXIT_FAILED, EXIT_KAFKA, EXIT_OK, emit, fail_with
from streams.client import _console
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
        "version": d.version,
        "variant": d.variant.value,
        "channels": list(d.channels),  # empty: any channel is accepted
        "parties": list(d.parties),
        "deadline": iso_duration(d.stages[0].deadline_ms) if len(d.stages) == 1 else None,
        "stages": [_stage(s) for s in d.stages],
        "invalidReply": d.invalid_reply.value,
        "earlyReplyTtl": iso_duration(d.early_reply_ttl_ms),
        "retention": iso_duration(d.retention_ms),
        "poll": None if d.poll_interval_ms is None else iso_duration(d.poll_interval_ms),
        "onSendFailure": None if d.on_send_failure is None else {
            "retries": d.on_send_failure.retries,
            "backoff": iso_duration(d.on_send_failure.backoff_ms),
            "then": d.on_send_failure.then.value},
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
        return fail_with(EXIT_FAILED, f"xwait: invalid wait definition: {exc}")
    if not found:
        return fail_with(EXIT_FAILED, f"xwait: no wait definitions (*.yaml) in {folder}")
    rows = [found[name] for name in sorted(found)]
    lines = [f"{'NAME':<24} {'VERSION':<13} {'VARIANT':<15} {'CHANNELS':<22} DEADLINE"] + [
        f"{d.name:<24} {d.version:<13} {d.variant.value:<15} "
        f"{','.join(d.channels) or '(any)':<22} {_deadline_text(d)}"
        for d in rows
    ]
    in_use, note = _in_use(settings)
    if in_use is not None:
        lines += ["", f"VERSIONS IN USE ({note})",
                  f"{'NAME':<24} {'VERSION':<13} {'WAITS':>6} {'PARKED':>7} {'IN_REVIEW':>10} "
                  f"{'SUSPENDED':>10}  NEWEST ON"]
        workers = len(in_use.get("workers", []))
        for v in in_use.get("versions", []):
            w = v["waits"]
            newest = f"{len(v['newestOn'])} of {workers} workers" if v["newestOn"] else "-"
            lines.append(f"{v['definition']:<24} {v['version'] or '(none)':<13} "
                         f"{v['following']:>6} {w['parked']:>7} {w['in_review']:>10} "
                         f"{w['suspended']:>10}  {newest}")
    else:
        lines += ["", f"versions in use: unknown ({note})"]
    emit({"folder": str(folder), "definitions": [_row(d) for d in rows],
          "inUse": in_use}, args.json, "\n".join(lines))
    return EXIT_OK


def _in_use(settings: Settings) -> tuple[dict[str, Any] | None, str]:
    """The workers' merged versions, or None and why not."""
    base = settings.console_url
    try:
        status, body = _console.get(base, "/xwait/api/versions",
                                    timeout=_console.CHECK_TIMEOUT_S,
                                    token=settings.console_read_token or settings.console_token)
    except _console.ConsoleUnreachable as exc:
        return None, str(exc)
    if status != 200 or not isinstance(body, dict):
        error = body.get("error") if isinstance(body, dict) else body
        return None, f"the worker at {base} answered {status}: {error}"
    answered = len(body.get("workers", []))
    missing = body.get("unavailable") or []
    note = f"{answered} worker{'s' if answered != 1 else ''} answered at {base}"
    if missing:
        note += f"; not answering: {', '.join(missing)} (their waits are not counted)"
    return body, note


def run_remove(args: argparse.Namespace, settings: Settings) -> int:
    """Remove every stored version of a definition no wait still follows.

    Refused (exit 1) while waits not yet done follow any of its versions, or
    while a worker still has it in its files (it would publish it again);
    exit 3 when no worker answers (the waits cannot be counted).
    """
    from streams.definition_store import DefinitionStore

    name = args.name
    in_use, note = _in_use(settings)
    if in_use is None:
        return fail_with(EXIT_KAFKA,
                         f"xwait: cannot count the waits that follow {name!r}: {note}")
    if not in_use.get("complete", False):
        return fail_with(EXIT_FAILED, f"xwait: refused: not every worker answered ({note})")
    mine = [v for v in in_use.get("versions", []) if v["definition"] == name]
    following = {v["version"] or "(none)": v["following"] for v in mine if v["following"]}
    if following:
        total = sum(following.values())
        each = ", ".join(f"version {v}: {n}" for v, n in sorted(following.items()))
        return fail_with(EXIT_FAILED,
                         f"xwait: refused: {total} wait{'s' if total != 1 else ''} not yet done "
                         f"still follow {name!r} ({each}); let them end, cancel them, or migrate "
                         "them (`xwait migrate KEY --to VERSION`) to another definition's "
                         "version first")
    loading = [w["worker"] for w in in_use.get("workers", []) if name in w.get("newest", {})]
    if loading:
        return fail_with(EXIT_FAILED, f"xwait: refused: {', '.join(loading)} still load "
                                      f"{name!r} from their files; delete its file from their "
                                      "topology and restart them first")
    store = DefinitionStore(settings)
    versions = sorted(found.version for found in store.read_all().values()
                      if found is not None and found.name == name)
    if not versions:
        return fail_with(EXIT_FAILED, f"xwait: no stored version of {name!r} in {store.topic}")
    removed = store.remove(name, versions)
    emit({"removed": name, "versions": removed, "topic": store.topic}, args.json,
         f"removed {name}: versions {', '.join(removed)} from {store.topic}")
    return EXIT_OK
