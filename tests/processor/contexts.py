"""A worker's shared context for tests of one room, with what the test wants to see.

`failures` and `lost` record what the room escalated (`WorkerContext.fail`,
`WorkerContext.lose`) instead of stopping a process.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from streams.config import Settings
from streams.processor.context import WorkerContext
from streams.processor.tuning import TUNING, Tuning


@dataclass
class Escalations:
    failures: list[str] = field(default_factory=list)
    lost: list[frozenset[int]] = field(default_factory=list)

    async def fail(self, exc: BaseException, what: str) -> None:
        self.failures.append(f"{what}: {exc}")

    def lose(self, partitions: frozenset[int]) -> None:
        self.lost.append(partitions)


def context(settings: Settings | None = None, tuning: Tuning = TUNING,
            escalations: Escalations | None = None, changelog: str = "t-waits-changelog",
            **overrides: Any) -> WorkerContext:
    """A context of `settings` (by default prefix `t`, 8 partitions); `overrides` go to
    the settings (e.g. `batch_linger=0.05`)."""
    base = settings or Settings(topic_prefix="t", app_id="t-processor")
    if overrides:
        base = replace(base, **overrides)
    seen = escalations or Escalations()
    return WorkerContext(base, changelog, tuning, fail=seen.fail, lose=seen.lose)


__all__ = ["Escalations", "context"]
