"""How the waits of a definition ended over the last hour, for the counts on its diagram.

Read from the stored rows, not counted as records go by: a finished wait
keeps its outcome, reason and end time in its row until retention purges it
(rule 10), so the counts survive a worker's restart and a partition's move,
and they are counted with the very predicate the console's list uses
(`streams.console.waits.Filters`, `endedFrom`/`endedTo`): a click on a count
lists exactly the waits it counted.  (Counts of actions sent, kept in a
worker's memory until 2026-12, restarted with the worker and matched no
list; the rows do not say when each action went out, so the diagram no
longer counts them.  Rates of actions are in `/metrics`.)

The window is [since, until], epoch ms, both included, ending at the moment
the counts were asked for (to the millisecond: a wait that ended a moment
before is counted; the list's "Ended from / to" boxes show milliseconds).
A worker that gathers the counts of the others gives them its window.

Finding the hour's finished waits without reading the whole table: a
finished wait's purge timer is due at its end plus its definition version's
retention (rule 10; armed once, when it ends), and the timer index is ordered
by due time.  So the waits that ended in [since, until] have their purge due
in [since + r_min, until + r_max], over the retentions of the versions the
definition's finished waits follow (the census names them); the walk reads
the rows of the timers in that range (this hour's finished waits, and the
few live timers due as far out) and decodes the finished ones.  When a
version is not loaded (its retention unknown), or a partition's index is
not ready (a rebalance), every owned row's head is read instead.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from streams.console.host import ConsoleHost
from streams.console.waits import SCAN_YIELD_EVERY, Filters, read_slot
from streams.core import WaitStatus, definition_for
from streams.processor.envelope import RowDecodeError, read_head

__all__ = ["COUNT_BUDGET", "WINDOW_MS", "Ended", "Window", "ended_counts", "ended_key"]

WINDOW_MS = 3_600_000
# Most finished waits a worker decodes for one diagram's counts (~40 us each: 20,000
# take about 0.8 s of the event loop, in slices).  Beyond it the counts are a lower
# bound, said so on the page; the list still finds every wait.  Only a worker that
# ends more than 20,000 waits of one definition an hour (5.5 a second) gets there.
COUNT_BUDGET = 20_000


@dataclass(frozen=True)
class Window:
    """The hour the counts cover: epoch ms, both ends included."""

    since: int
    until: int

    @classmethod
    def ending(cls, now_ms: int) -> Window:
        return cls(now_ms - WINDOW_MS, now_ms)

    def filters(self, definition: str, outcome: str | None = None,
                reason: str | None = None) -> Filters:
        """The list's filters for the waits of `definition` that ended in this window."""
        return Filters(state=WaitStatus.DONE.value, definition=definition, outcome=outcome,
                       reason=reason, ended_from=self.since, ended_to=self.until)

    def query(self, outcome: str | None = None, reason: str | None = None) -> dict[str, str]:
        """The same filters as the list API's query (the definition is added by the page)."""
        q = {"state": WaitStatus.DONE.value, "endedFrom": str(self.since),
             "endedTo": str(self.until)}
        if outcome is not None:
            q["outcome"] = outcome
        if reason is not None:
            q["reason"] = reason
        return q


def ended_key(outcome: str, reason: str) -> str:
    """How a count travels between workers: "ESCALATED|deadline_exhausted"."""
    return f"{outcome}|{reason}"


@dataclass(frozen=True)
class Ended:
    """The counts of one worker: `ended_key` -> waits; `complete` False when the
    budget ran out first (the counts are then a lower bound)."""

    counts: dict[str, int]
    complete: bool = True


async def ended_counts(host: ConsoleHost, definition: str, window: Window,
                       budget: int = COUNT_BUDGET) -> Ended:
    """The waits of `definition` in this worker's partitions that ended in `window`, by
    `ended_key`, each as `window.filters(definition, outcome, reason)` would list it;
    at most `budget` finished waits decoded."""
    filters = window.filters(definition)
    counts: Counter[str] = Counter()
    seen = decoded = 0
    for key, value in _candidates(host, definition, window):
        seen += 1
        if seen % SCAN_YIELD_EVERY == 0:
            await asyncio.sleep(0)
        try:
            head = read_head(value)
            if not filters.match(key, head):
                continue
            if decoded >= budget:
                return Ended(dict(counts), complete=False)
            decoded += 1
            slot = read_slot(value)
        except (RowDecodeError, ValueError):  # a row this version cannot read
            continue
        wait = None if slot is None else slot.wait
        if wait is None or wait.outcome is None or wait.reason is None \
                or not filters.match_wait(wait):
            continue
        counts[ended_key(wait.outcome.value, wait.reason.value)] += 1
    return Ended(dict(counts))


def _candidates(host: ConsoleHost, definition: str, window: Window
                ) -> Iterator[tuple[bytes, bytes]]:
    """(key, row) of every owned row that may hold a wait of `definition` ended in
    `window`: from the timer index when it can tell, else every row."""
    owned = host.owned_partitions()
    retentions = _retentions(host, definition, owned)
    if retentions == []:
        return  # no finished wait of this definition here
    armed = None if retentions is None else \
        host.index.armed_in_order(owned, window.since + min(retentions))
    if retentions is None or armed is None:
        for _, raw, value in host.owned_rows():
            yield raw, value
        return
    last = window.until + max(retentions)
    taken: set[tuple[int, str]] = set()
    for due, key, partition in armed:
        if due > last:
            return
        if (partition, key) in taken:  # another timer of the same wait in the range
            continue
        taken.add((partition, key))
        found = host.read_row(key.encode(), partition)
        if found is not None:
            yield key.encode(), found


def _retentions(host: ConsoleHost, definition: str, owned: set[int]) -> list[int] | None:
    """The retentions of the versions of `definition` that finished waits in `owned`
    follow; None when one of them is not loaded here (or predates versions: the
    retention it ended with is not known for sure)."""
    found = []
    for (state, (name, version)), n in host.census.by_version(owned).items():
        if state != WaitStatus.DONE.value or name != definition or n <= 0:
            continue
        d = None if version is None else definition_for(host.definitions, name, version)
        if d is None:
            return None
        found.append(d.retention_ms)
    return found
