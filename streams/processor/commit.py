"""The commit protocol: how a batch's effects become durable, in which order, and why.

A batch (`streams.processor.batch`) holds, per partition, the rows it
changes and the input positions after it, plus the records it produces.
The positions are the worker's own input offsets: stored with the state,
they are where the next owner of the partition starts (`positions`,
`inputs`).  Under both guarantees a partition's state reaches its changelog
partition only through a transaction of that partition's own transactional
producer (transactional.id `<app id>-<partition>`): that is what fences a
worker that lost the partition (below).  The guarantees differ in where the
outputs go.

at_least_once (`AtLeastOnce`: one idempotent producer for the outputs, a
transactional producer per partition for the state):

    1. produce the batch's output records (actions, outcomes, rejections,
       forwards of misrouted input) on the idempotent producer;
    2. wait until the broker has acknowledged every one of them; meanwhile,
       per partition, begin a transaction and produce its changed rows, then
       its positions record, in its changelog partition (invisible to a
       read_committed reader until step 3, and aborted if it never comes);
    3. once step 2 is done, and only then, commit each partition's
       transaction;
    4. write each committed partition's rows, positions and the changelog
       offset of its last record to RocksDB in one atomic write batch
       (`state.PartitionState.write`, called by the applier);
    5. only then: timer index, census and stream time in memory, and the
       consumer group's offsets (informational: nobody starts from them).

    A crash, or a failed step, before 2 completes: the rows and positions are
    unchanged everywhere (a transaction begun meanwhile is never committed:
    the worker stops, and the partition's next owner fences and aborts it,
    F1 below), so the inputs are decided again (the outputs that
    made it are duplicates with the same deterministic ids).  Between 2 and
    the commit of 3: the transaction is aborted (by the coordinator, at the
    latest when the partition's next owner fences it), restores read
    committed records only, and the inputs are decided again: duplicates
    again, nothing lost, since every output of the batch was acknowledged
    before its state existed anywhere.  After 3, before 4: a restart restores
    the committed transaction from the database's changelog offset on.
    After 4: nothing is read again.  So no input is ever skipped, and no
    state exists whose outputs are not in Kafka.

exactly_once (`ExactlyOnce`: one transactional producer per partition):

    1. begin a transaction;
    2. produce the partition's outputs, changed rows and positions record;
    3. commit the transaction;
    4. write the rows, positions and changelog offset to RocksDB, as above;
    5. memory, as above.

    A crash before 3 completes aborts the transaction: read_committed
    consumers (downstream, and the workers restoring the changelog) never
    see any of it, and the batch is decided again.  After 3, outputs, state
    and positions are committed together, so each outcome and action is seen
    once by a read_committed consumer.

A transaction that fails without a crash (both guarantees) is tried again
in the worker, on a new producer for the partition (which fences the old
one), when its abort was acknowledged (`_Transactions._transaction`), or,
while its commit was never sent, refused because the coordinator holds no
open transaction or not finished in time (`transactions.abort`; the new
producer's fence aborts it): then none of it is or will be visible, and
producing the same records again duplicates nothing.  (A producer of
librdkafka's stood still after a broker restart, its partition's leader "not
found in cache", until its records expired with the transaction; the worker
used to stop on that.  Now records queued with no delivery report for
`Tuning.stall_s` are purged, which fails the transaction sooner:
`transactions.commit_transaction`.)  Otherwise the transaction's fate is the
coordinator's to settle and the worker stops.

Fencing: why a worker that lost a partition cannot corrupt it
--------------------------------------------------------------

A worker frozen past its session timeout (a GC pause, a VM or container
freeze, SIGSTOP) is expelled from the group and its partitions given to
another; when it wakes it still believes it owns them (a zombie) until its
next heartbeat says otherwise, and whatever it had decided or queued goes
on to Kafka.  The argument, step by step:

    F1. A takeover's first step initialises the partition's transactional
        id (`assign`, before the restore reads anything): the coordinator
        aborts the transaction the previous owner left open and bumps the
        id's epoch, so every later produce, commit or abort of the previous
        owner's producer fails `_FENCED` (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH
        at the broker).
    F2. So in the changelog partition every committed transaction of the old
        owner comes before the fence, and every one of the new owner after
        it: read_committed, the log is the old owner's prefix then the new
        owner's writes, never interleaved (the log cleaner drops aborted
        records, so compaction keeps no zombie row either).
    F3. The new owner restores up to the last stable offset read after the
        fence (`takeover`): everything the old owner ever committed.
    F4. A database is written only after its partition's transaction
        committed (step 4 above), with the offset of that transaction's last
        record.  A zombie's commit after the fence fails, so it writes
        nothing: its database stays a prefix of the log (rows and offset of
        what it committed before the fence), and a later restore from its
        offset reads exactly the records that follow, the new owner's.  A
        restore never starts past another owner's writes.
    F5. A fenced commit is not a failure of the worker (`Committed.fenced`):
        nothing of that partition's batch is stored, the partition is given
        up (`takeover.Ownership.lose`), its inputs are read again by its
        owner, and the worker goes on deciding its other partitions and
        whatever the group gives it next.
    F6. Outputs.  Under exactly_once a zombie's outputs are in its fenced
        transaction: aborted, never seen by a read_committed consumer.  Under
        at_least_once they are produced before the state's transaction
        (steps 1-2) and may be seen: decided from the zombie's state, which
        is a prefix of the log (F4), on the same inputs in the same order
        (positions, the sequencer's broker-time order), by the same pure
        rules, they are the records the owner produces again for those
        inputs, with the same deterministic ids: duplicates, not different
        outcomes.  (As after any redecision under at_least_once, a reply
        whose commit took longer than the commit grace across its deadline
        may be decided either way: `XWAIT_COMMIT_GRACE`.)

Any other failure to create a producer, produce, or get an acknowledgement
raises `CommitFailed` before step 4: the worker stops with the error, and its
inputs are read again from the stored positions when it is fixed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException, Producer

from streams.errors import XwaitError
from streams.kafka_errors import kafka_error
from streams.processor.batch import Batch, PartitionBatch
from streams.processor.context import WorkerContext
from streams.processor.positions import POSITIONS_KEY, encode_positions
from streams.processor.transactions import (
    TIMED_OUT,
    UNDELIVERED,
    Aborted,
    Deliveries,
    Fenced,
    Steps,
    abort,
    commit_transaction,
    is_fenced,
    produce,
)

log = logging.getLogger(__name__)


class CommitFailed(XwaitError):
    """A batch could not be made durable: the worker must stop before any offset moves."""


@dataclass(frozen=True)
class Committed:
    """What a commit made durable: per partition, the changelog offset of its last record.

    `fenced`: partitions whose transaction a newer owner fenced (F5 of the
    module docstring).  Nothing of their part of the batch is visible to a
    read_committed consumer or may be stored; the worker gives them up.
    """

    offsets: dict[int, int]
    fenced: frozenset[int] = frozenset()


ProducerFactory = Callable[[dict[str, Any]], Any]


def _await_a_broker(producer: Any, topic: str, timeout_s: float) -> None:
    """Return once the producer is connected to a broker it learned of, or after `timeout_s`.

    A librdkafka producer asked to `init_transactions` before it holds such a
    connection (its first answer comes from the bootstrap address) finds no
    coordinator and asks again 500 ms later: five of eight producers made
    together for a takeover took 0.51 s to initialise, three 0.05 s (the
    takeover's fence step, at every start).  A metadata answer that names its
    broker (`orig_broker_id` 0 or above, where a bootstrap connection says -1)
    shows the connection is up: waited for that way, all eight took 0.07 s.
    Only a head start: a broker that does not answer is `init_transactions`'s
    to wait for, as before.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if producer.list_topics(topic, timeout=timeout_s).orig_broker_id >= 0:
                return
        except KafkaException:
            return
        time.sleep(0.01)


class _Transactions:
    """A transactional producer per owned partition: its state, and with `outputs` its
    output records too, one transaction per partition and batch (F1-F5)."""

    def __init__(self, ctx: WorkerContext, conf: dict[str, Any],
                 make_producer: ProducerFactory, *, outputs: bool) -> None:
        tuning = ctx.tuning
        self._conf = {**conf, "enable.idempotence": True, "acks": "all",
                      "transaction.timeout.ms": int(tuning.transaction_timeout_s * 1000)}
        self._topics = dict(ctx.topics)
        self._changelog = ctx.changelog
        self._app_id = ctx.settings.app_id
        self._outputs = outputs
        self._make_producer = make_producer
        self._producers: dict[int, Any] = {}
        self.steps = Steps(tuning)
        # "transactions.retried": tries after one proven never committed (`_commit_one`);
        # "transactions.fenced": partitions whose commit a newer owner fenced.
        self.counters = ctx.counters
        # Transactional ids being taken: the inits of an assignment cut short (a
        # revocation cancelled its takeover) go on in their threads; see `_settle`.
        self._initing: dict[int, Future[Any]] = {}
        self._executor = ThreadPoolExecutor(max(1, ctx.settings.partitions),
                                            thread_name_prefix="xwait-tx")

    def transactional_id(self, partition: int) -> str:
        return f"{self._app_id}-{partition}"

    async def assign(self, partitions: Iterable[int]) -> None:
        """Take the partitions' transactional ids, fencing whoever held them (F1)."""
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
        owner had (that owner's first commit failed _FENCED), or after this
        worker's own next takeover of the partition had: two workers starting
        together both lost partitions that way.  So a revocation, and any later
        assignment, waits for them first: the partition's next owner then
        fences what they made.
        """
        pending = list(self._initing.values())
        self._initing.clear()
        if pending:
            await asyncio.gather(*(asyncio.wrap_future(f) for f in pending),
                                 return_exceptions=True)

    def _init(self, partition: int) -> Any:
        """A producer holding the partition's transactional id (fencing whoever held it).

        A coordinator that does not answer is asked again, each try a step of
        its own, for up to `Tuning.broker_away_s`: in a busy CI round a broker
        took 149 s to come back, and a worker that gave up after one try (60 s)
        stopped with 565 waits open a moment before it was back.  Any other
        error stops the worker at once, as does that long without an answer.
        """
        tid = self.transactional_id(partition)
        tuning = self.steps.tuning
        began = time.monotonic()
        self.steps.begin()
        try:
            producer = self._make_producer({**self._conf, "transactional.id": tid})
            _await_a_broker(producer, self._changelog, tuning.metadata_timeout_s)
        except KafkaException as exc:
            raise CommitFailed(f"cannot start the transactional producer {tid}: {exc}") from exc
        while True:
            self.steps.begin()
            try:
                producer.init_transactions(tuning.transaction_timeout_s)
                return producer
            except KafkaException as exc:
                err = kafka_error(exc)
                away = time.monotonic() - began
                unanswered = err is not None and not err.fatal() and (
                    err.retriable() or err.code() == TIMED_OUT)
                if not unanswered or away >= tuning.broker_away_s:
                    raise CommitFailed(f"cannot start the transactional producer {tid} "
                                       f"(tried for {away:.0f} s): {exc}") from exc
                log.warning("the transactional producer %s got no answer for %.0f s (%s): "
                            "asking again, for up to %.0f s in all", tid, away, err,
                            tuning.broker_away_s)

    async def revoke(self, partitions: Iterable[int]) -> None:
        await self._settle()
        for p in partitions:
            self._producers.pop(p, None)  # its open transaction, if any, was committed

    async def commit(self, batch: Batch, after: Future[None] | None = None) -> Committed:
        """Each partition's transaction; with `after`, each commits only once `after` is
        done, and not if it failed (its error is raised: the worker stops)."""
        loop = asyncio.get_running_loop()
        parts = list(batch.parts.values())
        for part in parts:
            if part.partition not in self._producers:
                raise CommitFailed(f"no transactional producer for partition {part.partition}")
        results = await asyncio.gather(*(
            loop.run_in_executor(self._executor, self._commit_one,
                                 self._producers[part.partition], part, after)
            for part in parts))
        offsets: dict[int, int] = {}
        fenced: set[int] = set()
        for part, (got, producer, attempt) in zip(parts, results, strict=True):
            self.counters["transactions.retried"] += attempt - 1
            if got is None:
                fenced.add(part.partition)
                self._producers.pop(part.partition, None)  # fenced for good
                continue
            self._producers[part.partition] = producer  # a new one if the first was aborted
            offsets.update(got)
        self.counters["transactions.fenced"] += len(fenced)
        return Committed(offsets, frozenset(fenced))

    def _commit_one(self, producer: Any, part: PartitionBatch, after: Future[None] | None
                    ) -> tuple[dict[int, int] | None, Any, int]:
        """The partition's transaction, tried again after one proven never committed.

        The producer that committed it is returned (the next batch uses it),
        with the try that did; no offsets when a newer owner fenced it.
        """
        attempts = self.steps.tuning.transaction_attempts
        for attempt in range(1, attempts + 1):
            try:
                return self._transaction(producer, part, after), producer, attempt
            except Fenced as fenced:
                producer.purge(in_queue=True, in_flight=True, blocking=False)  # never sent
                log.warning("partition %d moved to another worker: its transaction was "
                            "fenced (%s); nothing of its batch is stored, and its owner "
                            "decides its inputs", part.partition, fenced)
                return None, producer, attempt
            except Aborted as aborted:
                if attempt == attempts:
                    raise CommitFailed(
                        f"the transaction of partition {part.partition} failed "
                        f"{attempt} times (last: {aborted}); each was aborted, so "
                        "nothing of it is visible to read_committed consumers") from aborted
                log.warning("the transaction of partition %d failed and was aborted (%s); "
                            "trying it again on a new producer (%d of %d)", part.partition,
                            aborted, attempt + 1, attempts)
                producer = self._init(part.partition)  # fences the old one
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def _transaction(self, producer: Any, part: PartitionBatch, after: Future[None] | None
                     ) -> dict[int, int]:
        """One try; `Aborted` when it failed and is proven never committed (`transactions.abort`),
        `Fenced` when a newer producer took the transactional id.  The commit waits for
        `after` (at_least_once: the batch's outputs acknowledged, step 2); if that
        failed, its error is raised and the transaction is left open, uncommitted.

        An acknowledged abort means the transaction was not committed:
        librdkafka takes an abort only in a transaction that has not begun
        to commit or whose commit failed before the coordinator committed it
        (`txn_requires_abort`), refuses one while a commit is in flight, and
        makes an EndTxn(commit) that succeeds after a local failure a fatal
        error.  A commit still in flight when its time is up, or any other
        fatal error, stops the worker instead: its restart restores whatever
        the coordinator committed.
        """
        deliveries = Deliveries()
        committing = False
        wait = self.steps.tuning.queue_full_wait_s
        try:
            producer.begin_transaction()
            if self._outputs:
                for out in part.out:
                    produce(producer, self._topics[out.role], out.key, out.value,
                            out.partition, deliveries.output, wait, out.headers)
            for key, value in _changelog_records(part):
                produce(producer, self._changelog, key, value, part.partition,
                        deliveries.changelog, wait)
            if after is not None:
                after.result()  # CommitFailed: not a KafkaException, the worker stops
            committing = True
            commit_transaction(producer, deliveries, self.steps)
        except KafkaException as exc:
            err = kafka_error(exc)
            if is_fenced(producer, err):
                raise Fenced(str(exc)) from exc
            may_abort = not committing or (err is not None and err.txn_requires_abort())
            # Its EndTxn(commit) was never sent: it failed before the commit began,
            # or librdkafka found records failed at the commit's flush, which comes
            # before the EndTxn (_INCONSISTENT, "N message(s) failed delivery").
            unsent = not committing or (err is not None and err.code() == UNDELIVERED)
            if may_abort and not unsent:
                # Or a record of it failed delivery (the reports served now): librdkafka
                # sends the EndTxn(commit) only once every record is delivered.  Rows
                # that timed out while at_least_once waited for its outputs (the broker
                # down 72 s) made the commit fail _TIMED_OUT, "N message(s) timed out",
                # the transaction abortable since before the commit began.
                producer.poll(0)
                unsent = bool(deliveries.errors)
            if may_abort and abort(producer, err, unsent, self.steps):
                raise Aborted(str(exc)) from exc
            raise CommitFailed(f"the transaction of partition {part.partition} failed: "
                               f"{exc}; read_committed consumers see it only if the "
                               "transaction coordinator committed it") from exc
        if deliveries.errors:
            raise CommitFailed(f"partition {part.partition}: {deliveries.errors[0]}")
        return deliveries.changelog_offsets

    async def close(self) -> None:
        self._producers.clear()
        self._executor.shutdown(wait=False)


class AtLeastOnce:
    """at_least_once (see the module docstring): the outputs on one idempotent producer,
    acknowledged first; then each partition's state in a transaction of its own."""

    def __init__(self, ctx: WorkerContext, conf: dict[str, Any],
                 make_producer: ProducerFactory = Producer,
                 make_output_producer: ProducerFactory = Producer) -> None:
        tuning = ctx.tuning
        self._conf = {**conf, "enable.idempotence": True, "acks": "all",
                      "message.timeout.ms": int(tuning.message_timeout_s * 1000)}
        self._topics = dict(ctx.topics)
        self._make_producer = make_output_producer
        self._producer: Any = None
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="xwait-commit")
        self.state = _Transactions(ctx, conf, make_producer, outputs=False)
        self.steps = self.state.steps
        self.counters = ctx.counters

    def _ensure_producer(self) -> Any:
        if self._producer is None:
            try:
                self._producer = self._make_producer(self._conf)
            except KafkaException as exc:
                raise CommitFailed(f"cannot create the output producer: {exc}") from exc
        return self._producer

    async def assign(self, partitions: Iterable[int]) -> None:
        self._ensure_producer()  # fail at assignment, before any record is decided
        await self.state.assign(partitions)

    async def revoke(self, partitions: Iterable[int]) -> None:
        await self.state.revoke(partitions)

    async def commit(self, batch: Batch) -> Committed:
        """Steps 1-3: the outputs produced; the partitions' transactions begun while the
        broker acknowledges them, and committed once it has (one round trip sooner than
        beginning them after: a batch's latency under live load is a few round trips)."""
        if not any(part.out for part in batch.parts.values()):
            return await self.state.commit(batch)
        acknowledged = self._executor.submit(self._produce_outputs, batch)
        try:
            return await self.state.commit(batch, after=acknowledged)
        finally:
            # The outputs' own error first, when they failed (every transaction waited
            # on them and raised the same one).
            await asyncio.wrap_future(acknowledged)

    def _produce_outputs(self, batch: Batch) -> None:
        producer = self._ensure_producer()
        tuning = self.steps.tuning
        outputs = Deliveries()
        for part in batch.parts.values():
            for out in part.out:
                produce(producer, self._topics[out.role], out.key, out.value, out.partition,
                        outputs.output, tuning.queue_full_wait_s, out.headers)
        self.steps.begin()
        try:
            remaining = producer.flush(tuning.flush_timeout_s)
        except KafkaException as exc:
            raise CommitFailed(f"output records: {exc}") from exc
        if outputs.errors:
            raise CommitFailed(f"{len(outputs.errors)} output records were refused by Kafka "
                               f"(first: {outputs.errors[0]}); nothing of the batch is "
                               "stored and its inputs will be decided again")
        if remaining:
            raise CommitFailed(f"{remaining} output records were not acknowledged within "
                               f"{tuning.flush_timeout_s:.0f}s; nothing of the batch is "
                               "stored")

    async def close(self) -> None:
        if self._producer is not None:
            await asyncio.get_running_loop().run_in_executor(self._executor,
                                                             self._producer.flush, 10.0)
        self._executor.shutdown(wait=False)
        await self.state.close()


class ExactlyOnce(_Transactions):
    """exactly_once: outputs, rows and positions in one transaction per partition and batch."""

    def __init__(self, ctx: WorkerContext, conf: dict[str, Any],
                 make_producer: ProducerFactory = Producer) -> None:
        super().__init__(ctx, conf, make_producer, outputs=True)


def _changelog_records(part: PartitionBatch) -> list[tuple[bytes, bytes | None]]:
    """The partition's changed rows (None: a tombstone), then its positions record, last."""
    return [*part.rows.items(), (POSITIONS_KEY, encode_positions(part.positions))]


Committer = AtLeastOnce | ExactlyOnce

__all__ = ["AtLeastOnce", "CommitFailed", "Committed", "Committer", "ExactlyOnce"]
