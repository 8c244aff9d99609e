"""`xwait tail outcomes|actions|rejected`: the processor's output as JSON lines on stdout.

One record per line, exactly as `streams.codec.to_json` writes it (what
`codec.from_json` reads back), flushed per line so a pipe sees it at once.
Diagnostics go to stderr only, so stdout stays machine-readable.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from streams import codec
from streams.cli import EXIT_FAILED, EXIT_OK
from streams.client import UndecodableOutput, XwaitConsumer
from streams.config import Settings

_POLL_S = 0.5  # how often a quiet tail re-checks --timeout; shorter only burns CPU


def run_tail(args: argparse.Namespace, settings: Settings) -> int:
    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    seen = undecodable = 0
    consumer: XwaitConsumer[Any] = XwaitConsumer(
        args.kind, settings, group_id=args.group_id, from_beginning=args.from_beginning)
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
            print(codec.to_json(record.record_type, record.to_record()), flush=True)
    except KeyboardInterrupt:
        pass  # Ctrl-C is how a follow-mode tail ends
    finally:
        consumer.close()
    if args.count is not None and seen < args.count:
        within = "" if args.timeout is None else f" within {args.timeout:g} s"
        print(f"xwait: {seen} of {args.count} {args.kind} records{within}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_FAILED if undecodable else EXIT_OK
