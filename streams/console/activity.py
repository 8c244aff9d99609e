"""What each definition's waits did over the last hour, for the counts on its diagram.

An observer of the worker (`ConsoleHost.observers`, as the metrics'): for
every decided record it counts the actions sent (requests, reminders,
escalations by level, reviews, polls, close-outs) and the outcomes by exit
and reason, by definition, stage and level, in a rolling window of one
hour kept as sixty one-minute buckets.

The Prometheus counters (`streams.console.metrics`) count since the worker
started and carry no stage or level; the diagram needs "the last hour" per
node.  The stage and level of an action are the wait's after the record,
as the worker decided them (`Handled.place`; reading them from the row
again cost a slot decode per action sent: the observers took 6.4% of the
event loop's thread at 500 waits/s of the bench's mix, 4.6% after).  A
record that fired several escalations at once (a worker catching up)
counts them at the levels that end at the wait's final level.

Each worker counts the records it decided.  The console's counts are the
sum over the workers that answer; a partition that moved keeps its past
hour on the worker that had it, and a worker that died takes its hour with
it.  The window restarts with the worker.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable

from streams.processor.model import Handled, InputRecord

__all__ = ["Activity", "HourWindow", "WINDOW_S"]

WINDOW_S = 3600
BUCKET_S = 60  # a minute: the window's edge is at most a minute off, 60 small Counters a worker

Key = str  # "reminder|0", "escalation|0|2", "outcome|RECEIVED|reply_valid", by definition


class HourWindow:
    """Counts by key over the last `WINDOW_S`, in buckets of `BUCKET_S` (the clock injected)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._buckets: deque[tuple[int, Counter[tuple[str, Key]]]] = deque()

    def add(self, definition: str, key: Key, n: int = 1) -> None:
        minute = int(self.clock() // BUCKET_S)
        if not self._buckets or self._buckets[-1][0] != minute:
            self._buckets.append((minute, Counter()))
            self._expire(minute)
        self._buckets[-1][1][(definition, key)] += n

    def totals(self, definition: str) -> dict[Key, int]:
        """The counts of one definition over the window that ends now."""
        self._expire(int(self.clock() // BUCKET_S))
        out: Counter[Key] = Counter()
        for _, bucket in self._buckets:
            for (d, key), n in bucket.items():
                if d == definition:
                    out[key] += n
        return dict(out)

    def _expire(self, minute: int) -> None:
        oldest = minute - WINDOW_S // BUCKET_S + 1
        while self._buckets and self._buckets[0][0] < oldest:
            self._buckets.popleft()


_ACTION_ROLE = {"SEND_REQUEST": "send_request", "SEND_REMINDER": "reminder",
                "RUN_ESCALATION": "escalation", "REVIEW_NEEDED": "review", "POLL": "poll",
                "CLOSE_OUT": "close_out"}


class Activity:
    """The observer: turns each decided record into window counts by definition."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.window = HourWindow(clock)

    def __call__(self, rec: InputRecord, handled: Handled, now_ms: int) -> None:
        if "replayed" in handled.counters:
            return
        for outcome in handled.outcomes:
            self.window.add(outcome.definition,
                            f"outcome|{outcome.outcome.value}|{outcome.reason.value}")
        actions = [c[len("actions."):] for c in handled.counters if c.startswith("actions.")]
        if not actions:
            return
        definition = handled.head_after.definition or handled.head_before.definition
        if definition is None:
            return
        stage, level = self._place(handled)
        escalations = actions.count("RUN_ESCALATION")
        for action in actions:
            role = _ACTION_ROLE.get(action)
            if role is None:
                continue
            if role == "escalation":
                # The k escalations of this record end at the final level.
                self.window.add(definition, f"escalation|{stage}|{level - escalations + 1}")
                escalations -= 1
            elif role == "poll":
                self.window.add(definition, f"poll|{stage}|{level}")
            elif role == "close_out":
                self.window.add(definition, "close_out")
            else:
                self.window.add(definition, f"{role}|{stage}")

    @staticmethod
    def _place(handled: Handled) -> tuple[int, int]:
        """(stage, level) of the wait after the record, as the worker decided it."""
        return handled.place if handled.place is not None else (0, 0)

    def totals(self, definition: str) -> dict[Key, int]:
        return self.window.totals(definition)
