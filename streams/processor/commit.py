"""The commit protocol: how a batch's effects become durable, in which order, and why.

A batch (`streams.processor.batch`) holds, per partition, the rows it
changes and the input positions after it, plus the records it produces.
The positions are the worker's own input offsets: stored with the state,
they are where the next owner of the partition starts (`positions`,
`inputs`).  Two guarantees, one order of steps each.

at_least_once (`AtLeastOnce`, one idempotent confluent-kafka producer):

    1. produce the batch's output records (actions, outcomes, rejections,
       forwards of misrouted input);
    2. wait until the broker has acknowledged every one of them;
    3. produce the changelog: each partition's changed rows, then its
       positions record, in that partition's changelog partition;
    4. wait until every changelog record is acknowledged;
    5. write each partition's rows, positions and the changelog offset of
       its last record to RocksDB in one atomic write batch (`store`);
    6. only then: timer index, census and stream time in memory, and the
       consumer group's offsets (informational: nobody starts from them).

    A crash, or a failed step, before 2 completes: the rows and positions are
    unchanged everywhere, so the inputs are decided again (the outputs that
    made it are duplicates with the same deterministic ids).  Between 2 and
    5: the changelog holds some, all or none of the batch's records, in
    order (the idempotent producer keeps a partition's order); a restart
    restores what it holds from faust's persisted changelog offset on.  A
    row that reflects an input (its `seen` offsets) skips it when it is read
    again - its outputs were acknowledged in step 2 before the row existed
    anywhere - and the positions record, last of its partition, means the
    whole partition's batch is there.  After 5: nothing is read again.
    So no input is ever skipped, and no state exists whose outputs are not
    in Kafka.

exactly_once (`ExactlyOnce`, one transactional producer per partition,
transactional.id `<app id>-<partition>`):

    1. begin a transaction;
    2. produce the partition's outputs, changed rows and positions record;
    3. commit the transaction;
    4. write the rows, positions and changelog offset to RocksDB, as above;
    5. memory, as above.

    A crash before 3 completes aborts the transaction: read_committed
    consumers (downstream, and the workers restoring the changelog) never
    see any of it, and the batch is decided again.  After 3, outputs, state
    and positions are committed together, so each outcome and action is seen
    once by a read_committed consumer.  A worker that takes a partition over
    initialises its transactional id first, which fences the previous owner
    (a zombie paused past its session timeout): its next produce or commit
    fails and it stops.  Transactional ids stable per input partition are the
    classic fencing of KIP-98; partitions are co-partitioned across the four
    input topics, so one id covers a partition's requests, replies, commands
    and timers.

Any failure to create a producer, produce, or get an acknowledgement raises
`CommitFailed` before step 5: the worker stops with the error, and its
inputs are read again from the stored positions when it is fixed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from streams.errors import XwaitError
from streams.processor.batch import Batch, PartitionBatch
from streams.processor.model import Role
from streams.processor.positions import POSITIONS_KEY, encode_positions

log = logging.getLogger(__name__)

# How long librdkafka keeps retrying a record before it reports it failed,
# and how long a commit waits for acknowledgements before the worker gives up
# and stops (its inputs are decided again on restart).  The wait is the
# longer, so a record still being retried fails with librdkafka's reason.
MESSAGE_TIMEOUT_MS = 300_000
FLUSH_TIMEOUT_S = MESSAGE_TIMEOUT_MS / 1000 + 30
# How long a transaction's commit may take (librdkafka retries within it);
# longer than the broker's default transaction.timeout.ms would only see the
# transaction aborted by the broker first.
TRANSACTION_TIMEOUT_S = 60.0
# Records produced while librdkafka's queue is full wait this long between tries.
_QUEUE_FULL_WAIT_S = 0.002


class CommitFailed(XwaitError):
    """A batch could not be made durable: the worker must stop before any offset moves."""


ProducerFactory = Callable[[dict[str, Any]], Any]


class _Deliveries:
    """Delivery reports of one flush: errors, and the last changelog offset per partition."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.changelog_offsets: dict[int, int] = {}

    def output(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            self.errors.append(f"{msg.topic()}[{msg.partition()}]: {err}")

    def changelog(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            self.errors.append(f"{msg.topic()}[{msg.partition()}]: {err}")
            return
        p, offset = msg.partition(), msg.offset()
        if offset > self.changelog_offsets.get(p, -1):
            self.changelog_offsets[p] = offset


def _produce(producer: Any, topic: str, key: bytes, value: bytes | None,
             partition: int | None, on_delivery: Callable[[KafkaError | None, Any], None]
             ) -> None:
    """Queue one record, waiting (blocking, in a worker thread) while the queue is full."""
    extra = {} if partition is None else {"partition": partition}
    while True:
        try:
            producer.produce(topic, value=value, key=key, on_delivery=on_delivery, **extra)
            return
        except BufferError:
            producer.poll(_QUEUE_FULL_WAIT_S)


class AtLeastOnce:
    """Steps 1-4 of at_least_once (see the module docstring) with one idempotent producer."""

    def __init__(self, conf: dict[str, Any], topics: dict[Role, str], changelog: str,
                 make_producer: ProducerFactory = Producer) -> None:
        self._conf = {**conf, "enable.idempotence": True, "acks": "all",
                      "message.timeout.ms": MESSAGE_TIMEOUT_MS}
        self._topics = topics
        self._changelog = changelog
        self._make_producer = make_producer
        self._producer: Any = None
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="xwait-commit")

    def _ensure_producer(self) -> Any:
        if self._producer is None:
            try:
                self._producer = self._make_producer(self._conf)
            except KafkaException as exc:
                raise CommitFailed(f"cannot create the output producer: {exc}") from exc
        return self._producer

    async def assign(self, partitions: Iterable[int]) -> None:
        self._ensure_producer()  # fail at assignment, before any record is decided

    async def revoke(self, partitions: Iterable[int]) -> None:
        return None

    async def commit(self, batch: Batch) -> dict[int, int]:
        """Steps 1-4; the changelog offset of each partition's last record."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._commit, batch)

    def _commit(self, batch: Batch) -> dict[int, int]:
        producer = self._ensure_producer()
        outputs = _Deliveries()
        for part in batch.parts.values():
            for out in part.out:
                _produce(producer, self._topics[out.role], out.key, out.value, out.partition,
                         outputs.output)
        if outputs.errors or any(p.out for p in batch.parts.values()):
            self._flush(producer, outputs, "output")
        changelog = _Deliveries()
        for part in batch.parts.values():
            for key, value in _changelog_records(part):
                _produce(producer, self._changelog, key, value, part.partition,
                         changelog.changelog)
        self._flush(producer, changelog, "changelog")
        return changelog.changelog_offsets

    @staticmethod
    def _flush(producer: Any, deliveries: _Deliveries, what: str) -> None:
        try:
            remaining = producer.flush(FLUSH_TIMEOUT_S)
        except KafkaException as exc:
            raise CommitFailed(f"{what} records: {exc}") from exc
        if deliveries.errors:
            raise CommitFailed(f"{len(deliveries.errors)} {what} records were refused by Kafka "
                               f"(first: {deliveries.errors[0]}); nothing of the batch is "
                               "stored and its inputs will be decided again")
        if remaining:
            raise CommitFailed(f"{remaining} {what} records were not acknowledged within "
                               f"{FLUSH_TIMEOUT_S:.0f}s; nothing of the batch is stored")

    async def close(self) -> None:
        if self._producer is not None:
            await asyncio.get_running_loop().run_in_executor(self._executor,
                                                             self._producer.flush, 10.0)
        self._executor.shutdown(wait=False)


class ExactlyOnce:
    """Steps 1-3 of exactly_once: a transaction per partition and batch."""

    def __init__(self, conf: dict[str, Any], topics: dict[Role, str], changelog: str,
                 app_id: str, partitions: int, make_producer: ProducerFactory = Producer
                 ) -> None:
        self._conf = {**conf, "enable.idempotence": True, "acks": "all",
                      "transaction.timeout.ms": int(TRANSACTION_TIMEOUT_S * 1000)}
        self._topics = topics
        self._changelog = changelog
        self._app_id = app_id
        self._make_producer = make_producer
        self._producers: dict[int, Any] = {}
        # Transactional ids being taken: the inits of an assignment cut short (a
        # revocation cancelled its takeover) go on in their threads; see `_settle`.
        self._initing: dict[int, Future[Any]] = {}
        self._executor = ThreadPoolExecutor(max(1, partitions), thread_name_prefix="xwait-tx")

    def transactional_id(self, partition: int) -> str:
        return f"{self._app_id}-{partition}"

    async def assign(self, partitions: Iterable[int]) -> None:
        """Take the partitions' transactional ids, fencing whoever held them."""
        await self._settle()
        new = [p for p in partitions if p not in self._producers]
        started = {p: self._executor.submit(self._init, p) for p in new}
        self._initing.update(started)
        made = await asyncio.gather(*(asyncio.wrap_future(f) for f in started.values()))
        for p in new:
            self._initing.pop(p, None)
        self._producers.update(zip(new, made, strict=True))

    async def _settle(self) -> None:
        """Wait for the inits of an assignment cut short; drop what they made.

        Cancelling a takeover does not stop `init_transactions` in its thread.
        Left running, it took the transactional id after the partition's next
        owner had (that owner's first commit failed _FENCED and the worker
        stopped), or after this worker's own next takeover of the partition
        had: two workers starting together both stopped that way.  So a
        revocation, and any later assignment, waits for them first: the
        partition's next owner then fences what they made.
        """
        pending = list(self._initing.values())
        self._initing.clear()
        if pending:
            await asyncio.gather(*(asyncio.wrap_future(f) for f in pending),
                                 return_exceptions=True)

    def _init(self, partition: int) -> Any:
        conf = {**self._conf, "transactional.id": self.transactional_id(partition)}
        try:
            producer = self._make_producer(conf)
            producer.init_transactions(TRANSACTION_TIMEOUT_S)
        except KafkaException as exc:
            raise CommitFailed(f"cannot start the transactional producer "
                               f"{conf['transactional.id']}: {exc}") from exc
        return producer

    async def revoke(self, partitions: Iterable[int]) -> None:
        await self._settle()
        for p in partitions:
            self._producers.pop(p, None)  # its open transaction, if any, was committed

    async def commit(self, batch: Batch) -> dict[int, int]:
        loop = asyncio.get_running_loop()
        parts = list(batch.parts.values())
        for part in parts:
            if part.partition not in self._producers:
                raise CommitFailed(f"no transactional producer for partition {part.partition}")
        results = await asyncio.gather(*(
            loop.run_in_executor(self._executor, self._commit_one,
                                 self._producers[part.partition], part)
            for part in parts))
        return {p: o for offsets in results for p, o in offsets.items()}

    def _commit_one(self, producer: Any, part: PartitionBatch) -> dict[int, int]:
        deliveries = _Deliveries()
        try:
            producer.begin_transaction()
            for out in part.out:
                _produce(producer, self._topics[out.role], out.key, out.value, out.partition,
                         deliveries.output)
            for key, value in _changelog_records(part):
                _produce(producer, self._changelog, key, value, part.partition,
                         deliveries.changelog)
            producer.commit_transaction(TRANSACTION_TIMEOUT_S)
        except KafkaException as exc:
            _abort(producer, exc)
            raise CommitFailed(f"the transaction of partition {part.partition} failed: "
                               f"{exc}; nothing of it is visible to read_committed consumers"
                               ) from exc
        if deliveries.errors:
            raise CommitFailed(f"partition {part.partition}: {deliveries.errors[0]}")
        return deliveries.changelog_offsets

    async def close(self) -> None:
        self._producers.clear()
        self._executor.shutdown(wait=False)


def _abort(producer: Any, exc: KafkaException) -> None:
    err = exc.args[0] if exc.args else None
    if isinstance(err, KafkaError) and err.txn_requires_abort():
        try:
            producer.abort_transaction(TRANSACTION_TIMEOUT_S)
        except KafkaException:
            log.exception("aborting the transaction failed too")


def _changelog_records(part: PartitionBatch) -> list[tuple[bytes, bytes | None]]:
    """The partition's changed rows (None: a tombstone), then its positions record, last."""
    return [*part.rows.items(), (POSITIONS_KEY, encode_positions(part.positions))]


Committer = AtLeastOnce | ExactlyOnce

__all__ = ["FLUSH_TIMEOUT_S", "MESSAGE_TIMEOUT_MS", "AtLeastOnce", "CommitFailed", "Committer",
           "ExactlyOnce"]
