"""Taking what a consumer fetched without waiting to fill a batch (`streams.polling`)."""

from __future__ import annotations

from streams.polling import available


class _Queue:
    """A consumer's local queue, as `available` calls it (consume and poll)."""

    def __init__(self, queued: list[str], arriving: list[str]) -> None:
        self.queued, self.arriving = queued, arriving
        self.calls: list[tuple[str, float]] = []

    def consume(self, n: int, timeout: float) -> list[str]:
        self.calls.append(("consume", timeout))
        got, self.queued = self.queued[:n], self.queued[n:]
        return got

    def poll(self, timeout: float) -> str | None:
        self.calls.append(("poll", timeout))
        if not self.arriving:
            return None
        self.queued, self.arriving = self.arriving[1:], []
        return "first"


def test_a_fetch_hands_over_what_is_there_and_never_waits_to_fill_a_batch() -> None:
    # consume(n, timeout) waits out its timeout unless n records come: the
    # worker's reader must not, or a record at low load waits for the poll's timeout.
    held = _Queue(["a", "b"], [])
    assert available(held, 1000, 0.1) == ["a", "b"]
    assert held.calls == [("consume", 0)]

    idle = _Queue([], ["first", "second", "third"])
    assert available(idle, 1000, 0.1) == ["first", "second", "third"]
    assert idle.calls == [("consume", 0), ("poll", 0.1), ("consume", 0)]

    quiet = _Queue([], [])
    assert available(quiet, 1000, 0.1) == []
