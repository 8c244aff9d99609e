"""A bulk operation's mark in a wait's trace: one format, written and read here.

A bulk operation (`xwait cancel --where ...`, the console's bulk action)
sends each wait it selects an ordinary Command carrying the operation's id
(`Command.operationId`).  A command the wait takes adds a trace entry that
ends with who gave it and why; with an operation id that ending is
``REASON (by OPERATOR, operation ID)``.  That entry is the operation's
record of what it did, kept where the wait is:

* the core refuses (``duplicate``) a command whose operation the wait's kept
  trace already names, so a command still in flight when the CLI died and
  the one its re-run sends cannot both apply (streams/core/rules/commands.py);
* a re-run reads the trace through the console API and skips such waits
  (streams/client/bulk.py).

An id is 1 to 64 letters, digits and ``. _ : -``: it ends a trace entry
after a comma and before the closing parenthesis, so it cannot hold either,
and a mark cannot be confused with the operator's own words.

Imports nothing, so the CLI can use it without loading the decision core.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["MAX_OPERATION_ID", "by", "carries", "operation_id_problem"]

MAX_OPERATION_ID = 64
"""The longest operation id: long enough for a name, a date and random bits; short,
because it is copied into the trace entry of every wait the operation touches."""

_ID = re.compile(r"[A-Za-z0-9._:-]+")


def operation_id_problem(operation_id: str) -> str | None:
    """Why ``operation_id`` is not one, as an "Expected ..., but ..." text; None when it is."""
    if not isinstance(operation_id, str) or not operation_id:
        return f"Expected an operation id, but got {operation_id!r}"
    if len(operation_id) > MAX_OPERATION_ID:
        return (f"Expected an operation id of at most {MAX_OPERATION_ID} characters, but it "
                f"has {len(operation_id)}")
    if not _ID.fullmatch(operation_id):
        return (f"Expected an operation id of letters, digits and . _ : - only, but got "
                f"{operation_id!r}")
    return None


def by(reason: str | None, operator: str | None, operation_id: str | None = None) -> str:
    """How a trace entry ends: ``REASON (by OPERATOR)``, or with the operation named,
    ``REASON (by OPERATOR, operation ID)``."""
    who = operator or "unknown operator"
    if operation_id:
        who += f", operation {operation_id}"
    return f"{reason or 'no reason given'} (by {who})"


def carries(details: Iterable[str], operation_id: str) -> bool:
    """Whether one of the trace entries' ``details`` is the mark of ``operation_id``."""
    ending = f", operation {operation_id})"
    return any(detail.endswith(ending) for detail in details)
