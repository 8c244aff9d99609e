"""ISO 8601 durations as integer milliseconds.

Years and months are refused rather than converted: "P1M" is 28 to 31 days
depending on when it starts, and a deadline that moves with the calendar is a
surprise nobody asked for. Weeks, days and smaller units have a fixed length.
"""

from __future__ import annotations

from datetime import timedelta

import isodate

__all__ = ["MAX_DAYS", "parse_cycle_ms", "parse_duration_ms"]

MAX_DAYS = 36_500
"""A hundred years: longer than any wait, and far from overflowing the 64-bit
millisecond due times of the timers (a duration such as P99999999999D
overflows Python's timedelta)."""


def parse_duration_ms(text: str) -> int:
    """``PT24H`` -> 86_400_000. Raises ValueError with an "Expected …, but …" text."""
    if not isinstance(text, str) or not text.startswith("P"):
        raise ValueError(f"Expected an ISO 8601 duration such as PT24H or P3D, but got {text!r}")
    try:
        parsed = isodate.parse_duration(text)
    except OverflowError as exc:
        raise ValueError(f"Expected a duration of at most {MAX_DAYS} days, but got {text!r}"
                         ) from exc
    except (isodate.ISO8601Error, ValueError) as exc:
        raise ValueError(
            f"Expected an ISO 8601 duration such as PT24H or P3D, but got {text!r}"
        ) from exc
    if not isinstance(parsed, timedelta):
        raise ValueError(
            f"Expected a duration in weeks, days, hours, minutes or seconds, but {text!r} "
            "uses years or months, whose length depends on the calendar"
        )
    if parsed > timedelta(days=MAX_DAYS):
        raise ValueError(f"Expected a duration of at most {MAX_DAYS} days, but got {text!r}")
    ms = int(parsed.total_seconds() * 1000)
    if ms <= 0:
        raise ValueError(f"Expected a positive duration, but got {text!r}")
    return ms


def parse_cycle_ms(text: str) -> tuple[int, int]:
    """``R3/PT1H`` -> (3, 3_600_000): repeat count and interval."""
    head, sep, tail = text.partition("/") if isinstance(text, str) else ("", "", "")
    if not sep or not head.startswith("R") or not head[1:].isdigit() or int(head[1:]) < 1:
        raise ValueError(f"Expected a repeating interval such as R3/PT1H, but got {text!r}")
    return int(head[1:]), parse_duration_ms(tail)
