"""The worker's own consumer of its input partitions: librdkafka's fetch, not faust's.

faust keeps the consumer group (who owns which partition); the records of
the input topics are fetched here, by a
confluent-kafka consumer outside the group that reads exactly the
partitions the worker took over, from the positions stored with their
state.  Measured with the bench kit, faust's fetch and dispatch alone move
about 4,400 records a second on one core (`bench/faustpipe.py`), a fifth of
a worker's time per record at its drain rate; here librdkafka fetches and
decodes in its own C threads, and Python sees each record once.

What is fetched is only ever offered: the worker's gate (`inputs`) takes a
record only if it is the next one expected of its partition, so a record
delivered twice, late, or for a partition given up meanwhile changes
nothing, and one the fetch passed over is read directly before the record
that revealed the gap.  The reader is trusted with one thing only: that a
few offsets librdkafka passed over between two records it delivered in one
uninterrupted run of a partition (or below its position after the last one)
hold no records - the commit markers of transactional producers, one after
every transaction (`Fetched`, `inputs.MARKERS_MAX`).  Anything else it
passes over is read directly.

The consumer lives in one thread (librdkafka's calls are made from there
only); the event loop sends it the assignment and pauses as commands.  It
hands over one batch at a time and fetches the next only when the worker has
taken it, so what waits between the two is one batch.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from streams.polling import available
from streams.processor.gaps import input_record
from streams.processor.model import InputRecord, Role
from streams.processor.tuning import TUNING, Tuning

log = logging.getLogger(__name__)

_Command = tuple[str, Any]
_TP = tuple[str, int]


@dataclass
class Fetched:
    """What one turn of the fetch handed over.

    `passed`: (topic, partition, start, stop) - the fetch moved from `start`
    to `stop` without a record to deliver (a topic whose last records are
    followed by a transaction's commit marker).  Each record's `follows` says
    the same for the offsets just before it.
    """

    records: list[InputRecord] = field(default_factory=list)
    passed: list[tuple[str, int, int, int]] = field(default_factory=list)


@dataclass
class _Run:
    """One consumer thread's controls: a thread stopped never reads a later run's."""

    commands: queue.SimpleQueue[_Command] = field(default_factory=queue.SimpleQueue)
    taken: threading.Event = field(default_factory=threading.Event)  # last batch taken
    stop: threading.Event = field(default_factory=threading.Event)


class InputReader:
    """Fetches the assigned input partitions in a thread and hands the records to the loop."""

    def __init__(self, conf: Mapping[str, Any], roles: Mapping[str, Role],
                 linger: float = 0.0, tuning: Tuning = TUNING) -> None:
        """`linger`: the batch linger (`Settings.batch_linger`): the fetch waits at the
        broker for what comes meanwhile (`Tuning.input_fetch`)."""
        self._conf = {**conf, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                      "isolation.level": "read_committed", "enable.partition.eof": False,
                      **tuning.input_fetch(linger)}
        self._tuning = tuning
        self._roles = dict(roles)
        self._run: _Run | None = None
        self._assignment: dict[tuple[str, int], int] = {}
        self._batches: asyncio.Queue[Fetched] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.failure: BaseException | None = None

    # -- from the event loop -------------------------------------------------------
    def start(self) -> None:
        """Start reading (again, after `stop`: from the last assignment, nothing paused)."""
        if self._run is not None and not self._run.stop.is_set():
            return
        self._loop = asyncio.get_running_loop()
        self._run = run = _Run()
        run.commands.put(("assign", dict(self._assignment)))
        threading.Thread(target=self._read, args=(run,), name="xwait-inputs",
                         daemon=True).start()

    async def next_batch(self) -> Fetched:
        """The next batch fetched; the reader fetches again once `taken` is called."""
        return await self._batches.get()

    def taken(self) -> None:
        if self._run is not None:
            self._run.taken.set()

    def assign(self, starts: Mapping[tuple[str, int], int]) -> None:
        """Read exactly these (topic, partition)s, each from its offset; nothing paused."""
        self._assignment = dict(starts)
        self._command("assign", dict(starts))

    def pause(self, topic: str, partition: int) -> None:
        self._command("pause", (topic, partition))

    def resume(self, topic: str, partition: int) -> None:
        self._command("resume", (topic, partition))

    def renew(self) -> None:
        """Replace the consumer with a new one (then `assign` again): the fetch stopped
        delivering records that are there.  Seen after broker restarts: a librdkafka
        consumer assigned its partitions delivered nothing more, and the worker went on
        only by its direct reads, a thousand records every two seconds a partition."""
        self._command("renew", None)

    def commit(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """Commit these next offsets as the reader's consumer group's (for lag monitors:
        nobody starts from them; a failure is logged, never fatal)."""
        if offsets:
            self._command("commit", dict(offsets))

    def stop(self) -> None:
        if self._run is not None:
            self._run.stop.set()
            self._run.taken.set()

    def _command(self, what: str, arg: Any) -> None:
        if self._run is not None:
            self._run.commands.put((what, arg))

    # -- the thread ------------------------------------------------------------------
    def _read(self, run: _Run) -> None:
        consumer: Consumer | None = None
        last_error = 0.0
        # Per partition, the offset after the last record delivered, since nothing
        # (an assignment, a pause, a resume) touched the partition: within such
        # a run librdkafka delivers the records in order and passes over only
        # transaction markers and aborted records, so what lies between two of
        # them, or below its position, holds none.  Before the first record of
        # a run nothing is claimed: the gate reads any gap there directly.
        at: dict[_TP, int] = {}
        try:
            consumer = Consumer(self._conf)
            self._learn_topics(consumer)
            assigned = False
            while not run.stop.is_set():
                consumer, assigned = self._apply_commands(run, consumer, assigned, at)
                if not assigned:
                    time.sleep(self._tuning.read_poll_s)
                    continue
                fetched = Fetched()
                msgs = available(consumer, self._tuning.read_batch, self._tuning.read_poll_s)
                for msg in msgs:
                    err = msg.error()
                    if err is not None:
                        if err.fatal():
                            raise RuntimeError(f"input consumer: {err}")
                        if time.monotonic() - last_error > self._tuning.error_log_every_s:
                            last_error = time.monotonic()
                            log.warning("input fetch: %s (retrying)", err)
                        continue
                    topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
                    role = self._roles.get(topic or "")
                    if role is None or topic is None or partition is None or offset is None:
                        continue
                    tp = (topic, partition)
                    fetched.records.append(input_record(role, msg, at.get(tp)))
                    at[tp] = offset + 1
                fetched.passed = _passed(consumer, at)
                if fetched.records or fetched.passed:
                    self._hand_over(run, fetched)
        except BaseException as exc:  # noqa: BLE001 - reported to the worker, which stops
            self.failure = exc
            log.exception("the input reader stopped")
            self._hand_over(run, Fetched())
        finally:
            if consumer is not None:
                consumer.close()

    def _learn_topics(self, consumer: Consumer) -> None:
        """Have librdkafka know the input topics' partitions before the first assignment.

        The consumer is made when the worker starts and assigned its
        partitions at the takeover, moments later.  Topics it first hears of
        in an assignment wait for its next metadata refresh, then their first
        fetch: the first records came 0.5-1.2 s after the takeover.  Asked
        for now, they come within a few milliseconds of it.  A failure only
        costs that wait (the assignment learns the topics anyway).
        """
        for topic in self._roles:
            try:
                consumer.list_topics(topic, timeout=self._tuning.metadata_timeout_s)
            except KafkaException as exc:
                log.info("input reader: metadata of %s not read ahead: %s", topic, exc)
                return

    def _hand_over(self, run: _Run, fetched: Fetched) -> None:
        if self._loop is None:
            return
        run.taken.clear()
        try:
            self._loop.call_soon_threadsafe(self._batches.put_nowait, fetched)
        except RuntimeError:  # the loop is closed: the worker is gone
            run.stop.set()
            return
        run.taken.wait()

    def _apply_commands(self, run: _Run, consumer: Consumer, assigned: bool,
                        at: dict[_TP, int]) -> tuple[Consumer, bool]:
        while True:
            try:
                what, arg = run.commands.get_nowait()
            except queue.Empty:
                return consumer, assigned
            if what == "renew":  # an `assign` follows
                consumer.close()
                consumer = Consumer(self._conf)
                assigned = False
                at.clear()
                log.warning("input consumer replaced: its fetch did not deliver records that "
                            "are there")
            elif what == "assign":
                tps = [TopicPartition(t, p, o) for (t, p), o in arg.items()]
                consumer.assign(tps)
                at.clear()
                if tps:
                    consumer.resume(tps)  # a pause must not outlive the assignment it was for
                assigned = bool(tps)
            elif what == "commit":
                try:
                    consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in arg.items()],
                                    asynchronous=True)
                except KafkaException as exc:
                    log.info("input offsets not committed to the group: %s", exc)
            elif what in ("pause", "resume") and assigned:
                at.pop(arg, None)  # see `_read`: trusted only between two records
                try:
                    (consumer.pause if what == "pause" else consumer.resume)(
                        [TopicPartition(*arg)])
                except KafkaException as exc:  # a partition no longer assigned
                    log.info("input %s %s[%d] ignored: %s", what, arg[0], arg[1], exc)


def _passed(consumer: Consumer, at: dict[_TP, int]) -> list[tuple[str, int, int, int]]:
    """Partitions whose fetch position moved past `at` without delivering a record.

    A read_committed consumer passes over transaction markers and aborted
    records: its position moves, and nothing is delivered.
    """
    out: list[tuple[str, int, int, int]] = []
    if not at:
        return out
    for tp in consumer.position([TopicPartition(t, p) for t, p in at]):
        key = (tp.topic, tp.partition)
        if tp.offset > at[key]:  # a position not yet known is negative
            out.append((tp.topic, tp.partition, at[key], tp.offset))
            at[key] = tp.offset
    return out


__all__ = ["Fetched", "InputReader"]
