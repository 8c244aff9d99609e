"""A bench's producers: input records produced as users' services produce them, faster than
the broker acknowledges them."""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from streams.config import Settings
from streams.testing.harness import BenchError


def produce(producer: Producer, topic: str, key: bytes | None, value: bytes | None,
            **kwargs: Any) -> None:
    """Produce, letting the local queue drain while it is full (BufferError) instead of
    failing: a bench produces faster than the broker acknowledges."""
    while True:
        try:
            producer.produce(topic, key=key, value=value, **kwargs)
            return
        except BufferError:
            producer.poll(0.05)


class Sender:
    """A producer of input records the way users' services produce them (murmur2,
    acks=all, idempotent); `conf` adds or overrides librdkafka settings."""

    def __init__(self, settings: Settings, **conf: Any) -> None:
        self.producer = Producer(settings.confluent(**{
            "partitioner": "murmur2_random", "linger.ms": 5, "acks": "all",
            "enable.idempotence": True, **conf}))
        self.errors: list[str] = []

    def delivered(self, err: KafkaError | None, _msg: Message) -> None:
        if err is not None and len(self.errors) < 100:
            self.errors.append(str(err))

    def send(self, topic: str, key: str, value: bytes) -> None:
        produce(self.producer, topic, key.encode(), value, on_delivery=self.delivered)

    def flush(self, timeout: float) -> None:
        """Until every record is acknowledged; BenchError when one was not or failed."""
        remaining = self.producer.flush(timeout)
        if remaining:
            raise BenchError(f"{remaining} records not delivered within {timeout:.0f}s")
        if self.errors:
            raise BenchError(f"{len(self.errors)} records failed: {self.errors[0]}")


__all__ = ["Sender", "produce"]
