"""What a started wait is to the SDK: its key (fresh: `new_correlation_key`), its
spec in a batch (`WaitSpec`), the key it returns (`WaitKey`, carrying the trace
context its request was sent with), and how that trace context is chosen."""

from __future__ import annotations

import secrets
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from streams.client.errors import InvalidRequest
from streams.headers import new_traceparent, valid_traceparent

__all__ = ["WaitKey", "WaitSpec", "new_correlation_key", "request_traceparent"]

KEY_BYTES = 16
"""128 random bits: the contract's minimum for a key that must be hard to guess."""


def new_correlation_key() -> str:
    """A fresh wait key: 128 random bits as 32 hex digits.

    Hex, not URL-safe base64: a base64 key starts with ``-`` one time in 64,
    and the CLI (like most command lines) would read it as an option.
    """
    return secrets.token_hex(KEY_BYTES)


@dataclass(frozen=True, slots=True)
class WaitSpec:
    """One wait of a batch for :meth:`XwaitClient.start_many`; same meaning as start_wait's.

    ``payload`` is JSON text or any JSON-serialisable value; ``deadline`` an ISO 8601
    duration that overrides the definition's for this wait only; ``traceparent`` the W3C
    trace context to send the request with (None: the caller's current OpenTelemetry
    span, else a fresh trace).
    """

    definition: str
    correlation_key: str | None = None
    tenant: str | None = None
    payload: Any = None
    parties: Sequence[str] = ()
    deadline: str | None = None
    traceparent: str | None = None


class WaitKey(str):
    """A started wait's key - a ``str``, compared, hashed and printed as the key - that
    also carries the W3C ``traceparent`` its request was sent with.

    The worker keeps that trace context with the wait and writes it, as the
    ``traceparent`` Kafka header, on every action and on the outcome of the wait,
    whenever they are decided (docs: Monitoring, traces).
    """

    traceparent: str | None

    def __new__(cls, key: str, traceparent: str | None = None) -> WaitKey:
        made = super().__new__(cls, key)
        made.traceparent = traceparent
        return made


def request_traceparent(given: str | None, where: str) -> str:
    """The trace context to send a request with: `given` (checked), else the caller's
    current OpenTelemetry span (only if the caller uses OpenTelemetry: nothing is
    imported for it otherwise), else a fresh one."""
    if given is not None:
        if not isinstance(given, str) or not valid_traceparent(given):
            raise InvalidRequest(f"{where}traceparent {given!r} is not a W3C traceparent "
                                 "(00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>)")
        return given
    if "opentelemetry.trace" in sys.modules:
        from opentelemetry import trace

        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            return (f"00-{context.trace_id:032x}-{context.span_id:016x}-"
                    f"{int(context.trace_flags):02x}")
    return new_traceparent()
