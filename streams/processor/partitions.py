"""What the worker knows of each partition it decides: positions, summaries, census.

One place holds every per-partition fact that is not in another room's own
structure, so that a partition given up is forgotten by one call (`forget`):
the list of twelve structures reset by hand was the likeliest to miss the
next one added.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from streams.processor.census import Census
from streams.processor.context import PartitionStart
from streams.processor.positions import Positions
from streams.timers.stored import Summary


@dataclass
class PartitionBook:
    """Per active partition: input positions decided and durable, its summary; the census."""

    decided: dict[int, Positions] = field(default_factory=dict)
    """Positions after the last batch decided (durable once its commit is done)."""
    durable: dict[int, Positions] = field(default_factory=dict)
    """Positions stored in RocksDB and the changelog."""
    summaries: dict[int, Summary] = field(default_factory=dict)
    """Armed timers, the lowest due time and the waits by state, as decided."""
    census: Census = field(default_factory=Census)

    def take(self, starts: Sequence[PartitionStart]) -> None:
        """Partitions taken over, with their restored positions and summaries."""
        for start in starts:
            p = start.partition
            self.decided[p] = self.durable[p] = start.positions
            self.summaries[p] = start.summary
            self.census.replace_partition(p, Counter(start.summary.waits))

    def forget(self, partitions: set[int]) -> None:
        for p in partitions:
            self.decided.pop(p, None)
            self.durable.pop(p, None)
            self.summaries.pop(p, None)
            self.census.drop_partition(p)

    def armed(self, partitions: set[int]) -> int:
        return sum(s.armed for p, s in self.summaries.items() if p in partitions)


__all__ = ["PartitionBook"]
