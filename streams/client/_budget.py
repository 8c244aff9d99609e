"""How long a command may wait for Kafka before it says "unreachable" (exit 3).

Kept apart from ``streams.client._kafka`` so that the CLI sets the budget
when it starts without importing confluent-kafka (``--help`` and ``status``
never need it).
"""

from __future__ import annotations

import time

__all__ = ["CONNECT_TIMEOUT_S", "MIN_CONNECT_TIMEOUT_S", "answer_by", "connect_timeout"]

CONNECT_TIMEOUT_S = 5.0
"""How long the first metadata request may take before the broker counts as unreachable,
unless XWAIT_CONNECT_TIMEOUT (`Settings.connect_timeout`) says otherwise.
A healthy broker answers in milliseconds; much shorter fails on a slow remote cluster,
much longer leaves a CLI user staring at a silent terminal."""

MIN_CONNECT_TIMEOUT_S = 1.5
"""The least a metadata request is given, whatever is left of a command's budget: on a
machine so busy that start-up took most of it, a broker that answers must not be called
unreachable."""

_answer_by: float | None = None  # time.monotonic() by which a command must have said so


def answer_by(deadline: float | None) -> None:
    """Make the first metadata request end by ``deadline`` (``time.monotonic()``).

    The CLI promises "Kafka unreachable" within its connect timeout of being run,
    start-up included (exit 3): it sets the deadline when it starts, and the
    metadata request gets what is left (at least MIN_CONNECT_TIMEOUT_S).
    """
    global _answer_by  # noqa: PLW0603 - one process-wide budget, set once by the CLI
    _answer_by = deadline


def connect_timeout(most: float = CONNECT_TIMEOUT_S) -> float:
    """Seconds the first metadata request may take: `most` (the caller's
    `Settings.connect_timeout`), or what is left of a command's budget (:func:`answer_by`)."""
    if _answer_by is None:
        return most
    left = _answer_by - time.monotonic()
    return max(min(MIN_CONNECT_TIMEOUT_S, most), min(most, left))
