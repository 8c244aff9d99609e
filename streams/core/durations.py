"""ISO 8601 durations as integer milliseconds.

Years and months are refused rather than converted: "P1M" is 28 to 31 days
depending on when it starts, and a deadline that moves with the calendar is a
surprise nobody asked for. Weeks, days and smaller units have a fixed length.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import isodate

__all__ = ["MAX_DAYS", "format_span_ms", "format_utc_ms", "parse_cycle_ms", "parse_duration_ms",
           "parse_signed_duration_ms"]

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


def parse_signed_duration_ms(text: str) -> int:
    """``PT30M`` -> 1_800_000, ``-PT30M`` -> -1_800_000: a shift, later or earlier.

    ISO 8601 has no negative durations; a leading minus is the common
    extension (XML Schema, isodate), and what an operator moving a deadline
    earlier would type.
    """
    if isinstance(text, str) and text.startswith("-"):
        return -parse_duration_ms(text[1:])
    return parse_duration_ms(text)


_SPAN_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000))


def format_span_ms(ms: int) -> str:
    """A duration as people read it, its two largest units: ``3 d 4 h``, ``12 min 5 s``.

    Trace details are read by operators (console, ``xwait status``), never
    parsed: raw milliseconds there were a sum to do in one's head.
    Under a minute it keeps tenths of a second (``6.2 s``); negative spans get a minus.
    """
    sign, ms = ("-", -ms) if ms < 0 else ("", ms)
    if ms < 60_000:
        return f"{sign}{ms / 1000:.1f} s".replace(".0 s", " s")
    parts: list[str] = []
    for name, size in _SPAN_UNITS:
        if ms >= size:
            parts.append(f"{ms // size} {name}")
            ms %= size
        elif parts:
            break
        if len(parts) == 2:
            break
    return sign + " ".join(parts)


def format_utc_ms(ms: int) -> str:
    """Epoch milliseconds as a UTC date and time to the second: ``2026-11-30 16:00:05Z``."""
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return f"{ms} ms after 1970"


def parse_cycle_ms(text: str) -> tuple[int, int]:
    """``R3/PT1H`` -> (3, 3_600_000): repeat count and interval."""
    head, sep, tail = text.partition("/") if isinstance(text, str) else ("", "", "")
    if not sep or not head.startswith("R") or not head[1:].isdigit() or int(head[1:]) < 1:
        raise ValueError(f"Expected a repeating interval such as R3/PT1H, but got {text!r}")
    return int(head[1:]), parse_duration_ms(tail)
