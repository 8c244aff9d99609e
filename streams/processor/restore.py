"""Restoring partitions from the changelog, and keeping standby copies warm.

One librdkafka consumer, outside any group and read_committed, reads the
waits changelog (`<app id>-waits-changelog`) into the partitions' databases
(`streams.processor.state`), in its own thread:

* a partition being taken over is **restored**: read from the offset after
  the last record its database holds up to a target, the changelog's last
  stable offset asked for after the previous owner was fenced (the order of
  Kafka Streams: fence, restore to the LSO, then seek the inputs).  After the
  fence no transaction of the old owner can commit any more, and one still
  open holds the LSO back instead of appearing after the restore, so what
  the restore applied is everything that will ever be there before this
  worker's own writes.  The restore is done when the consumer's position
  reaches the target (transaction markers move the position and are never
  delivered), and the partition starts deciding at once, whatever the other
  partitions are doing;
* a partition this worker is a **standby** for (faust's assignor gives each
  partition a standby on another worker) is followed for as long as it is
  one, so that taking it over restores only the last few records.

A restore starts from the partition's watermarks, asked on a consumer of
their own that never fetches (asked on the reading one, each question waited
at the broker behind the fetch in flight on its connection, up to its
fetch.wait.max.ms: eight partitions taken over took 0.1 s each, 0.8 s of
every restart and standby takeover), and asked again while its leader
moves (`watermarks`: right after a broker thawed, librdkafka answered
"Unknown partition" for a moment).

Records are applied in write batches of up to `Tuning.restore_batch` records without the
WAL (`PartitionState.apply_changelog`), each with the offset of its last
record; a restore ends with a flush.  A crash mid-restore leaves a prefix,
and the next start reads on from where it ends.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from streams.errors import XwaitError
from streams.kafka_errors import error_code, error_text
from streams.processor.state import (
    CHANGELOG_ID_KEY,
    PartitionState,
    StateStores,
    WrittenKeys,
    head_or_none,
    summary_move,
)
from streams.processor.tuning import TUNING, Tuning
from streams.timers.stored import Summary, index_changes

log = logging.getLogger(__name__)

class RestoreFailed(XwaitError):
    """A partition could not be restored from its changelog."""


# What librdkafka answers about a partition whose leadership is moving (a broker
# frozen, restarted, or thawed a moment ago): its metadata names no leader, a former
# one, or not the partition at all.  Right after a thaw, `_UNKNOWN_PARTITION` (once
# NOT_LEADER_FOR_PARTITION) stopped a worker taking its partitions back in 7 runs of 8
# (issue 48); asked again 0.1 s later after fresh metadata, it was answered every time.
_LEADER_MOVING = frozenset({
    KafkaError._UNKNOWN_PARTITION,  # noqa: SLF001 - librdkafka's own code
    KafkaError._WAIT_COORD,  # noqa: SLF001 - no leader found within the timeout
    KafkaError._TRANSPORT,  # noqa: SLF001 - the connection to the former leader broke
    KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.FENCED_LEADER_EPOCH, KafkaError.UNKNOWN_LEADER_EPOCH,
})


def watermarks(consumer: Consumer, tp: TopicPartition, tuning: Tuning,
               stop: threading.Event,
               retrying: Callable[[str], None] | None = None) -> tuple[int, int]:
    """The partition's low and high watermarks, asked again while its leader moves.

    An answer of `_LEADER_MOVING`, or an offset below 0 without an error (the
    -1001 librdkafka's ListOffsets gives for a leader that did not answer,
    `gaps.EndOffsets.get`: taken for a high watermark, it would make any
    database look ahead of its changelog, and reset it), is asked again
    `watermark_retry_s` later, doubling up to `watermark_retry_max_s`, for
    `watermark_timeout_s` in all, each time after the topic's metadata was
    asked afresh: librdkafka answers `_UNKNOWN_PARTITION` from its metadata
    cache, which nothing else refreshes for minutes on an idle consumer.  Any
    other error, one still given at the end, or `stop` set meanwhile raises
    RestoreFailed.  The first retry of a question is logged at WARNING and the
    answer after retries at INFO; `retrying` hears each retry's reason.
    """
    started = time.monotonic()
    deadline = started + tuning.watermark_timeout_s
    pause = tuning.watermark_retry_s
    retries = 0
    while True:
        try:
            low, high = consumer.get_watermark_offsets(
                tp, timeout=max(deadline - time.monotonic(), 0.1), cached=False)
        except KafkaException as exc:
            if error_code(exc) not in _LEADER_MOVING:
                raise RestoreFailed(f"its watermarks: {error_text(exc)}") from exc
            why = error_text(exc)
        else:
            if low >= 0 and high >= 0:
                if retries:
                    log.info("changelog watermarks answered partition=%d retries=%d "
                             "seconds=%.2f", tp.partition, retries, time.monotonic() - started)
                return low, high
            why = f"offsets {low}..{high} without an error (the leader did not answer)"
        if time.monotonic() + pause > deadline:
            raise RestoreFailed(f"its watermarks: {why}, still after {retries + 1} questions "
                                f"in {time.monotonic() - started:.1f} s")
        if not retries:
            log.warning("changelog watermarks not known partition=%d: %s; asking again for "
                        "up to %.0f s (its leader is moving)", tp.partition, why,
                        tuning.watermark_timeout_s)
        if stop.wait(pause):
            raise RestoreFailed("its watermarks: the changelog reader is stopping")
        pause = min(2 * pause, tuning.watermark_retry_max_s)
        retries += 1
        if retrying is not None:
            retrying(why)
        try:  # fresh metadata for the topic: the next question goes to its leader now
            consumer.list_topics(tp.topic, timeout=max(deadline - time.monotonic(), 0.1))
        except KafkaException as exc:
            log.debug("changelog metadata not refreshed: %s", exc)


@dataclass
class Restored:
    """What a restore did: records applied, and from which offset to which."""

    partition: int
    records: int
    start: int
    end: int
    seconds: float


@dataclass
class _Reading:
    state: PartitionState
    summary: Summary
    start: int
    target: int | None  # None: a standby, followed until released
    done: asyncio.Future[Restored] | None
    records: int = 0
    started: float = field(default_factory=time.monotonic)
    position: int = -1  # the consumer's, as last read
    written: WrittenKeys | None = None  # a restore into a database without rows


class ChangelogReader:
    """Restores and follows changelog partitions into their databases, in a thread."""

    def __init__(self, conf: Mapping[str, Any], topic: str, stores: StateStores,
                 tuning: Tuning = TUNING, counters: Counter[str] | None = None) -> None:
        self._conf = {**conf, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                      "isolation.level": "read_committed", "enable.partition.eof": False,
                      **tuning.restore_fetch()}
        self._tuning = tuning
        self._admin_conf = {k: v for k, v in conf.items() if k != "group.id"}
        self._topic_id: str | None = None
        self.topic = topic
        self.stores = stores
        self._commands: queue.SimpleQueue[tuple[str, int, Any]] = queue.SimpleQueue()
        self._reading: dict[int, _Reading] = {}  # the thread's own
        self._asker: Consumer | None = None  # the thread's own, for watermarks
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.failure: BaseException | None = None
        self.applied = 0  # records applied, all partitions, since the start (for stats)
        self.renewed = 0  # consumers replaced after a restore stood still
        # restore.watermark_retries: watermark questions asked again (`watermarks`)
        self.counters: Counter[str] = Counter() if counters is None else counters
        self._moved_at = time.monotonic()

    # -- from the event loop ---------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name="xwait-restore", daemon=True)
        self._thread.start()

    def restore(self, partition: int, until: int) -> asyncio.Future[Restored]:
        """Read the partition's changelog into its database up to offset `until`."""
        return self._ask("restore", partition, until)

    def follow(self, partition: int) -> None:
        """Keep the partition's database up to date with its changelog (a standby)."""
        self._command("follow", partition, None)

    def release(self, partition: int) -> asyncio.Future[Restored]:
        """Stop reading the partition; done once the thread no longer writes its database."""
        return self._ask("release", partition, None)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def standbys(self) -> set[int]:
        """The partitions followed as standbys (read from the loop: a snapshot)."""
        return {p for p, r in list(self._reading.items()) if r.target is None}

    def _ask(self, what: str, partition: int, arg: Any) -> asyncio.Future[Restored]:
        self.start()
        assert self._loop is not None  # noqa: S101 - set by start()
        future: asyncio.Future[Restored] = self._loop.create_future()
        if self.failure is not None:
            future.set_exception(RestoreFailed(f"the changelog reader stopped: {self.failure}"))
            return future
        self._command(what, partition, (arg, future))
        return future

    def _command(self, what: str, partition: int, arg: Any) -> None:
        self.start()
        self._commands.put((what, partition, arg))

    # -- the thread -------------------------------------------------------------------
    def _run(self) -> None:
        consumer: Consumer | None = None
        try:
            self._asker = Consumer(self._conf)  # watermark questions only: never assigned
            consumer = Consumer(self._conf)
            while not self._stop.is_set():
                self._apply_commands(consumer)
                if not self._reading:
                    self._apply_commands(consumer, wait=self._tuning.restore_idle_s)
                    continue
                if self._read(consumer):
                    self._moved_at = time.monotonic()
                elif (any(r.target is not None for r in self._reading.values())
                        and time.monotonic() - self._moved_at > self._tuning.restore_stall_s):
                    consumer = self._renew(consumer)
        except BaseException as exc:  # noqa: BLE001 - reported to every waiter; the worker stops
            self.failure = exc
            log.exception("the changelog reader stopped")
            for reading in self._reading.values():
                if reading.done is not None:
                    self._resolve(reading.done, exc)
            self._fail_commands(exc)
        finally:
            if consumer is not None:
                consumer.close()
            if self._asker is not None:
                self._asker.close()

    def _fail_commands(self, exc: BaseException) -> None:
        while True:
            try:
                _, _, arg = self._commands.get_nowait()
            except queue.Empty:
                return
            if isinstance(arg, tuple):
                self._resolve(arg[1], exc)

    def _apply_commands(self, consumer: Consumer, wait: float = 0.0) -> None:
        """Carry out the loop's commands in the order given; with `wait`, wait that long
        for the first (nothing is being read)."""
        while True:
            try:
                what, p, arg = (self._commands.get(timeout=wait) if wait
                                else self._commands.get_nowait())
            except queue.Empty:
                return
            wait = 0.0
            if what == "release":
                _, future = arg
                self._release(consumer, p, future)
                continue
            if p in self._reading:  # a standby becomes a restore, or the same asked twice
                self._release(consumer, p, None)
            target, future = arg if what == "restore" else (None, None)
            try:
                self._assign(consumer, p, target, future)
            except Exception as exc:  # noqa: BLE001 - the caller decides (the worker stops)
                if future is None:
                    raise
                self._resolve(future, RestoreFailed(f"{self.topic}[{p}]: {exc}"))

    def _assign(self, consumer: Consumer, p: int, target: int | None,
                done: asyncio.Future[Restored] | None) -> None:
        state = self.stores.open(p)
        last = state.changelog_offset()
        assert self._asker is not None  # noqa: S101 - made first by _run
        low, high = watermarks(self._asker, TopicPartition(self.topic, p), self._tuning,
                               self._stop, self._retrying)
        topic_id = self._changelog_id()
        known = state.get(CHANGELOG_ID_KEY)
        other = known is not None and topic_id is not None and known.decode() != topic_id
        if other or (last is not None and last >= high):
            # The database holds records of another changelog, or more than this one:
            # the topics were deleted and made again.  Its rows belong to waits that no
            # longer exist anywhere.
            log.warning("state of partition %d is from another life of its changelog (topic "
                        "id %s, now %s; last offset %s, changelog end %d): restoring from the "
                        "changelog's first record", p, known, topic_id, last, high)
            state = self.stores.reset(p)
            last = None
        if topic_id is not None and (other or known is None):
            state.db.put(CHANGELOG_ID_KEY, topic_id.encode())
        start = last + 1 if last is not None else max(low, 0)
        summary = state.summary()
        if summary is None:
            summary = _build_summary(state)
        reading = _Reading(state, summary, start, target, done)
        if target is not None and target > start and next(state.rows(), None) is None:
            reading.written = WrittenKeys(target - start)
        self._moved_at = time.monotonic()  # a restore begins: its stall counts from now
        if target is not None and start >= target:
            self._finish(p, reading)
            return
        self._reading[p] = reading
        consumer.incremental_assign([TopicPartition(self.topic, p,
                                                    start if last is not None or start > 0
                                                    else OFFSET_BEGINNING)])

    def _changelog_id(self) -> str | None:
        """The changelog topic's id (a new one each time the topic is made); None if the
        broker does not say."""
        if self._topic_id is None:
            admin = AdminClient(self._admin_conf)
            try:
                found = admin.describe_topics(TopicCollection([self.topic]))[self.topic].result(
                    timeout=self._tuning.watermark_timeout_s)
                self._topic_id = str(found.topic_id)
            except KafkaException as exc:
                log.warning("changelog topic id not known (%s): a database is checked "
                            "against the changelog's end offset only", exc)
        return self._topic_id

    def _release(self, consumer: Consumer, p: int,
                 future: asyncio.Future[Restored] | None) -> None:
        reading = self._reading.pop(p, None)
        if reading is not None:
            consumer.incremental_unassign([TopicPartition(self.topic, p)])
            reading.state.flush()
            if reading.done is not None:  # a restore cut short (the partition was revoked)
                self._resolve(reading.done, RestoreFailed(
                    f"{self.topic}[{p}]: the restore was stopped (the partition moved)"))
        if future is not None:
            records = 0 if reading is None else reading.records
            start = 0 if reading is None else reading.start
            self._resolve(future, Restored(p, records, start, start + records, 0.0))

    def _renew(self, consumer: Consumer) -> Consumer:
        """A new consumer for every partition being read, from the offset after the last
        record each database holds: a restore made no progress for restore_stall_s (a
        librdkafka consumer can stand still for good after a broker restart)."""
        log.warning("changelog reader: no progress for %.0f s restoring partitions %s: a new "
                    "consumer", self._tuning.restore_stall_s,
                    sorted(p for p, r in self._reading.items() if r.target is not None))
        consumer.close()
        consumer = Consumer(self._conf)
        starts = {p: r.state.changelog_offset() for p, r in self._reading.items()}
        consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING if last is None
                                        else last + 1) for p, last in starts.items()])
        self._moved_at = time.monotonic()
        self.renewed += 1
        return consumer

    def _read(self, consumer: Consumer) -> bool:
        """Read and apply what the fetch has; whether anything moved (records applied, a
        restore's position advanced or done)."""
        msgs = consumer.consume(self._tuning.restore_batch,
                                timeout=self._tuning.restore_poll_s)
        by_partition: dict[int, list[tuple[int, bytes | None, bytes | None]]] = {}
        for msg in msgs:
            err = msg.error()
            if err is not None:
                if err.fatal() or err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                    raise RestoreFailed(f"{self.topic}: {err}")
                log.warning("changelog fetch: %s (retrying)", err)
                continue
            p = msg.partition()
            if p is None or p not in self._reading:
                continue
            by_partition.setdefault(p, []).append((msg.offset() or 0, msg.key(), msg.value()))
        moved = bool(by_partition)
        for p, records in by_partition.items():
            reading = self._reading[p]
            reading.records += reading.state.apply_changelog(records, reading.summary,
                                                             reading.written)
            self.applied += len(records)
        targeted = [p for p, r in self._reading.items() if r.target is not None]
        if not targeted:
            return moved
        for tp in consumer.position([TopicPartition(self.topic, p) for p in targeted]):
            reading = self._reading[tp.partition]
            if tp.offset > reading.position:
                reading.position = tp.offset
                moved = True
            if reading.target is not None and tp.offset >= reading.target:
                del self._reading[tp.partition]
                consumer.incremental_unassign([TopicPartition(self.topic, tp.partition)])
                self._finish(tp.partition, reading)
        return moved

    def _finish(self, p: int, reading: _Reading) -> None:
        reading.state.flush()
        if reading.done is not None:
            end = reading.target if reading.target is not None else reading.start
            self._resolve(reading.done, Restored(p, reading.records, reading.start, end,
                                                 time.monotonic() - reading.started))

    def _retrying(self, why: str) -> None:
        """Count a watermark question asked again, on the loop that owns the counters."""
        loop = self._loop
        if loop is None:
            return
        try:
            loop.call_soon_threadsafe(self.counters.update, {"restore.watermark_retries": 1})
        except RuntimeError:  # the loop is closed: the worker is gone
            self._stop.set()

    def _resolve(self, future: asyncio.Future[Restored],
                 result: Restored | BaseException) -> None:
        loop = self._loop
        if loop is None:
            return

        def settle() -> None:
            if future.done():
                return
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)

        try:
            loop.call_soon_threadsafe(settle)
        except RuntimeError:  # the loop is closed: the worker is gone
            self._stop.set()


def _build_summary(state: PartitionState) -> Summary:
    """The index and summary of a database that has rows but no summary (it was lost):
    built once from the rows' heads, and written."""
    summary = Summary()
    if state.is_empty():
        return summary
    puts: list[tuple[bytes, bytes]] = []
    for key, value in state.rows():
        head = head_or_none(value)
        if head.state is None and not head.timers:
            continue
        _, new = index_changes(key.decode(errors="replace"), (), head.timers)
        puts += new
        summary_move(summary, head_or_none(None), head, 0, len(new))
    state.write_index(puts, summary)
    log.info("timer index built from rows partition=%d timers=%d", state.partition,
             summary.armed)
    return summary


__all__ = ["ChangelogReader", "RestoreFailed", "Restored", "watermarks"]
