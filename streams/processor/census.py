"""How many waits each owned partition holds, by state, definition and its version.

Kept up to date as records are applied and rebuilt with the timer index
after a rebalance, from the rows' heads.  The parked-waits gauge used to walk
and decode the whole table on each scrape: some 40 s of the worker's CPU at
a million waits, every scrape.  Reading the census costs a few dictionary
additions per partition.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from streams.processor.model import RowHead

CensusKey = tuple[str, str]  # (state, definition or definition US version)

VERSION_SEPARATOR = "\x1f"
"""Between a definition's name and its version in a census key: the stored
summaries keep their (state, definition) layout, and a wait that records no
version (parked before versions) counts under its name alone."""


def census_key(head: RowHead) -> CensusKey | None:
    if head.state is None:
        return None
    name = head.definition or ""
    return head.state.value, name if head.version is None else (
        f"{name}{VERSION_SEPARATOR}{head.version}")


def split_definition(key: str) -> tuple[str, str | None]:
    """A census key's definition part -> (name, version or None)."""
    name, sep, version = key.partition(VERSION_SEPARATOR)
    return name, (version if sep else None)


def recount(counts: Counter[CensusKey], old: CensusKey | None, new: CensusKey | None) -> None:
    """One wait counted under `old` now counts under `new` (None: not counted); a key
    whose count falls to zero goes, as the stored summary leaves it out."""
    if old is not None:
        counts[old] -= 1
        if counts[old] <= 0:
            del counts[old]
    if new is not None:
        counts[new] += 1


class Census:
    def __init__(self) -> None:
        self._parts: dict[int, Counter[CensusKey]] = {}

    def move(self, partition: int, before: RowHead, after: RowHead) -> None:
        """One row changed from `before` to `after`."""
        if (before.state is after.state and before.definition == after.definition
                and before.version == after.version):
            return  # most changes (a timer fired, a reply held): the same count
        old, new = census_key(before), census_key(after)
        if old == new:
            return
        recount(self._parts.setdefault(partition, Counter()), old, new)

    def replace_partition(self, partition: int, counts: Counter[CensusKey]) -> None:
        """Forget what the partition had and take `counts` (a rebuild)."""
        self._parts[partition] = +counts  # drops zero and negative entries

    def drop_partition(self, partition: int) -> None:
        self._parts.pop(partition, None)

    def counts(self, partition: int) -> Counter[CensusKey]:
        """A copy of one partition's counts."""
        return Counter(self._parts.get(partition, Counter()))

    def partitions(self) -> set[int]:
        return set(self._parts)

    def totals(self, partitions: Iterable[int]) -> Counter[CensusKey]:
        """(state, definition) -> waits, every version of a definition together."""
        out: Counter[CensusKey] = Counter()
        for (state, definition), n in self.by_version(partitions).items():
            out[(state, definition[0])] += n
        return out

    def by_version(self, partitions: Iterable[int]
                   ) -> Counter[tuple[str, tuple[str, str | None]]]:
        """(state, (definition, version)) -> waits; version None: parked before versions."""
        out: Counter[tuple[str, tuple[str, str | None]]] = Counter()
        for p in partitions:
            for (state, definition), n in self._parts.get(p, Counter()).items():
                out[(state, split_definition(definition))] += n
        return out
