"""Output records sent with confluent-kafka, delivered before faust commits.

Sending each output through faust's `Topic.send` costs a large share of a
worker's time: in two runs here, parking 20k waits without any output sends
took 14.4 s and 16.9 s against about 20 s with them.  librdkafka does the
same work in C, in its own threads.

At-least-once still holds because faust flushes its producer before it
commits input offsets, and the worker hooks this sender's `flush` in front
of that (`Worker._build_app`): an offset is committed only after every
output produced before the commit began was acknowledged by the broker.  A
record Kafka refuses, or one not acknowledged within `FLUSH_TIMEOUT_S`,
fails the commit and stops the worker, so that its inputs are read again.

Under exactly_once the outputs must be part of faust's transactions, so that
mode keeps sending through faust.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from confluent_kafka import KafkaError
from faust.exceptions import ProducerSendError

log = logging.getLogger(__name__)

# How long librdkafka keeps retrying a record before it reports it failed,
# and how long a commit waits for acknowledgements before the worker gives up
# and stops (the records are then produced again on restart).  The wait is
# the longer, so a record still being retried fails with librdkafka's reason.
MESSAGE_TIMEOUT_MS = 300_000
FLUSH_TIMEOUT_S = MESSAGE_TIMEOUT_MS / 1000 + 30
_POLL_S = 0.002


class OutputSender:
    """One idempotent confluent-kafka producer for a worker's output records."""

    def __init__(self, make_producer: Callable[[], Any]) -> None:
        self._make_producer = make_producer
        self._producer: Any = None  # made at the first send: a worker may never send
        self._seq = itertools.count(1)
        self._last = 0
        self._pending: set[int] = set()
        self._errors: list[str] = []

    def _delivered(self, seq: int, err: KafkaError | None, _msg: object) -> None:
        self._pending.discard(seq)
        if err is not None:
            self._errors.append(str(err))

    async def send(self, topic: str, key: bytes, value: bytes, partition: int | None) -> None:
        if self._producer is None:
            self._producer = self._make_producer()
        seq = self._last = next(self._seq)
        self._pending.add(seq)
        extra = {} if partition is None else {"partition": partition}
        while True:
            try:
                self._producer.produce(topic, key=key, value=value,
                                       on_delivery=partial(self._delivered, seq), **extra)
                break
            except BufferError:  # librdkafka's queue is full: let it drain
                self._producer.poll(0)
                await asyncio.sleep(_POLL_S)
            except Exception as exc:  # noqa: BLE001 - refused before it was queued
                # Not raised: faust would ack the event anyway.  Recorded, the
                # error fails the next flush, so its input is never committed.
                self._pending.discard(seq)
                self._errors.append(f"{type(exc).__name__}: {exc}")
                log.error("output record refused topic=%s key=%r error=%s", topic, key, exc)
                return
        self._producer.poll(0)

    async def flush(self, timeout: float = FLUSH_TIMEOUT_S) -> None:
        """Return once everything sent before the call is acknowledged; raise if it is not."""
        if self._producer is None:
            return
        target = self._last
        loop = asyncio.get_running_loop()
        give_up = loop.time() + timeout
        while self._pending and min(self._pending) <= target and not self._errors:
            self._producer.poll(0)
            if loop.time() > give_up:
                raise ProducerSendError(
                    f"{sum(1 for s in self._pending if s <= target)} output records were not "
                    f"acknowledged within {timeout:.0f}s; not committing their inputs")
            await asyncio.sleep(_POLL_S)
        if self._errors:
            first, count = self._errors[0], len(self._errors)
            log.error("output records refused by Kafka count=%d first=%s", count, first)
            raise ProducerSendError(f"{count} output records were refused by Kafka "
                                    f"(first: {first}); not committing their inputs")

    @property
    def pending(self) -> int:
        return len(self._pending)


__all__ = ["FLUSH_TIMEOUT_S", "OutputSender"]
