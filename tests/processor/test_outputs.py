"""Outputs sent with confluent-kafka are acknowledged before faust may commit their inputs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from faust.exceptions import ProducerSendError

from streams.config import Settings
from streams.definitions import load_definitions
from streams.processor.app import Worker
from streams.processor.outputs import OutputSender


class FakeProducer:
    """librdkafka's shape: produce() queues, poll() serves delivery callbacks."""

    def __init__(self, acks_per_poll: int = 1, refuse: frozenset[bytes] = frozenset(),
                 full_for: int = 0) -> None:
        self.queue: list[tuple[bytes, Callable[[Any, Any], None]]] = []
        self.sent: list[tuple[str, bytes, int | None]] = []
        self.acks_per_poll = acks_per_poll
        self.refuse = refuse
        self.full_for = full_for
        self.polls = 0

    def produce(self, topic: str, key: bytes, value: bytes,
                on_delivery: Callable[[Any, Any], None], partition: int | None = None) -> None:
        if self.full_for > 0:
            self.full_for -= 1
            raise BufferError("Local: Queue full")
        self.sent.append((topic, key, partition))
        self.queue.append((key, on_delivery))

    def poll(self, _timeout: float) -> int:
        self.polls += 1
        served = self.queue[:self.acks_per_poll]
        del self.queue[:self.acks_per_poll]
        for key, callback in served:
            callback("refused: record too large" if key in self.refuse else None, None)
        return len(served)


def _sender(fake: FakeProducer) -> OutputSender:
    return OutputSender(lambda: fake)


def test_flush_returns_only_when_everything_sent_before_it_is_acknowledged() -> None:
    fake = FakeProducer(acks_per_poll=0)

    async def scenario() -> None:
        sender = _sender(fake)
        for i in range(5):
            await sender.send("x.outcomes", f"k{i}".encode(), b"v", None)
        flushing = asyncio.create_task(sender.flush())
        await asyncio.sleep(0.05)
        assert not flushing.done(), "nothing acknowledged yet"
        fake.acks_per_poll = 1
        await asyncio.wait_for(flushing, 5)
        assert sender.pending == 0

    asyncio.run(scenario())
    assert [k for _, k, _ in fake.sent] == [b"k0", b"k1", b"k2", b"k3", b"k4"]


def test_a_refused_record_fails_the_flush_so_nothing_is_committed() -> None:
    fake = FakeProducer(refuse=frozenset({b"bad"}))

    async def scenario() -> None:
        sender = _sender(fake)
        await sender.send("x.outcomes", b"good", b"v", None)
        await sender.send("x.outcomes", b"bad", b"v", 3)
        with pytest.raises(ProducerSendError, match="refused by Kafka"):
            await sender.flush()

    asyncio.run(scenario())
    assert fake.sent[1] == ("x.outcomes", b"bad", 3), "an explicit partition is kept"


def test_records_never_acknowledged_fail_the_flush_after_the_timeout() -> None:
    fake = FakeProducer(acks_per_poll=0)

    async def scenario() -> None:
        sender = _sender(fake)
        await sender.send("x.actions", b"k", b"v", None)
        with pytest.raises(ProducerSendError, match="not acknowledged within"):
            await sender.flush(timeout=0.1)

    asyncio.run(scenario())


def test_a_record_refused_at_produce_fails_the_next_flush() -> None:
    class Refusing(FakeProducer):
        def produce(self, topic: str, key: bytes, value: bytes,
                    on_delivery: Callable[[Any, Any], None], partition: int | None = None) -> None:
            raise ValueError("message size too large")  # KafkaException in real life

    async def scenario() -> None:
        sender = _sender(Refusing())
        await sender.send("x.rejected", b"k", b"v" * 10, None)  # does not raise into faust
        assert sender.pending == 0
        with pytest.raises(ProducerSendError, match="message size too large"):
            await sender.flush(timeout=1)

    asyncio.run(scenario())


def test_a_full_local_queue_is_waited_out_not_dropped() -> None:
    fake = FakeProducer(full_for=3)

    async def scenario() -> None:
        sender = _sender(fake)
        await sender.send("x.actions", b"k", b"v", None)
        await sender.flush()

    asyncio.run(scenario())
    assert fake.sent == [("x.actions", b"k", None)]


def test_faust_flushing_its_producer_before_a_commit_waits_for_our_outputs(
    tmp_path: Path,
) -> None:
    settings = Settings(data_dir=tmp_path)
    worker = Worker(settings, load_definitions(settings.topology / "waits"))
    fake = FakeProducer(acks_per_poll=0)
    assert worker.sender is not None, "at_least_once sends outputs with confluent-kafka"
    worker.sender._make_producer = lambda: fake  # noqa: SLF001 - the test's broker stand-in

    async def scenario() -> None:
        assert worker.sender is not None
        await worker.sender.send("xwait.outcomes", b"k", b"v", None)
        # faust calls this before committing offsets (Consumer._commit_offsets)
        committing = asyncio.create_task(worker.app.producer.flush())
        await asyncio.sleep(0.05)
        assert not committing.done(), "the commit waits for the unacknowledged output"
        fake.acks_per_poll = 1
        await asyncio.wait_for(committing, 5)

    asyncio.run(scenario())
