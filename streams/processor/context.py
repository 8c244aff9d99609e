"""What every room of a worker shares, handed to each as one object.

The rooms (intake, stream clock, applier, ownership, ...) each hold their
own state; what they share is here: the settings and the tuning, the topic
names, the counters and latencies the stats and metrics read, the hooks
called after each record is durable, the event that wakes the applier, the
lock that keeps batches and ownership changes apart, the clock, and the two
escalations a room cannot handle itself, both set by the worker
(`streams.processor.worker.Worker`):

* `fail(exc, what)`: the worker stops (a batch cannot be made durable, a
  loop broke); every room's loop ends once `failed`;
* `lose(partitions)`: another worker owns these partitions now (a commit of
  theirs was fenced, `streams.processor.commit` F5); ownership gives them up.

The intake, the stream clock, the applier and ownership derive from `Room`,
which keeps the context and the parts of it they read most (the tuning, the
counters, the topic names by role and the roles by topic name).

Rooms that hold per-partition state implement `Partitioned`: ownership hands
each a partition it takes over and tells each which partitions it gives up.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from streams.config import Settings
from streams.processor.latency import Latencies
from streams.processor.model import Handled, InputRecord, Role
from streams.processor.positions import Positions
from streams.processor.tracing import BatchTracer
from streams.processor.tuning import TUNING, Tuning
from streams.timers.firing import FiredTimer
from streams.timers.stored import Summary

Fail = Callable[[BaseException, str], Awaitable[None]]
Lose = Callable[[frozenset[int]], None]
# Called once a decision is durable: what it was about (an input or a fired timer),
# what it did, and at which time.
Observer = Callable[[InputRecord | FiredTimer, Handled, int], None]


def wall_ms() -> int:
    """Milliseconds since the epoch: what the worker stamps and probes with."""
    return int(time.time() * 1000)


class Failure:
    """The worker's failure, once set: every room's loop ends when it is."""

    def __init__(self) -> None:
        self.exc: BaseException | None = None


async def _not_set_fail(exc: BaseException, what: str) -> None:  # pragma: no cover
    raise RuntimeError(f"no failure policy set for: {what}") from exc


def _not_set_lose(partitions: frozenset[int]) -> None:  # pragma: no cover
    raise RuntimeError(f"no policy set for partitions lost: {sorted(partitions)}")


@dataclass(frozen=True)
class WorkerContext:
    """What the rooms share (see the module docstring)."""

    settings: Settings
    changelog: str
    tuning: Tuning = TUNING
    counters: Counter[str] = field(default_factory=Counter)
    latency: Latencies = field(default_factory=Latencies)
    observers: list[Observer] = field(default_factory=list)  # after each record is durable
    wake: asyncio.Event = field(default_factory=asyncio.Event)  # the applier's
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # batches vs ownership changes
    failure: Failure = field(default_factory=Failure)
    fail: Fail = _not_set_fail
    lose: Lose = _not_set_lose
    clock: Callable[[], int] = wall_ms
    tracer: BatchTracer | None = None  # batch spans, when OTLP is configured (`tracing`)

    @property
    def topics(self) -> Mapping[Role, str]:
        """Every topic of the contract by role."""
        return {role: self.settings.topic(role.value) for role in Role}

    @property
    def failed(self) -> bool:
        return self.failure.exc is not None


@dataclass(frozen=True)
class PartitionStart:
    """A partition taken over: where each input is read from, its stream time, and the
    summary of its restored database (census, armed timers, lowest due time)."""

    partition: int
    next_offset: dict[Role, int]
    stream_time: int
    summary: Summary

    @property
    def positions(self) -> Positions:
        return Positions(dict(self.next_offset), self.stream_time)

    @property
    def low(self) -> int:
        """The lowest due time of its timer index that may still be pending."""
        return self.summary.low


class Room:
    """A room of the worker: the shared context, and the parts of it that its loops read
    often, kept as its own attributes."""

    def __init__(self, ctx: WorkerContext) -> None:
        self.ctx = ctx
        self.tuning = ctx.tuning
        self.counters = ctx.counters
        self.topics = dict(ctx.topics)  # role -> topic name
        self.roles = {name: role for role, name in self.topics.items()}  # topic name -> role


class Partitioned(Protocol):
    """A room that holds per-partition state (ownership iterates them)."""

    def take(self, starts: Sequence[PartitionStart]) -> None:
        """These partitions are decided here from now on."""

    def forget(self, partitions: set[int]) -> None:
        """Everything held of these partitions goes (they were given up or lost)."""


__all__ = ["Fail", "Failure", "Lose", "Observer", "PartitionStart", "Partitioned", "Room",
           "WorkerContext", "wall_ms"]
