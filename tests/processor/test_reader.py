"""The worker's own input consumer against the real broker."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from streams.processor.model import InputRecord, Role
from streams.processor.reader import InputReader
from tests.made_topics import create_topics
from tests.prefixes import unique_prefix

pytestmark = pytest.mark.kafka


@pytest.fixture
def topic(kafka_bootstrap: str) -> str:
    name = f"{unique_prefix('r')}.requests"
    create_topics(kafka_bootstrap, NewTopic(name, 2, 1, config={
        "message.timestamp.type": "LogAppendTime"}))
    return name


def _produce(bootstrap: str, topic: str, counts: dict[int, int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, n in counts.items():
        for i in range(n):
            producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=partition)
    producer.flush(30)


# The tests here are alike in shape (duplicates lists the pair), deliberately: each produces
# its records and hands its own body to _run.
def _run(bootstrap: str, topic: str,
         body: Callable[[InputReader], Awaitable[None]]) -> None:
    async def main() -> None:
        reader = InputReader({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader"},
                             {topic: Role.REQUESTS})
        reader.start()
        try:
            await body(reader)
        finally:
            reader.stop()
    asyncio.run(main())


async def _collect(reader: InputReader, want: int, timeout: float = 20.0
                   ) -> list[InputRecord]:
    got: list[InputRecord] = []
    give_up = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < give_up:
        try:
            batch = await asyncio.wait_for(reader.next_batch(), give_up - time.monotonic())
        except TimeoutError:
            break
        got += batch.records
        reader.taken()
    return got


def test_it_reads_each_assigned_partition_from_its_offset_one_batch_at_a_time(
        kafka_bootstrap: str, topic: str) -> None:
    _produce(kafka_bootstrap, topic, {0: 2500, 1: 10})

    async def body(reader: InputReader) -> None:
        reader.assign({(topic, 0): 100, (topic, 1): 0})
        first = (await asyncio.wait_for(reader.next_batch(), 20)).records
        with pytest.raises(TimeoutError):  # nothing more until the first is taken
            await asyncio.wait_for(reader.next_batch(), 0.5)
        reader.taken()
        got = first + await _collect(reader, 2410 - len(first))
        by_partition = {p: [r.offset for r in got if r.partition == p] for p in (0, 1)}
        assert by_partition == {0: list(range(100, 2500)), 1: list(range(10))}
        rec = next(r for r in got if r.partition == 1 and r.offset == 3)
        assert (rec.role, rec.topic, rec.key, rec.value) == (Role.REQUESTS, topic, b"k3", b"v3")
        assert rec.log_append_time and rec.timestamp is not None

    _run(kafka_bootstrap, topic, body)


def test_a_paused_partition_waits_and_one_given_up_is_no_longer_read(
        kafka_bootstrap: str, topic: str) -> None:
    _produce(kafka_bootstrap, topic, {0: 5, 1: 5})

    async def body(reader: InputReader) -> None:
        reader.assign({(topic, 0): 0, (topic, 1): 0})
        reader.pause(topic, 1)
        got = await _collect(reader, 10, timeout=3)
        assert {r.partition for r in got} == {0}
        reader.resume(topic, 1)
        got = await _collect(reader, 5)
        assert [(r.partition, r.offset) for r in got] == [(1, o) for o in range(5)]
        # a resumed partition starts a new run: its first record claims nothing before it
        assert [r.follows for r in got] == [None, 1, 2, 3, 4]
        reader.assign({(topic, 0): 5})  # partition 1 given up
        _produce(kafka_bootstrap, topic, {0: 2, 1: 2})
        got = await _collect(reader, 4, timeout=3)
        assert [(r.partition, r.offset) for r in got] == [(0, 5), (0, 6)]

    _run(kafka_bootstrap, topic, body)


def test_a_renewed_reader_reads_on_from_where_it_is_assigned_with_a_new_consumer(
        kafka_bootstrap: str, topic: str) -> None:
    """What the intake does when the fetch stands still below records that are there."""
    _produce(kafka_bootstrap, topic, {0: 5})

    async def body(reader: InputReader) -> None:
        reader.assign({(topic, 0): 0})
        got = await _collect(reader, 5)
        assert [r.offset for r in got] == list(range(5))
        reader.renew()
        reader.assign({(topic, 0): 3})  # the intake assigns the offsets it expects
        _produce(kafka_bootstrap, topic, {0: 2})
        got = await _collect(reader, 4)
        assert [r.offset for r in got] == [3, 4, 5, 6]
        assert got[0].follows is None  # a new consumer claims nothing before its first

    _run(kafka_bootstrap, topic, body)


def test_aborted_records_are_not_input(kafka_bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": topic})
    producer.init_transactions(30)
    for commit in (False, True):
        producer.begin_transaction()
        producer.produce(topic, value=b"kept" if commit else b"aborted", partition=0)
        producer.flush(30)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)

    async def body(reader: InputReader) -> None:
        reader.assign({(topic, 0): 0})
        got = await _collect(reader, 2, timeout=3)
        assert [(r.offset, r.value) for r in got] == [(2, b"kept")]

    _run(kafka_bootstrap, topic, body)


# Begins alike in shape with the test above (duplicates lists the pair), deliberately:
# each test produces, then drives its own reader through `_run`.
def test_started_again_after_a_stop_it_reads_its_last_assignment(
        kafka_bootstrap: str, topic: str) -> None:
    """faust restarts an agent that crashed; its reader must not stay stopped."""
    _produce(kafka_bootstrap, topic, {0: 3})

    async def body(reader: InputReader) -> None:
        reader.assign({(topic, 0): 1})
        assert [r.offset for r in await _collect(reader, 2)] == [1, 2]
        reader.stop()
        reader.start()
        assert [r.offset for r in await _collect(reader, 2)] == [1, 2]

    _run(kafka_bootstrap, topic, body)


def test_it_says_which_offsets_it_passed_over_between_and_after_the_records_it_delivered(
        kafka_bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": topic})
    producer.init_transactions(30)
    for i in range(3):  # records at offsets 0, 2 and 4, each transaction's marker after it
        producer.begin_transaction()
        producer.produce(topic, key=b"k", value=b"v%d" % i, partition=0)
        producer.commit_transaction(30)

    async def body(reader: InputReader) -> None:
        reader.assign({(topic, 0): 0, (topic, 1): 0})
        records: list[InputRecord] = []
        passed: list[tuple[str, int, int, int]] = []
        give_up = time.monotonic() + 20
        while not passed and time.monotonic() < give_up:
            try:
                batch = await asyncio.wait_for(reader.next_batch(), 1)
            except TimeoutError:
                continue
            records += batch.records
            passed += batch.passed
            reader.taken()
        # Between two records, the marker before the second; the first claims nothing.
        assert [(r.offset, r.follows) for r in records] == [(0, None), (2, 1), (4, 3)]
        assert passed == [(topic, 0, 5, 6)]  # the last marker, without a record after it

    _run(kafka_bootstrap, topic, body)


def test_with_a_linger_records_that_trickle_in_are_handed_over_together(
        kafka_bootstrap: str, topic: str) -> None:
    """The batch linger's pace at the fetch: each hand-over wakes the event loop, so
    a fetch waits at the broker a linger for more than a record or two."""

    async def main() -> None:
        reader = InputReader({"bootstrap.servers": kafka_bootstrap,
                              "group.id": f"{topic}-reader"}, {topic: Role.REQUESTS},
                             linger=3.0)
        reader.start()
        producer = Producer({"bootstrap.servers": kafka_bootstrap})
        try:
            reader.assign({(topic, 0): 0, (topic, 1): 0})
            sizes: list[int] = []

            async def take() -> None:  # as the worker does: each hand-over taken at once
                while sum(sizes) < 5:
                    batch = await reader.next_batch()
                    sizes.append(len(batch.records))
                    reader.taken()

            taking = asyncio.ensure_future(take())
            await asyncio.sleep(0.5)  # assigned and fetching
            for i in range(5):  # one at a time, 0.1 s apart: without the linger, 5 hand-overs
                producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=0)
                producer.flush(30)
                await asyncio.sleep(0.1)
            await asyncio.wait_for(taking, 20)
            assert len(sizes) <= 2, sizes  # one, unless the machine stalled 3 s meanwhile
        finally:
            reader.stop()

    asyncio.run(main())
