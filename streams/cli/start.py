"""`xwait start`: park one wait, N alike (--count) or one per line of a file (--file).

Prints the keys, one per line (or `--json`), so a script can capture them;
the W3C traceparent each request was sent with (`--traceparent`, else a fresh
trace) goes to stderr for one wait, and into `--json` for all.
A batch shows a progress bar (tqdm) on stderr when it takes more than a
moment, and only when stderr is a terminal and the output is not `--json`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from tqdm import tqdm

from streams.cli import EXIT_OK, emit
from streams.client import InvalidRequest, WaitSpec, XwaitClient
from streams.config import Settings

_FILE_FIELDS = {"definition", "correlationKey", "tenant", "payload", "parties", "deadline",
                "traceparent"}


class ProgressBar:
    """``on_progress`` of ``start_many`` drawn by tqdm; silent for work that ends within ``delay``.

    tqdm (rather than the hand-drawn bar this replaced) gives the rate and
    the time left, adapts to the terminal's width, and draws at most ~10
    times a second however often Kafka acknowledges.
    """

    def __init__(self, stream: TextIO, total: int, *, enabled: bool, delay: float = 0.5,
                 label: str = "starting waits") -> None:
        # delay: below it a bar would only flicker.
        self.bar = tqdm(file=stream, total=total, disable=not enabled, delay=delay, desc=label,
                        unit=" waits", leave=True, dynamic_ncols=True)

    def __call__(self, done: int, total: int) -> None:
        if self.bar.total != total:
            self.bar.total = total
        if done > self.bar.n:
            self.bar.update(done - self.bar.n)

    def finish(self) -> None:
        self.bar.close()


def _payload(text: str | None) -> str | None:
    if text is None:
        return None
    try:
        json.loads(text)
    except ValueError as exc:
        raise InvalidRequest(f"--payload is not valid JSON: {exc}") from exc
    return text


def _read_file(path: Path, default_definition: str | None) -> tuple[list[WaitSpec], list[int]]:
    """The waits of a JSON-lines file, and the line number of each (for error messages)."""
    where = "stdin" if str(path) == "-" else str(path)
    try:
        lines = sys.stdin.read().splitlines() if where == "stdin" else (
            path.read_text(encoding="utf-8").splitlines())
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidRequest(f"--file {where}: cannot read it ({exc})") from exc
    specs = []
    numbers = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        at = f"--file {where} line {number}"
        try:
            item = json.loads(line)
        except ValueError as exc:
            raise InvalidRequest(f"{at}: not valid JSON: {exc}") from exc
        if not isinstance(item, dict):
            raise InvalidRequest(f"{at}: expected a JSON object, got {type(item).__name__}")
        unknown = sorted(set(item) - _FILE_FIELDS)
        if unknown:
            raise InvalidRequest(f"{at}: unknown field {unknown[0]!r}; expected some of "
                                 f"{sorted(_FILE_FIELDS)}")
        definition = item.get("definition", default_definition)
        if not isinstance(definition, str):
            raise InvalidRequest(f"{at}: no definition (give it on the line or as argument)")
        for name in ("correlationKey", "tenant", "deadline", "traceparent"):
            if item.get(name) is not None and not isinstance(item[name], str):
                raise InvalidRequest(f"{at}: field {name!r} must be a string")
        parties = item.get("parties") or []
        if not isinstance(parties, list):
            raise InvalidRequest(f"{at}: field 'parties' must be a list of names")
        specs.append(WaitSpec(definition=definition, correlation_key=item.get("correlationKey"),
                              tenant=item.get("tenant"), payload=item.get("payload"),
                              parties=tuple(parties), deadline=item.get("deadline"),
                              traceparent=item.get("traceparent")))
        numbers.append(number)
    return specs, numbers


def _specs(args: argparse.Namespace) -> tuple[list[WaitSpec], list[int] | None]:
    """The waits to start and, for --file, the line of each."""
    if args.file is not None:
        if (args.key or args.tenant or args.payload or args.parties or args.deadline
                or args.traceparent):
            raise InvalidRequest("--file gives each wait's fields; use only a definition with it")
        return _read_file(args.file, args.definition)
    if args.definition is None:
        raise InvalidRequest("name the wait definition to start (see `xwait definitions`)")
    count = args.count or 1
    if args.key is not None and count > 1:
        raise InvalidRequest("--key names one wait; --count starts several, each its own key")
    spec = WaitSpec(definition=args.definition, correlation_key=args.key, tenant=args.tenant,
                    payload=_payload(args.payload), parties=tuple(args.parties),
                    deadline=args.deadline, traceparent=args.traceparent)
    return [spec] * count, None


def run_start(args: argparse.Namespace, settings: Settings) -> int:
    specs, lines = _specs(args)
    bar = ProgressBar(sys.stderr, len(specs), enabled=len(specs) > 1 and not args.json
                      and sys.stderr.isatty())
    with XwaitClient(settings) as client:
        try:
            keys = client.start_many(specs, on_progress=bar)
        except InvalidRequest as exc:
            if lines is None or exc.item is None and len(specs) > 1:
                raise
            where = "stdin" if str(args.file) == "-" else str(args.file)
            line = lines[exc.item if exc.item is not None else 0]
            raise InvalidRequest(f"--file {where} line {line}: {exc.problem}") from exc
        finally:
            bar.finish()
    data: dict[str, Any] = {"topic": settings.topic("requests"),
                            "correlationKeys": [str(k) for k in keys],
                            "traceparents": [k.traceparent for k in keys]}
    emit(data, args.json, "\n".join(keys))
    if len(keys) == 1 and not args.json:  # stdout stays the key alone: KEY=$(xwait start)
        print(f"traceparent {keys[0].traceparent}", file=sys.stderr)
    return EXIT_OK
