"""`xwait status KEY` and `xwait list`: read a worker's console API (urllib, no Kafka).

Any worker answers for the whole cluster (it forwards a key to its owner and
merges every worker's list).  A worker started with a console token wants one
for reads too: `XWAIT_CONSOLE_READ_TOKEN`, else `XWAIT_CONSOLE_TOKEN`, is sent
as a Bearer header.  Exit codes: 0 found, 4 the key is unknown (404), 1 the
worker refused the request (401: no token, or a wrong one), 2 a key no wait
can have (longer than streams.core.keys.MAX_KEY_BYTES, or with NUL: no worker
is asked), 3 no worker answered at `--console` (`XWAIT_CONSOLE_URL`, default
http://127.0.0.1:6066) or none could answer for the key right now (503: a
rebalance is under way).  With `--json`, the
worker's answer is printed as it came, also for a 404 (its body counts the
replies and commands held for the key).
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.parse
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from streams.cli import EXIT_FAILED, EXIT_KAFKA, EXIT_NO_SUCH_WAIT, EXIT_OK, EXIT_USAGE, fail_with
from streams.client._console import ConsoleUnreachable, get, wait_path
from streams.config import Settings
from streams.core.keys import key_problem


def _duration(ms: int) -> str:
    """12_345 -> '12.3s', 90_000 -> '1m30s', 93_600_000 -> '1d2h': what a person reads."""
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, sec = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    parts = [(days, "d"), (hours, "h"), (minutes, "m"), (sec, "s")]
    shown = [f"{n}{unit}" for n, unit in parts if n]
    return "".join(shown[:2])


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def read_token(settings: Settings) -> str | None:
    """The token reads send: the read-only one if set, else the command token."""
    return settings.console_read_token or settings.console_token


def _stage(w: dict[str, Any]) -> str | None:
    """The worker's own text of the stage (streams.console.waits.stage_text); composed
    the same way here only for a worker from before it sent one."""
    s = w.get("stage")
    if not s:
        return None
    if isinstance(s.get("text"), str):
        return s["text"] or None
    parts = [f"{s['index'] + 1} of {s['count']}: {s['name']}"
             + (f" (party {s['party']})" if s.get("party") else "")] if s["count"] > 1 \
        else [s["party"]] if s.get("party") else []
    if s.get("escalatedTo"):
        parts.append(f"escalated to {s['escalatedTo']}")
    return ", ".join(parts) or None


def _status_text(w: dict[str, Any]) -> str:
    lines = [f"key         {w['key']}", f"state       {w['state']}",
             f"definition  {w.get('definition')}"
             + (f" version {w['definitionVersion']}" if w.get("definitionVersion") else ""),
             f"tenant      {w.get('tenant') or '-'}",
             f"parked at   {_when(w.get('parkedAt'))}"]
    stage = _stage(w)
    if stage:
        lines.append(f"stage       {stage}")
    if w.get("parties"):
        lines.append(f"parties     {', '.join(w['parties'])}")
    if w.get("state") != "done":
        timers = w.get("timers") or []
        lines.append("timers      " + ("; ".join(f"{t['kind']} due {_when(t['dueAt'])}"
                                               for t in timers) or "none armed"))
    s = w.get("suspension")
    if s:
        lines.append(f"suspended   since {_when(s['at'])}  reason={s.get('reason') or '-'}  "
                     f"resume-to={s['resumeTo']}  by={s.get('operator') or '-'}")
        left = "; ".join(f"{r['kind']} {_duration(r['ms'])}" for r in s.get("remaining") or [])
        lines.append(f"left        {left or 'no timer was armed'} (restored on resume)")
    held = w.get("held") or []
    if held:
        lines.append(f"held        {len(held)} reply(s), decided on resume:")
        lines += [f"  {_when(h.get('receivedAt'))}  channel={h.get('channel')}  "
                  f"key={h.get('correlationKey')}  data={h.get('responseData')}" for h in held]
    if w.get("payload") is not None:
        lines.append(f"payload     {w['payload']}")
    elif w.get("payloadDropped"):
        lines.append("payload     (not kept: over 64 KiB)")
    if w.get("validationIssue"):
        lines.append(f"issue       {w['validationIssue']}")
    for send in w.get("sends") or []:
        if send.get("state") != "delivered":
            retry = f", sent again {_when(send['retryAt'])}" if send.get("retryAt") else ""
            lines.append(f"send        {send['action']} level {send['level']} "
                         f"attempt {send['sendAttempt']}: {send['state']}{retry}"
                         + (f" ({send['error']})" if send.get("error") else ""))
    if w.get("sendError"):
        lines.append(f"send error  {w['sendError']}")
    if w.get("responseData") is not None:
        lines.append(f"response    {w['responseData']}")
    if w.get("reviewOutcome"):
        lines.append(f"review      {w['reviewOutcome']}: {w.get('reviewNote') or ''}")
    if w.get("outcome"):
        took = (_duration(w["endedAt"] - w["parkedAt"])
                if w.get("endedAt") is not None else "?")
        lines.append(f"outcome     {w['outcome']} ({w.get('reason')}) at "
                     f"{_when(w.get('endedAt'))}, after {took}")
        if w.get("operator") or w.get("operatorReason"):
            lines.append(f"by          {w.get('operator') or '-'}: "
                         f"{w.get('operatorReason') or 'no reason given'}")
        lines.append(f"purged at   {_when(w.get('purgeAt'))}")
    lines.append(f"worker      {w.get('worker', '-')}  partition={w.get('partition')}")
    lines.append("trace")
    for e in w.get("trace") or []:
        detail = f"  {e['detail']}" if e.get("detail") else ""
        lines.append(f"  {_when(e['at'])}  {e['event']}{detail}")
    return "\n".join(lines)


def _due_or_end(w: dict[str, Any]) -> str:
    if w["state"] == "done":
        return f"ended {_when(w.get('endedAt'))} {w.get('outcome')} ({w.get('reason')})"
    return _when(w.get("nextDueAt")) if w.get("nextDueAt") is not None else "paused"


def waits_table(waits: list[dict[str, Any]]) -> list[str]:
    """Listed waits as aligned lines under a header (`xwait list`, a bulk dry run)."""
    rows = [("KEY", "STATE", "DEFINITION", "TENANT", "NEXT DUE / ENDED")]
    rows += [(w["key"], w["state"], w["definition"], w.get("tenant") or "-", _due_or_end(w))
             for w in waits]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return ["  ".join(c.ljust(widths[i]) if i < 4 else c for i, c in enumerate(r)).rstrip()
            for r in rows]


def _list_text(data: dict[str, Any]) -> str:
    lines = waits_table(data["waits"])
    lines.append(f"{data['count']} wait(s) from {len(data['workers'])} worker(s)")
    if data.get("next"):
        lines.append(f"more: --after {data['next']}")
    if data.get("unavailable"):
        lines.append("not answering (the list is incomplete): " + ", ".join(data["unavailable"]))
    return "\n".join(lines)


def _fail(status: int, body: Any, as_json: bool) -> int:
    if as_json and isinstance(body, dict):  # scripts get the worker's whole answer
        print(json.dumps({"status": status, **body}, indent=2, sort_keys=True))
    message = body.get("error") if isinstance(body, dict) else None
    if status == 404 and isinstance(body, dict) and "earlyReplies" in body:
        held = (body.get("earlyReplies") or 0, body.get("earlyCommands") or 0)
        if any(held):
            message = (f"{message}; {held[0]} reply(s) and {held[1]} command(s) are held for "
                       "it, waiting for its request")
    print(f"xwait: {message or f'HTTP {status}'}", file=sys.stderr)
    if status == 503:
        return EXIT_KAFKA
    return EXIT_NO_SUCH_WAIT if status == 404 else EXIT_FAILED


def _show(settings: Settings, path: str, as_json: bool, text: Callable[[Any], str]) -> int:
    """GET the console's `path` and print its answer: as JSON, or as `text` makes it."""
    try:
        status, body = get(settings.console_url, path, token=read_token(settings))
    except ConsoleUnreachable as exc:
        return fail_with(EXIT_KAFKA, f"xwait: {exc}")
    if status != 200:
        return _fail(status, body, as_json)
    print(json.dumps(body, indent=2, sort_keys=True) if as_json else text(body))
    return EXIT_OK


def run_status(args: argparse.Namespace, settings: Settings) -> int:
    problem = key_problem(args.key.encode("utf-8", "surrogatepass"))
    if problem is not None:  # no wait can have it: no worker is asked
        return fail_with(EXIT_USAGE, f"xwait: {problem}")
    return _show(settings, wait_path(args.key), args.json, _status_text)


def run_list(args: argparse.Namespace, settings: Settings) -> int:
    query = {k: v for k, v in (("state", args.state), ("definition", args.definition),
                               ("tenant", args.tenant), ("key", args.key_prefix),
                               ("outcome", args.outcome), ("parkedFrom", args.parked_from),
                               ("parkedTo", args.parked_to), ("after", args.after),
                               ("limit", args.limit)) if v is not None}
    return _show(settings, "/xwait/api/waits?" + urllib.parse.urlencode(query), args.json,
                 _list_text)
