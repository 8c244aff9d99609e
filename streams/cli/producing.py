"""The parsers of the commands that produce records (`xwait start`, `reply`, the
operator commands, `report`, `review`) and the flags they share: who gives the
command, `--force`, `--wait` for the worker's receipt.  argparse only: building
the parser must stay cheap (see streams.cli)."""

from __future__ import annotations

import argparse
import getpass
from pathlib import Path
from typing import Any

from streams.cli import _common, _positive_float, _positive_int

__all__ = ["add_producing_commands"]


def _default_operator() -> str | None:
    try:
        return getpass.getuser()  # $LOGNAME, $USER, ..., then the password database
    except (OSError, KeyError):
        return None


def _operator(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--operator", default=_default_operator(),
                        help="who gives the command, for the trace (default: $USER)")


def _force(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--force", action="store_true",
                        help="send even when a worker says no wait has the key (exit 4 "
                             "otherwise), e.g. for a reply that overtakes its request")


def _receipt_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--wait", action="store_true",
                        help="wait for the worker's receipt: print what became of it; the "
                             "exit code says it (0 won or applied, 8 held, 9 in review, 10 "
                             "late, 11 duplicate, 12 tenant mismatch, 13 refused, 14 "
                             "unchanged, 15 recorded, 5 escalated, 7 none in time)")
    parser.add_argument("--timeout", type=_positive_float, default=None,
                        help="with --wait: seconds to wait for the receipt (default 10); "
                             "with --where: seconds to wait, after the last command, for the "
                             "workers to decide every one (default 30)")


def _operator_command(parser: argparse.ArgumentParser, *, bulk: bool) -> None:
    """The flags every operator command ends with: who gives it, --wait for the receipt,
    --force, the bulk flags (--where ...) when it can select many waits, the common ones."""
    from streams.cli.bulk_flags import add_bulk_flags

    _operator(parser)
    _receipt_flags(parser)
    _force(parser)
    if bulk:
        add_bulk_flags(parser)
    _common(parser, console=True)


def add_producing_commands(sub: Any) -> None:
    """The commands that produce records: start, reply, the operator commands (one wait,
    or a bulk operation with --where), reschedule, migrate, report, review."""
    # The flags of a bulk operation (--where ...): argparse only, cheap to import.
    from streams.cli.bulk_flags import add_key_or_where

    start = sub.add_parser("start", help="start a wait (or a batch: --count, --file)")
    start.add_argument("definition", nargs="?",
                       help="wait definition name (with --file: the default for its lines)")
    start.add_argument("--key", help="correlation key (default: 128 fresh random bits)")
    start.add_argument("--tenant", help="owner of the wait; replies must name the same")
    start.add_argument("--payload", help="JSON handed to the send_request action")
    start.add_argument("--party", dest="parties", action="append", default=[],
                       help="a party of a first-valid wait (repeatable)")
    start.add_argument("--deadline", help="ISO 8601 duration overriding the definition's")
    start.add_argument("--traceparent",
                       help="W3C trace context to send the request with (default: a fresh "
                            "trace); the wait's actions and outcome carry it")
    batch = start.add_mutually_exclusive_group()
    batch.add_argument("--count", type=_positive_int, help="start N waits, each its own key")
    batch.add_argument("--file", type=Path,
                       help="JSON lines, one wait each: definition, correlationKey, tenant, "
                            "payload, parties, deadline ('-' reads stdin)")
    _common(start)

    reply = sub.add_parser("reply", help="answer a wait (KEY is WAITKEY or WAITKEY~PARTY)")
    reply.add_argument("key")
    reply.add_argument("--channel", required=True, help="channel the reply came through")
    reply.add_argument("--data", required=True, help="the answer, JSON (responseData)")
    reply.add_argument("--tenant", help="tenant the reply claims")
    reply.add_argument("--reply-id", help="id that makes a retried reply a duplicate")
    _receipt_flags(reply)
    _force(reply)
    _common(reply, console=True)

    for name, text in (("suspend", "pause a wait's deadlines, keeping its place (or every "
                                   "wait --where FILTER selects)"),
                       ("resume", "resume a suspended wait (or every wait --where FILTER "
                                  "selects)"),
                       ("cancel", "end a wait as CANCELLED (or every wait --where FILTER "
                                  "selects)"),
                       ("deliver", "hand in an answer as if a reply had arrived")):
        cmd = sub.add_parser(name, help=text)
        if name == "deliver":
            cmd.add_argument("key")
        else:
            add_key_or_where(cmd)
        cmd.add_argument("--reason", required=name in ("suspend", "cancel"), help="why")
        if name == "deliver":
            cmd.add_argument("--data", required=True, help="the answer, JSON (responseData)")
        _operator_command(cmd, bulk=name != "deliver")

    reschedule = sub.add_parser(
        "reschedule", help="move the current deadline of a parked or suspended wait",
        description="Move the deadline of the wait's current stage and escalation level. "
                    "--deadline PT2H: two hours from now; --by PT30M: 30 minutes later; "
                    "--by=-PT30M: 30 minutes earlier (write it with '=': a value starting with "
                    "'-' would read as an option). A suspended wait gets that much time left "
                    "when it resumes. The worker refuses it (a Rejected record) when the wait "
                    "is done or the new deadline has passed.")
    add_key_or_where(reschedule)
    when = reschedule.add_mutually_exclusive_group(required=True)
    when.add_argument("--deadline", help="the new deadline, ISO 8601 duration from now (PT2H)")
    when.add_argument("--by", help="move the deadline by an ISO 8601 duration (PT30M, -PT30M)")
    reschedule.add_argument("--reason", help="why, for the trace")
    _operator_command(reschedule, bulk=True)

    # Alike in shape with reschedule's parser and report's (duplicates lists the pair),
    # deliberately: each command its own description and arguments; what they share is
    # _operator_command.
    migrate = sub.add_parser(
        "migrate", help="move a wait to another version of its definition",
        description="From now on the wait follows VERSION of its definition (default: the "
                    "newest the deciding worker has); what is armed stays armed. A VERSION "
                    "the definitions topic does not hold for the wait's definition (for any "
                    "definition, with --force or when no worker answers) is refused before "
                    "anything is sent: exit 2, the versions it holds listed. The worker "
                    "refuses it (a Rejected record) when the wait's variant, stage or "
                    "escalation level does not fit it. `xwait definitions` lists the "
                    "versions.")
    add_key_or_where(migrate)
    migrate.add_argument("--to", dest="version",
                         help="the version (default: the newest; required with --where)")
    migrate.add_argument("--reason", help="why, for the trace")
    _operator_command(migrate, bulk=True)

    report = sub.add_parser(
        "report", help="report what became of an action (channel adapters)",
        description="Tell a wait whether its channel adapter carried out an action: "
                    "--delivered, or --failed ERROR (with --permanent when sending again "
                    "cannot help). KEY is the action's correlationKey (WAITKEY or "
                    "WAITKEY~PARTY). The definition's on_send_failure decides what a failure "
                    "does: send again after a backoff, then escalate or ask a person.")
    report.add_argument("key")
    report.add_argument("action_id", metavar="ACTION_ID")
    status = report.add_mutually_exclusive_group(required=True)
    status.add_argument("--delivered", action="store_true", help="the channel took it")
    status.add_argument("--failed", metavar="ERROR", help="it failed, and why")
    report.add_argument("--permanent", action="store_true",
                        help="with --failed: sending again cannot help")
    _common(report)

    review = sub.add_parser("review", help="answer a review_needed action")
    review_sub = review.add_subparsers(dest="review_command", required=True)
    for name, text in (("accept", "accept the reply as it is"),
                       ("correct", "end the wait with corrected data")):
        cmd = review_sub.add_parser(name, help=text)
        cmd.add_argument("key")
        cmd.add_argument("--note", required=True, help="the reviewer's note")
        if name == "correct":
            cmd.add_argument("--data", required=True, help="the corrected answer, JSON")
        _operator(cmd)
        _receipt_flags(cmd)
        _force(cmd)
        _common(cmd, console=True)
