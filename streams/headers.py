"""The Kafka record headers xwait reads and writes, by name, and the W3C trace context.

Headers are optional everywhere: a record without them is decided exactly as
before, and a worker reads only the two below (a record's other headers are
left alone, never copied).

    traceparent     W3C Trace Context (https://www.w3.org/TR/trace-context/):
                    ``00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>``.
                    On a StartWait it is kept with the wait (the stored slot's
                    ``tp``) and written on every Action and the Outcome of that
                    wait, whenever and by whichever worker they are decided; on a
                    reply or command it is written on that record's Rejected
                    record and Receipt.
    xwait-receipt   On a Reply or a Command (any input record): the sender wants a
                    Receipt, keyed by this id, on ``<prefix>.receipts``
                    (``streams.core.receipts`` says what it holds).

Nothing here imports a Kafka client: the SDK, the CLI and the worker share it.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping, Sequence

__all__ = [
    "DOCUMENTED",
    "MAX_RECEIPT_ID",
    "RECEIPT",
    "TRACEPARENT",
    "Headers",
    "new_traceparent",
    "read_input_headers",
    "receipt_id_problem",
    "trace_id_of",
    "valid_traceparent",
]

TRACEPARENT = "traceparent"
RECEIPT = "xwait-receipt"

DOCUMENTED = {
    TRACEPARENT: "W3C Trace Context (`00-<trace id>-<parent id>-<flags>`). On a StartWait "
                 "(the SDK and `xwait start` send one): kept with the wait, and written on "
                 "every Action and the Outcome of that wait, whichever worker decides them "
                 "and however late (timers included); the workers' batch spans link it. On "
                 "a Reply or Command: written on its Rejected record and its Receipt. An "
                 "invalid value is ignored.",
    RECEIPT: "On a Reply or Command (any input record): the sender asks for a Receipt "
             "keyed by this id (at most 128 bytes) on `<prefix>.receipts`; the SDK's "
             "`wait=True` and the CLI's `--wait` send it. Forwarded with the record when a "
             "worker moves it to its partition.",
}
"""Each header, as the contract reference (docs/reference/contract.md) says it."""

MAX_RECEIPT_ID = 128
"""Bytes of a receipt id the worker takes; a longer one gets no receipt (it is the
receipts topic's key: a uuid is 32-36)."""

Headers = tuple[tuple[str, bytes], ...]
"""Kafka headers as confluent-kafka takes them: (name, value) pairs, in order."""

# Version 00 as the spec defines it; a later version's first four fields have the
# same form (the spec asks parsers of later versions to read them so): taken too.
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}(-.*)?$")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16


def valid_traceparent(value: str) -> bool:
    """Whether ``value`` is a traceparent the worker carries on (W3C: version ff, an
    all-zero trace or parent id, or a version 00 with more fields are invalid)."""
    found = _TRACEPARENT.match(value)
    if found is None or value.startswith("ff-"):
        return False
    if value.startswith("00-") and found.group(3) is not None:
        return False
    return found.group(1) != _ZERO_TRACE and found.group(2) != _ZERO_SPAN


def trace_id_of(traceparent: str) -> str:
    """The 32 hex digits of a (valid) traceparent's trace id."""
    return traceparent[3:35]


def new_traceparent() -> str:
    """A fresh sampled traceparent: a random trace id, a random parent id."""
    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"


def receipt_id_problem(receipt_id: str) -> str | None:
    """Why a receipt id cannot key a receipt, or None."""
    if not receipt_id:
        return "it is empty"
    if len(receipt_id.encode("utf-8", "surrogatepass")) > MAX_RECEIPT_ID:
        return f"it is longer than {MAX_RECEIPT_ID} bytes"
    return None


def read_input_headers(
        headers: Sequence[tuple[str, str | bytes | None]] | Mapping[str, str | bytes | None]
        | None) -> tuple[str | None, str | None]:
    """(traceparent, receipt id) of an input record's headers, each None when absent
    or unusable (not UTF-8, an invalid traceparent, an oversized receipt id).

    The last of a repeated header counts.  Called for every input record: a record
    without headers (``msg.headers()`` is None) costs one comparison.
    """
    if not headers:
        return None, None
    traceparent = receipt = None
    for name, value in headers.items() if isinstance(headers, Mapping) else headers:
        if name == TRACEPARENT and value is not None:
            text = _text(value)
            traceparent = text if text is not None and valid_traceparent(text) else None
        elif name == RECEIPT and value is not None:
            text = _text(value)
            receipt = text if text is not None and receipt_id_problem(text) is None else None
    return traceparent, receipt


def _text(value: str | bytes) -> str | None:
    if isinstance(value, str):
        return value.strip()
    try:
        return value.decode("utf-8").strip()
    except UnicodeDecodeError:
        return None
