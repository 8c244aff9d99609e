"""The flags of a bulk operation (`xwait cancel --where FILTER ...`), for the parser.

Kept apart from streams/cli/bulk.py, which runs the operation: the parser is
built on every command (`--help`, `status`), and this module imports only
argparse and the defaults (streams.client.pacing imports nothing).
"""

from __future__ import annotations

import argparse

from streams.client.pacing import DEFAULT_RATE

__all__ = ["add_bulk_flags", "add_key_or_where", "rate"]


def add_key_or_where(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("key", nargs="?",
                        help="the wait's key (or select waits with --where instead)")


def rate(text: str) -> float:
    try:
        value = float(text.removesuffix("/s"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected waits a second (50, 2.5/s), got {text!r}"
                                         ) from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a rate above zero, got {text!r}")
    return value


def add_bulk_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of a bulk operation: the same command for every wait a filter selects."""
    bulk = parser.add_argument_group(
        "Bulk operation: every wait --where selects (instead of KEY)")
    bulk.add_argument("--where", metavar="FILTER",
                      help="field=value conditions, comma separated: definition, version, "
                           "state (parked, in_review, suspended, done, all; default: every "
                           "state but done), tenant, key (a prefix), parkedAfter, "
                           "parkedBefore, dueAfter, dueBefore (an ISO 8601 instant, epoch ms, "
                           "or a signed duration from now: -P30D); e.g. "
                           "definition=expense-approval,state=parked,parkedBefore=-P30D")
    bulk.add_argument("--dry-run", action="store_true",
                      help="print how many waits the filter selects and the first ten; "
                           "send nothing")
    bulk.add_argument("--rate", type=rate, default=DEFAULT_RATE, metavar="N",
                      help=f"at most N waits a second (default {DEFAULT_RATE:g})")
    bulk.add_argument("--operation", metavar="ID",
                      help="the operation's id, to run an interrupted operation again: waits "
                           "whose trace names it are skipped (default: a new id, printed "
                           "first)")
    bulk.add_argument("--yes", action="store_true",
                      help="do not ask before commanding the waits (asked only when stdin is "
                           "a terminal)")

