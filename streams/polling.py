"""Taking what a librdkafka consumer has fetched, without waiting to fill a batch.

``Consumer.consume(n, timeout)`` returns only when it has n records or the
timeout has passed, so below n records every call waited out its timeout: at
300 waits/s the worker's input reader held each record 45 ms at the median
(about half of its reply-to-outcome time), a worker's start spent 0.5 s
reading a definitions topic of a few records, and the webhook adapter held a
lone action for its whole poll.  `available` hands over what is there at
once, and waits only when nothing is.
"""

from __future__ import annotations

from typing import Any

__all__ = ["available"]


def available(consumer: Any, most: int, wait_s: float) -> list[Any]:
    """What the fetch holds now, up to `most`; if nothing, the first message within
    `wait_s` and what came with it."""
    msgs = consumer.consume(most, timeout=0)
    if msgs:
        return list(msgs)
    first = consumer.poll(wait_s)
    if first is None:
        return []
    return [first, *consumer.consume(most - 1, timeout=0)]
