"""How long a command may wait for Kafka before it says "unreachable" (exit 3).

Kept apart from ``streams.client._kafka`` so that the CLI sets the budget
when it starts without importing confluent-kafka (``--help`` and ``status``
never need it).
"""

from __future__ import annotations

import time

__all__ = ["CONNECT_TIMEOUT_S", "MIN_CONNECT_TIMEOUT_S", "answer_by", "connect_timeout", "limit",
           "set_limit"]

CONNECT_TIMEOUT_S = 5.0
"""How long the first metadata request may take before the broker counts as unreachable,
unless XWAIT_CONNECT_TIMEOUT says otherwise (`set_limit`).
A healthy broker answers in milliseconds; much shorter fails on a slow remote cluster,
much longer leaves a CLI user staring at a silent terminal."""

MIN_CONNECT_TIMEOUT_S = 1.5
"""The least a metadata request is given, whatever is left of a command's budget: on a
machine so busy that start-up took most of it, a broker that answers must not be called
unreachable."""

_answer_by: float | None = None  # time.monotonic() by which a command must have said so
_limit_s: float | None = None  # the command's XWAIT_CONNECT_TIMEOUT, once it is known


def set_limit(seconds: float | None) -> None:
    """The broker's time to answer a command (`Settings.connect_timeout`); None: the default."""
    global _limit_s  # noqa: PLW0603 - one process-wide budget, set once by the CLI
    _limit_s = seconds


def limit(own: float | None = None) -> float:
    """Seconds a request the command cannot go on without may take: the CLI's
    (`set_limit`), else `own` (the caller's `Settings.connect_timeout`: the SDK's clients
    follow the settings they were made with), else CONNECT_TIMEOUT_S."""
    if _limit_s is not None:
        return _limit_s
    return CONNECT_TIMEOUT_S if own is None else own


def answer_by(deadline: float | None) -> None:
    """Make the first metadata request end by ``deadline`` (``time.monotonic()``).

    The CLI promises "Kafka unreachable" within CONNECT_TIMEOUT_S of being run,
    start-up included (exit 3): it sets the deadline when it starts, and the
    metadata request gets what is left (at least MIN_CONNECT_TIMEOUT_S).
    """
    global _answer_by  # noqa: PLW0603 - one process-wide budget, set once by the CLI
    _answer_by = deadline


def connect_timeout(own: float | None = None) -> float:
    """Seconds the first metadata request may take (see :func:`answer_by`; `own`: as
    for :func:`limit`)."""
    most = limit(own)
    if _answer_by is None:
        return most
    left = _answer_by - time.monotonic()
    return max(min(MIN_CONNECT_TIMEOUT_S, most), min(most, left))
