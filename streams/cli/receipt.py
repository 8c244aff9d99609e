"""What `--wait` prints: a reply's or command's receipt, and the exit code that says it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streams.cli import (
    EXIT_DUPLICATE,
    EXIT_ESCALATED,
    EXIT_FAILED,
    EXIT_HELD,
    EXIT_IN_REVIEW,
    EXIT_LATE,
    EXIT_NO_RESULT,
    EXIT_OK,
    EXIT_RECORDED,
    EXIT_REFUSED,
    EXIT_TENANT_MISMATCH,
    EXIT_UNCHANGED,
    emit,
    fail_with,
)
from streams.client import Receipt, ReceiptTimeout, Verdict
from streams.core.durations import format_utc_ms

EXIT_BY_VERDICT = {
    Verdict.WON: EXIT_OK,
    Verdict.APPLIED: EXIT_OK,
    Verdict.ESCALATED: EXIT_ESCALATED,
    Verdict.HELD: EXIT_HELD,
    Verdict.IN_REVIEW: EXIT_IN_REVIEW,
    Verdict.LATE: EXIT_LATE,
    Verdict.DUPLICATE: EXIT_DUPLICATE,
    Verdict.TENANT_MISMATCH: EXIT_TENANT_MISMATCH,
    Verdict.REJECTED: EXIT_REFUSED,
    Verdict.REFUSED: EXIT_REFUSED,
    Verdict.UNCHANGED: EXIT_UNCHANGED,
    Verdict.RECORDED: EXIT_RECORDED,
}
"""A verdict a newer worker added (``Verdict.UNKNOWN``) exits 1."""


def sent_and_decided(send: Callable[[], Receipt | None], sent: dict[str, Any], as_json: bool,
                     sent_line: str) -> int:
    """Send (with `--wait`, `send` returns the receipt) and print what became of it."""
    try:
        receipt = send()
    except ReceiptTimeout as exc:
        return fail_with(EXIT_NO_RESULT, f"xwait: {exc}")
    if receipt is None:
        emit(sent, as_json, sent_line)
        return EXIT_OK
    emit({**sent, "receipt": receipt.to_record()}, as_json, describe(receipt))
    return EXIT_BY_VERDICT.get(receipt.verdict, EXIT_FAILED)


def describe(receipt: Receipt) -> str:
    """One line, then what explains it (the worker's words)."""
    what = (receipt.command or receipt.record or "record").lower()
    parts = [f"{receipt.verdict.value}  {what}  key={receipt.correlation_key or receipt.key}",
             f"decided={format_utc_ms(receipt.decided_at)}"]
    if receipt.outcome is not None:
        parts.append(f"outcome={receipt.outcome} ({receipt.outcome_reason})")
    if receipt.party is not None:
        parts.append(f"party={receipt.party}")
    if receipt.held_until is not None:
        parts.append(f"held-until={format_utc_ms(receipt.held_until)}")
    if receipt.ended_at is not None and receipt.outcome is None:
        parts.append(f"wait-ended={format_utc_ms(receipt.ended_at)}")
    if receipt.reason is not None:
        parts.append(f"reason={receipt.reason}")
    line = "  ".join(parts)
    if receipt.detail:
        line += f"\n  {receipt.detail}"
    return line
