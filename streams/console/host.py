"""What the console needs of the worker it is served by: a small, read-only interface.

The worker (`streams.processor.worker.Worker`) installs the console; the console
must not import the worker's module back (that was an import circle: the app
imported the console, which imported the app for its type).  So the console
names here what it reads, and any object with these members can host it; mypy
checks that the worker is one where it calls `streams.console.install`.

Everything here is read, never written, except `observers` (the console
appends its metric observers once, at install time).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol

from streams.config import Settings
from streams.core import WaitDefinition
from streams.processor.context import Observer

Row = tuple[int, bytes, bytes]  # (partition, wait key, stored row)


class CensusView(Protocol):
    def totals(self, partitions: Iterable[int]) -> Mapping[tuple[str, str], int]:
        """(state, definition) -> waits in those partitions."""
        ...

    def by_version(self, partitions: Iterable[int]
                   ) -> Mapping[tuple[str, tuple[str, str | None]], int]:
        """(state, (definition, version)) -> waits; version None: parked before versions."""
        ...


class TimerIndexView(Protocol):
    def count_due(self, now_ms: int, partitions: Iterable[int]) -> int: ...

    def armed_in_order(self, partitions: Iterable[int], start: int = 0
                       ) -> Iterator[tuple[int, str, int]] | None:
        """(due time, wait key, partition) of the armed timers, by due time then key;
        None while the index of one of the partitions is not ready."""
        ...


class ConsoleHost(Protocol):
    """A worker, as the console sees it."""

    @property
    def settings(self) -> Settings: ...

    @property
    def definitions(self) -> Mapping[str, WaitDefinition]: ...

    @property
    def counters(self) -> Mapping[str, int]:
        """Counter names such as actions.SEND_REQUEST, outcomes.<reason>, rejected.<reason>,
        failures, processed.<role>, timers.fired."""
        ...

    @property
    def census(self) -> CensusView: ...

    @property
    def index(self) -> TimerIndexView: ...

    @property
    def observers(self) -> list[Observer]:
        """Called with each decided record after its batch was made durable."""
        ...

    @property
    def ready(self) -> asyncio.Event:
        """Set while the worker has taken over its partitions (cleared during a rebalance)."""
        ...

    @property
    def app(self) -> Any:
        """The faust app: its web server and HTTP client."""
        ...

    def owners(self) -> dict[str, set[int]]:
        """Web URL of every worker of the group -> the partitions it owns."""
        ...

    def owned_partitions(self) -> set[int]: ...

    def read_row(self, key: bytes, partition: int) -> bytes | None:
        """The stored row of a wait key in an owned partition."""
        ...

    def owned_rows(self) -> Iterator[Row]:
        """Every stored row of the owned partitions, partition by partition."""
        ...

    def armed_timers(self) -> int:
        """Timers armed in the owned partitions."""
        ...

    def input_lag(self) -> dict[tuple[str, int], int]:
        """(input topic, partition) -> records not yet applied, as of the last probe."""
        ...

    def stats(self) -> dict[str, Any]: ...


__all__ = ["CensusView", "ConsoleHost", "Observer", "Row", "TimerIndexView"]
