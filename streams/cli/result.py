"""`xwait result KEY --timeout S`: wait for one wait's outcome; the exit code says how it ended.

Prints the outcome (JSON with `--json`, else one line), and exits 0 for
RECEIVED, 5 for ESCALATED, 6 for CANCELLED, 7 when no outcome arrived
within `--timeout` and 4 when no wait has the key (a worker said so and the
outcomes topic holds none for it), so a shell script can branch on it.
"""

from __future__ import annotations

import argparse
import json

from streams import codec
from streams.cli import (
    EXIT_CANCELLED,
    EXIT_ESCALATED,
    EXIT_FAILED,
    EXIT_NO_RESULT,
    EXIT_OK,
    emit,
    fail_with,
)
from streams.cli.tail import readable
from streams.client import OutcomeKind, ResultTimeout, XwaitClient
from streams.config import Settings

_EXIT_BY_OUTCOME = {
    OutcomeKind.RECEIVED: EXIT_OK,
    OutcomeKind.ESCALATED: EXIT_ESCALATED,
    OutcomeKind.CANCELLED: EXIT_CANCELLED,
}


def run_result(args: argparse.Namespace, settings: Settings) -> int:
    with XwaitClient(settings) as client:
        try:
            outcome = client.result(args.key, timeout=args.timeout)
        except ResultTimeout as exc:
            return fail_with(EXIT_NO_RESULT, f"xwait: {exc}")
    record = outcome.to_record()
    emit(readable(codec.RecordType.OUTCOME, record), args.json,
         f"{outcome.outcome.value} ({outcome.reason})  key={outcome.correlation_key}  "
         f"reminders={outcome.reminders_sent}  escalation-level={outcome.escalation_level}"
         + (f"  data={json.dumps(outcome.response_data)}" if outcome.response_data is not None
            else "")
         + (f"\n  send error: {outcome.send_error}" if outcome.send_error else ""))
    # A symbol a newer schema added: the wait ended, but not in a way this build knows.
    return _EXIT_BY_OUTCOME.get(outcome.outcome, EXIT_FAILED)
