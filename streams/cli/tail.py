"""`xwait tail outcomes|actions|rejected`: the processor's output as JSON lines on stdout.

One record per line, flushed per line so a pipe sees it at once.
Diagnostics go to stderr only, so stdout stays machine-readable.

By default a line is meant to be read: a JSON-text field (``responseData``,
``payload``) is nested as JSON, and a rejected record's ``key`` and
``original`` bytes are shown as text, or as the record they decode to
(nested), falling back to ``{"base64": ...}`` only for bytes that are not
text. ``--raw`` prints exactly what ``streams.codec.to_json`` writes (bytes
as base64, JSON fields as text), which ``codec.from_json`` reads back, for
fixing a rejected record by hand and replaying it.

With ``--key``, the tail starts where that wait's records start, as
``xwait result`` does: at its park time as a worker reports it, or at the
oldest record of the key's partition when no worker knows the wait (purged,
or no worker answering). Without a key it prints new records only, unless
``--from-beginning``.

``--headers`` prints each record with its Kafka headers, as
``{"headers": {...}, "record": {...}}``: the wait's ``traceparent`` travels
there, on every action and outcome.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
from collections.abc import Mapping
from typing import Any

from streams import codec
from streams.cli import EXIT_FAILED, EXIT_OK, fail_with
from streams.client import UndecodableOutput, XwaitConsumer, _console
from streams.client.results import RESULT_LOOKBACK_MS
from streams.codec import RecordType, UndecodableRecord
from streams.config import Settings

_POLL_S = 0.5  # how often a quiet tail re-checks --timeout; shorter only burns CPU

JSON_TEXT_FIELDS = frozenset({"responseData", "payload"})
"""Fields the contract defines as JSON text."""

# The record type of each input topic role, to decode a rejected record's original.
_ORIGINAL_TYPE = {"requests": RecordType.START_WAIT, "replies": RecordType.REPLY,
                  "commands": RecordType.COMMAND, "timers": RecordType.TIMER}


def _nested_json(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text  # not JSON after all: show the text as it is


def _shown_bytes(data: bytes | None, record_type: RecordType | None = None) -> Any:
    """A decoded record, else text, else {"base64": ...}; None stays None."""
    if data is None:
        return None
    if record_type is not None:
        try:
            if record_type is RecordType.REPLY:  # the replies topic carries results too
                kind, record = codec.active_codec().decode_either(
                    (RecordType.REPLY, RecordType.ACTION_RESULT), data)
                return readable(kind, record)
            return readable(record_type, codec.decode(record_type, data))
        except UndecodableRecord:
            pass
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}
    return _nested_json(text) if text.lstrip().startswith(("{", "[")) else text


def readable(record_type: RecordType, record: Mapping[str, Any]) -> dict[str, Any]:
    """``record`` for a person: JSON-text fields nested, bytes as text or decoded records."""
    out: dict[str, Any] = {}
    for name, value in record.items():
        if name in JSON_TEXT_FIELDS:
            out[name] = _nested_json(value)
        elif isinstance(value, bytes):
            original_type = None
            if record_type is RecordType.REJECTED and name == "original":
                role = str(record.get("topic", "")).rsplit(".", 1)[-1]
                original_type = _ORIGINAL_TYPE.get(role)
            out[name] = _shown_bytes(value, original_type)
        else:
            out[name] = value
    return out


def parked_since(settings: Settings, key: str) -> int | None:
    """Where one wait's records start (epoch ms), from a worker; None when none knows it."""
    try:
        status, body = _console.get(
            settings.console_url, _console.wait_path(key), timeout=_console.CHECK_TIMEOUT_S,
            token=settings.console_read_token or settings.console_token)
    except _console.ConsoleUnreachable:
        return None
    parked = body.get("parkedAt") if status == 200 and isinstance(body, dict) else None
    return parked - RESULT_LOOKBACK_MS if isinstance(parked, int) else None


def run_tail(args: argparse.Namespace, settings: Settings) -> int:
    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    seen = undecodable = 0
    from_beginning, since_ms = args.from_beginning, None
    if args.key is not None and not from_beginning and args.group_id is None:
        # One wait's records: from its park time, so a wait that already ended
        # shows them; a wait no worker knows, from its partition's oldest record.
        since_ms = parked_since(settings, args.key)
        from_beginning = since_ms is None
    consumer: XwaitConsumer[Any] = XwaitConsumer(
        args.kind, settings, group_id=args.group_id, from_beginning=from_beginning,
        key=args.key, since_ms=since_ms)
    try:
        while args.count is None or seen < args.count:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                break
            try:
                record = consumer.poll(_POLL_S if remaining is None else min(_POLL_S, remaining))
            except UndecodableOutput as exc:
                undecodable += 1
                print(f"xwait: skipped an undecodable record: {exc}", file=sys.stderr)
                continue
            if record is None:
                continue
            seen += 1
            fields = record.to_record()
            line = (codec.to_json(record.record_type, fields) if args.raw
                    else json.dumps(readable(record.record_type, fields), ensure_ascii=False))
            if args.headers:
                line = (f'{{"headers": {json.dumps(consumer.headers, ensure_ascii=False)}, '
                        f'"record": {line}}}')
            print(line, flush=True)
    except KeyboardInterrupt:
        pass  # Ctrl-C is how a follow-mode tail ends
    finally:
        consumer.close()
    if args.count is not None and seen < args.count:
        within = "" if args.timeout is None else f" within {args.timeout:g} s"
        return fail_with(EXIT_FAILED, f"xwait: {seen} of {args.count} {args.kind} records{within}")
    return EXIT_FAILED if undecodable else EXIT_OK
