"""Restoring partitions from the changelog on the real broker, and following standbys.

The changelog reader must end a restore at the target however the tail
looks (commit markers, aborted transactions of killed workers, nothing at
all), apply exactly the committed records, resume from the last offset a
database holds, and refuse to build on a database from another life of the
topic; and ask its watermarks again while librdkafka does not know the
partition (a broker just thawed).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from streams import topics
from streams.core import ArmedTimer, TimerKind, WaitStatus
from streams.processor import restore
from streams.processor.envelope import Row, encode_row
from streams.processor.gaps import EndOffsets
from streams.processor.model import RowHead
from streams.processor.restore import ChangelogReader, Restored
from streams.processor.state import StateStores
from tests.prefixes import unique_prefix

pytestmark = pytest.mark.kafka


def _row(due: int) -> bytes:
    head = RowHead(WaitStatus.PARKED, "d", None, (ArmedTimer(TimerKind.DEADLINE, due, 1),))
    return encode_row(Row(b"{}", {}, (), head))


def _write_rows(producer: Producer, topic: str, waits: range) -> None:
    """A row ``k<i>`` due at ``i`` for each i of `waits`, to partition 0, flushed."""
    for i in waits:
        producer.produce(topic, key=f"k{i}".encode(), value=_row(i), partition=0)
    producer.flush(30)


def _topic(bootstrap: str, partitions: int = 1) -> str:
    name = f"{unique_prefix('r')}-waits-changelog"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1,
                                  config={"cleanup.policy": "compact"})])[name].result(30)
    topics.wait_visible(admin, [name])  # a busy broker took longer than 15 s
    return name


def _restore(bootstrap: str, topic: str, stores: StateStores,
             partitions: list[int]) -> list[Restored]:
    """Restore the partitions to their last stable offsets, as a takeover does."""
    conf = {"bootstrap.servers": bootstrap, "group.id": f"{topic}-test"}
    ends = EndOffsets(conf).get([(topic, p) for p in partitions])

    async def run() -> list[Restored]:
        reader = ChangelogReader(conf, topic, stores)
        try:
            return list(await asyncio.wait_for(asyncio.gather(
                *(reader.restore(p, ends[(topic, p)]) for p in partitions)), 60))
        finally:
            reader.stop()

    return asyncio.run(run())


def test_a_restore_ends_at_the_last_stable_offset_past_markers_and_aborted_batches(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Partition 0: committed rows, then the aborted transactions of two killed workers;
    partition 1: plain records; partition 2: nothing."""
    topic = _topic(kafka_bootstrap, 3)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": topic})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, key=f"k{i}".encode(), value=_row(1000 + i), partition=0)
    producer.commit_transaction(30)
    for _ in range(2):
        producer.begin_transaction()
        for i in range(300):
            producer.produce(topic, key=f"k{i}".encode(), value=b"never seen", partition=0)
        producer.flush(30)
        producer.abort_transaction(30)
    plain = Producer({"bootstrap.servers": kafka_bootstrap})
    for i in range(4):
        plain.produce(topic, key=f"p{i}".encode(), value=_row(2000 + i), partition=1)
    plain.flush(30)

    stores = StateStores(tmp_path)
    done = {r.partition: r for r in _restore(kafka_bootstrap, topic, stores, [0, 1, 2])}

    assert (done[0].records, done[1].records, done[2].records) == (3, 4, 0)
    assert sorted(k for k, _ in stores[0].rows()) == [b"k0", b"k1", b"k2"]
    assert stores[0].get(b"k0") == _row(1000)
    summary = stores[1].summary()
    assert summary is not None and (summary.armed, dict(summary.waits)) == (
        4, {("parked", "d"): 4})
    assert stores[1].changelog_offset() == 3


def test_a_database_reads_only_what_the_changelog_gained_since(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    topic = _topic(kafka_bootstrap)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    _write_rows(producer, topic, range(50))
    stores = StateStores(tmp_path)
    [first] = _restore(kafka_bootstrap, topic, stores, [0])
    assert first.records == 50
    for i in range(50, 60):
        producer.produce(topic, key=f"k{i}".encode(), value=_row(i), partition=0)
    producer.produce(topic, key=b"k0", value=None, partition=0)  # a wait purged
    producer.flush(30)
    stores.close(0)

    second = StateStores(tmp_path)
    [again] = _restore(kafka_bootstrap, topic, second, [0])
    # Closed here, not when it is collected: at load 15 the database was still open (its
    # lock held) when the next line opened it again.
    second.close_all()

    assert (again.records, again.start) == (11, 50)
    reopened = StateStores(tmp_path).open(0)
    assert reopened.get(b"k0") is None and reopened.get(b"k59") == _row(59)
    summary = reopened.summary()
    assert summary is not None and summary.armed == 59


def test_a_database_ahead_of_its_changelog_is_from_another_life_and_is_reset(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The topics were deleted and made again (`scripts/kafka reset`, a new cluster): the
    rows on disk belong to waits that exist nowhere any more."""
    topic = _topic(kafka_bootstrap)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(topic, key=b"new", value=_row(5), partition=0)
    producer.flush(30)
    stores = StateStores(tmp_path)
    from streams.processor.positions import Positions
    stores.open(0).write({b"old": _row(1)}, Positions({}, 0), 700)  # offset 700 of the old
    stores.close(0)

    [restored] = _restore(kafka_bootstrap, topic, stores, [0])

    assert restored.records == 1
    assert [k for k, _ in stores[0].rows()] == [b"new"]


def _topic_id(admin: AdminClient, topic: str) -> str | None:
    try:
        return str(admin.describe_topics(TopicCollection([topic]))[topic].result(10).topic_id)
    except KafkaException:
        return None


def test_a_database_of_a_deleted_and_remade_changelog_is_reset_whatever_its_offsets(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    topic = _topic(kafka_bootstrap)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(topic, key=b"old", value=_row(1), partition=0)
    producer.flush(30)
    stores = StateStores(tmp_path)
    _restore(kafka_bootstrap, topic, stores, [0])
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    old_id = _topic_id(admin, topic)
    admin.delete_topics([topic])[topic].result(30)
    deadline = time.monotonic() + 30
    while True:  # the deletion takes a moment to complete
        try:
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
            break
        except Exception:  # noqa: BLE001 - TOPIC_ALREADY_EXISTS while it is being deleted
            assert time.monotonic() < deadline, "the changelog could not be made again"
            time.sleep(0.2)
    # The broker's metadata follows the controller's a moment later: on a busy machine it
    # still described the old topic, and the restore took the remade one for the old.
    while _topic_id(admin, topic) in (None, old_id):
        assert time.monotonic() < deadline, "the remade changelog's id was never described"
        time.sleep(0.2)
    for i in range(3):  # more records than the old life had: offsets alone would not tell
        producer.produce(topic, key=f"new{i}".encode(), value=_row(i), partition=0)
    producer.flush(30)

    [restored] = _restore(kafka_bootstrap, topic, stores, [0])

    assert restored.records == 3
    assert sorted(k for k, _ in stores[0].rows()) == [b"new0", b"new1", b"new2"]


def test_a_standby_follows_its_partition_and_a_restore_then_reads_only_the_rest(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    topic = _topic(kafka_bootstrap)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    conf = {"bootstrap.servers": kafka_bootstrap, "group.id": f"{topic}-test"}
    stores = StateStores(tmp_path)

    async def run() -> Restored:
        reader = ChangelogReader(conf, topic, stores)
        try:
            reader.follow(0)
            _write_rows(producer, topic, range(20))
            deadline = time.monotonic() + 30
            while reader.applied < 20:  # the standby keeps up as records come
                assert time.monotonic() < deadline, f"standby applied {reader.applied} of 20"
                await asyncio.sleep(0.05)
            assert reader.standbys() == {0}
            _write_rows(producer, topic, range(20, 25))
            end = EndOffsets(conf).get([(topic, 0)])[(topic, 0)]
            return await asyncio.wait_for(reader.restore(0, end), 30)
        finally:
            reader.stop()

    restored = asyncio.run(run())

    assert restored.end == 25 and restored.start >= 20
    assert stores[0].changelog_offset() == 24
    assert sum(1 for _ in stores[0].rows()) == 25


class _ThawedConsumer(Consumer):
    """librdkafka's consumer, whose first watermark questions are answered as right after
    a broker thawed (issue 48): "Unknown partition", from its metadata."""

    def __init__(self, conf: dict[str, object]) -> None:
        super().__init__(conf)
        self.unknown = 2

    def get_watermark_offsets(self, *args: Any, **kwargs: Any) -> Any:
        if self.unknown:
            self.unknown -= 1
            raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION))  # noqa: SLF001
        return super().get_watermark_offsets(*args, **kwargs)


def test_a_restore_asks_its_watermarks_again_while_the_partition_is_unknown_and_counts_it(
    kafka_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = _topic(kafka_bootstrap)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    _write_rows(producer, topic, range(3))
    monkeypatch.setattr(restore, "Consumer", _ThawedConsumer)
    conf = {"bootstrap.servers": kafka_bootstrap, "group.id": f"{topic}-test"}
    counters: Counter[str] = Counter()
    stores = StateStores(tmp_path)

    async def run() -> Restored:
        reader = ChangelogReader(conf, topic, stores, counters=counters)
        try:
            return await asyncio.wait_for(reader.restore(0, 3), 30)
        finally:
            reader.stop()

    restored = asyncio.run(run())

    assert (restored.records, restored.end) == (3, 3)
    assert counters["restore.watermark_retries"] == 2  # in /xwait/stats


class _WatchedConsumer(Consumer):
    """librdkafka's consumer, noting which of them is asked for watermarks and which is
    assigned partitions."""

    calls: list[tuple[str, int, int]] = []  # (what, consumer, partition)

    def get_watermark_offsets(self, partition: TopicPartition, *args: Any,
                              **kwargs: Any) -> Any:
        _WatchedConsumer.calls.append(("watermarks", id(self), partition.partition))
        return super().get_watermark_offsets(partition, *args, **kwargs)

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        _WatchedConsumer.calls.extend(("assign", id(self), tp.partition) for tp in partitions)
        super().incremental_assign(partitions)


def test_watermarks_are_asked_on_a_consumer_that_never_fetches(
    kafka_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the consumer that reads, a watermark question waits at the broker behind the
    fetch in flight: a restart's eight partitions took 0.1 s each."""
    topic = _topic(kafka_bootstrap, partitions=4)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for p in range(4):
        for i in range(3):
            producer.produce(topic, key=f"k{p}-{i}".encode(), value=_row(i), partition=p)
    producer.flush(30)
    monkeypatch.setattr(restore, "Consumer", _WatchedConsumer)
    _WatchedConsumer.calls = []

    restored = _restore(kafka_bootstrap, topic, StateStores(tmp_path), list(range(4)))

    assert [r.records for r in restored] == [3, 3, 3, 3]
    asked = {c for what, c, _ in _WatchedConsumer.calls if what == "watermarks"}
    reading = {c for what, c, _ in _WatchedConsumer.calls if what == "assign"}
    assert sorted(p for what, _, p in _WatchedConsumer.calls if what == "watermarks") == [
        0, 1, 2, 3]
    assert asked and reading and not asked & reading, _WatchedConsumer.calls
