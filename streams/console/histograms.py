"""Prometheus histograms observed on the event loop's thread, a bucket index and an add each.

prometheus_client's `Histogram` takes a lock and walks its buckets on every
`observe`, and a worker observes a histogram or two per decision: a few per
cent of the event loop's time in a profile at 1,000 waits/s, six times what
this one costs (docs/speed.md, "Live traffic's CPU, 2026-12-07").  Every
observation a worker makes is on the event loop's thread, and the endpoint
renders on it too, so no lock is needed.  The exposition is
prometheus_client's own (`HistogramMetricFamily`): the same series, `le`
labels and `_count` / `_sum` as its `Histogram` writes.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from itertools import accumulate

from prometheus_client import CollectorRegistry
from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString


class Child:
    """One label set's buckets: `observe` counts a value in the first bucket that holds it."""

    __slots__ = ("_bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self._bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last: +Inf
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self._bounds, value)] += 1  # le: value <= bound
        self.sum += value


class LoopHistogram(Collector):
    """A labelled histogram for one thread's observations (see the module docstring)."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str], *,
                 buckets: Sequence[float], registry: CollectorRegistry) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = list(labelnames)
        self._bounds = tuple(float(b) for b in buckets)
        self._les = [floatToGoString(b)  # type: ignore[no-untyped-call]
                     for b in (*self._bounds, math.inf)]
        self._children: dict[tuple[str, ...], Child] = {}
        registry.register(self)

    def labels(self, *values: str) -> Child:
        """The child of these label values, exported (at 0) from when it is first asked."""
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = Child(self._bounds)
        return child

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for values, child in self._children.items():
            buckets = list(zip(self._les, accumulate(child.counts), strict=True))
            family.add_metric(list(values), buckets, child.sum)
        yield family


__all__ = ["Child", "LoopHistogram"]
