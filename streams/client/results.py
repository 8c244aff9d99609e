"""How the SDK finds a wait's outcome (`XwaitClient.result`): a key-filtered reader of
the key's outcomes partition, from a little before the wait parked."""

from __future__ import annotations

from streams.client.consumer import XwaitConsumer
from streams.client.errors import NoSuchWait
from streams.client.records import Outcome

__all__ = ["RESULT_LOOKBACK_MS", "RESULT_POLL_S", "RESULT_TIMEOUT_S", "ResultReader"]

RESULT_TIMEOUT_S = 30.0
"""Default of :meth:`XwaitClient.result`: long enough for a wait that ends on a reply
already on its way, short enough that a forgotten one does not hang a script."""

RESULT_LOOKBACK_MS = 5 * 60_000
"""How far before a wait's ``requestedAt`` the outcome search starts: the outcome's
Kafka timestamp comes from the worker's clock, which may lag the caller's a little."""

RESULT_POLL_S = 0.2
"""One blocking poll of :meth:`XwaitClient.result_async`: how soon a cancelled task lets go."""


class ResultReader:
    """One key's outcome search: a key-filtered reader of its outcomes partition."""

    def __init__(self, consumer: XwaitConsumer[Outcome], key: str, where: str,
                 unknown_to_workers: bool) -> None:
        self.consumer = consumer
        self.key = key
        self.where = where
        self.unknown_to_workers = unknown_to_workers

    def step(self, timeout: float) -> Outcome | None:
        """Poll once; the outcome, or None; NoSuchWait once it is clear there is none."""
        found = self.consumer.poll(timeout)
        if found is not None:
            return found
        if self.unknown_to_workers and self.consumer.caught_up:
            raise NoSuchWait(self.key, self.where)
        return None

    def close(self) -> None:
        self.consumer.close()
