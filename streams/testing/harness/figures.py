"""Percentiles, rates and latency summaries: the arithmetic every bench's figures share."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in 0..100); None when there are no values."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def nearest_rank(values: Sequence[int], q: float) -> int | None:
    """The value at rank q (0..1) of the sorted values, no interpolation: a latency a
    reply really had.  None without values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def rnd(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


def rate(count: int, seconds: float | None) -> float | None:
    """count / seconds, 0.1 precise; None when either is not above zero."""
    if seconds is None or seconds <= 0 or count <= 0:
        return None
    return round(count / seconds, 1)


def per_s(count: int, start_ms: int | None, end_ms: int | None) -> float | None:
    """count / seconds between two wall times in ms; None when the span is unknown or empty."""
    if start_ms is None or end_ms is None or end_ms <= start_ms:
        return None
    return rate(count, (end_ms - start_ms) / 1000)


def summary(values: Sequence[float], digits: int = 1, count: str = "count") -> dict[str, Any]:
    """p50, p99 and max (None without values), rounded, and how many under `count`."""
    return {"p50": rnd(percentile(values, 50), digits), "p99": rnd(percentile(values, 99), digits),
            "max": rnd(max(values, default=None), digits), count: len(values)}


def dig(d: Any, *path: str) -> Any:
    """d[path[0]][path[1]]...; None where a level is missing or not a dict."""
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)
    return d


def seconds(ms: int | float | None) -> str:
    """Milliseconds as seconds in a table: one decimal, ``-`` for none."""
    return "-" if ms is None else f"{ms / 1000:.1f}"


__all__ = ["dig", "nearest_rank", "per_s", "percentile", "rate", "rnd", "seconds", "summary"]
