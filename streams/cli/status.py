"""`xwait status KEY` and `xwait list`: read a worker's console API (urllib, no Kafka).

Any worker answers for the whole cluster (it forwards a key to its owner and
merges every worker's list).  A worker started with a console token wants one
for reads too: `XWAIT_CONSOLE_READ_TOKEN`, else `XWAIT_CONSOLE_TOKEN`, is sent
as a Bearer header.  Exit codes: 0 found, 1 the key is unknown (404) or the
worker refused the request (401: no or a wrong token), 3 no worker answered
at `--console` (`XWAIT_CONSOLE_URL`, default http://127.0.0.1:6066) or none
could answer for the key right now (503: a rebalance is under way).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime
from typing import Any

from streams.cli import EXIT_FAILED, EXIT_KAFKA, EXIT_OK
from streams.core.durations import format_span_ms

DEFAULT_CONSOLE_URL = "http://127.0.0.1:6066"
# A list walks every worker's table; a big one takes seconds.
HTTP_TIMEOUT_S = 30.0


class ApiUnavailable(Exception):
    """No worker answered."""


def console_url(args: argparse.Namespace) -> str:
    url: str = args.console or os.environ.get("XWAIT_CONSOLE_URL") or DEFAULT_CONSOLE_URL
    return url.rstrip("/")


def read_token() -> str | None:
    """The token reads send: the read-only one if set, else the command token."""
    return os.environ.get("XWAIT_CONSOLE_READ_TOKEN") or os.environ.get("XWAIT_CONSOLE_TOKEN")


def get(base: str, path: str) -> tuple[int, Any]:
    """(HTTP status, decoded JSON body) of a GET; raises ApiUnavailable when nothing answers."""
    if not base.startswith(("http://", "https://")):
        raise ApiUnavailable(f"{base}: expected an http:// or https:// URL")
    token = read_token()
    request = urllib.request.Request(  # noqa: S310 - http(s) checked above
        base + path, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as resp:  # noqa: S310 - http(s) checked above
            return int(resp.status), json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        try:
            body = json.loads(exc.read())
        except ValueError:
            body = {"error": exc.reason}
        return exc.code, body
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ApiUnavailable(f"no xwait worker answered at {base}: {reason}") from exc


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _stage(w: dict[str, Any]) -> str | None:
    s = w.get("stage")
    if not s:
        return None
    text = (f"{s['index'] + 1} of {s['count']}: {s['name']}" if s["count"] > 1
            else s.get("party") or "")
    if s["count"] > 1 and s.get("party"):
        text += f" (party {s['party']})"
    if s.get("escalatedTo"):
        text += f", escalated to {s['escalatedTo']}"
    return text or None


def _status_text(w: dict[str, Any]) -> str:
    lines = [f"key         {w['key']}", f"state       {w['state']}",
             f"definition  {w.get('definition')}", f"tenant      {w.get('tenant') or '-'}",
             f"parked at   {_when(w.get('parkedAt'))}"]
    stage = _stage(w)
    if stage:
        lines.append(f"stage       {stage}")
    if w.get("parties"):
        lines.append(f"parties     {', '.join(w['parties'])}")
    done = w.get("state") == "done"
    if not done:
        timers = w.get("timers") or []
        lines.append("timers      " + ("; ".join(f"{t['kind']} due {_when(t['dueAt'])}"
                                               for t in timers) or "none armed"))
    s = w.get("suspension")
    if s:
        left = ", ".join(f"{r['kind']} {format_span_ms(r['ms'])}" for r in s.get("remaining", []))
        lines.append(f"suspended   since {_when(s['at'])}  reason={s.get('reason') or '-'}  "
                     f"resume-to={s['resumeTo']}" + (f"  left={left}" if left else ""))
    if w.get("payload") is not None:
        lines.append(f"payload     {w['payload']}")
    elif w.get("payloadDropped"):
        lines.append("payload     (not kept: over 64 KiB)")
    if w.get("validationIssue"):
        lines.append(f"issue       {w['validationIssue']}")
    if w.get("responseData") is not None:
        lines.append(f"response    {w['responseData']}")
    if w.get("reviewOutcome"):
        lines.append(f"review      {w['reviewOutcome']}: {w.get('reviewNote') or ''}")
    if w.get("outcome"):
        took = (format_span_ms(w["endedAt"] - w["parkedAt"])
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


def _list_text(data: dict[str, Any]) -> str:
    rows = [("KEY", "STATE", "DEFINITION", "TENANT", "NEXT DUE / ENDED")]
    rows += [(w["key"], w["state"], w["definition"], w.get("tenant") or "-", _due_or_end(w))
             for w in data["waits"]]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(widths[i]) if i < 4 else c for i, c in enumerate(r)).rstrip()
             for r in rows]
    lines.append(f"{data['count']} wait(s) from {len(data['workers'])} worker(s)")
    if data.get("next"):
        lines.append(f"more: --after {data['next']}")
    if data.get("unavailable"):
        lines.append("not answering (the list is incomplete): " + ", ".join(data["unavailable"]))
    return "\n".join(lines)


def _fail(status: int, body: Any) -> int:
    message = body.get("error") if isinstance(body, dict) else None
    print(f"xwait: {message or f'HTTP {status}'}", file=sys.stderr)
    return EXIT_KAFKA if status == 503 else EXIT_FAILED


def run_status(args: argparse.Namespace) -> int:
    base = console_url(args)
    try:
        status, body = get(base, "/xwait/api/waits/" + urllib.parse.quote(args.key, safe=""))
    except ApiUnavailable as exc:
        print(f"xwait: {exc}", file=sys.stderr)
        return EXIT_KAFKA
    if status != 200:
        return _fail(status, body)
    print(json.dumps(body, indent=2, sort_keys=True) if args.json else _status_text(body))
    return EXIT_OK


def run_list(args: argparse.Namespace) -> int:
    base = console_url(args)
    query = {k: v for k, v in (("state", args.state), ("definition", args.definition),
                               ("tenant", args.tenant), ("key", args.key_prefix),
                               ("outcome", args.outcome), ("parkedFrom", args.parked_from),
                               ("parkedTo", args.parked_to), ("after", args.after),
                               ("limit", args.limit)) if v is not None}
    try:
        status, body = get(base, "/xwait/api/waits?" + urllib.parse.urlencode(query))
    except ApiUnavailable as exc:
        print(f"xwait: {exc}", file=sys.stderr)
        return EXIT_KAFKA
    if status != 200:
        return _fail(status, body)
    print(json.dumps(body, indent=2, sort_keys=True) if args.json else _list_text(body))
    return EXIT_OK
