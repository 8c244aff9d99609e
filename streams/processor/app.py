"""The faust application: one stateful agent, the waits table, the punctuator.

Per input record the agent (concurrency 1: faust issue #606 loses events at
higher concurrency) runs `RecordHandler.handle` and applies the result:

    1. table write (`waits[key] = row` or delete): faust sends the changelog
       record first, then writes RocksDB;
    2. timer index update (in memory, derived from the table);
    3. sends to outcomes / actions / rejected (or the forward of a misrouted
       record): in at_least_once with confluent-kafka (`OutputSender`, much
       cheaper per record than faust's `Topic.send`), in exactly_once
       through faust's transactional producer;
    4. faust acks the event; its commit later flushes the producers (our
       output sender first, then faust's: 1 and 3) and then commits the
       input offset - in exactly_once, faust means all three to go in the
       input partition's transaction instead (our kill -9 test says it does
       not hold: README, "Processing guarantees").

A crash between any two steps re-delivers the input record (its offset was
not committed).  The state it changed may survive the crash while the
records it produced do not (RocksDB is written at once, and the changelog
and the outputs go to different partitions of the producer), so deciding
again would answer "late" and lose the outcome.  The row therefore keeps the
offsets of the inputs it reflects and what they produced until they are
committed (`streams.processor.envelope`): a replayed input sends its records
again instead of being decided again.  Outcome and action ids are
deterministic, so consumers can drop the duplicates at-least-once allows.

The punctuator emits timer records through a producer of its own, outside
faust's transactions: in exactly_once a transaction commits only when its
input partition gets new offsets, so a timer record sent inside one could
stay invisible on a quiet partition and its wait would never end.  Timer
records are idempotent (stale generations are discarded), so sending them
at least once is exactly what is wanted.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from typing import Any

import faust
from confluent_kafka import KafkaError, Producer
from faust.types import StreamT
from faust.web import Request, Response, View

from streams.config import Guarantee, Settings
from streams.console import install as install_console
from streams.core import WaitDefinition
from streams.definitions import load_definitions
from streams.processor.census import Census, CensusKey, census_key
from streams.processor.envelope import RowDecodeError, read_head
from streams.processor.model import INPUT_ROLES, Handled, InputRecord, Role, RowWrite
from streams.processor.outputs import MESSAGE_TIMEOUT_MS, OutputSender
from streams.processor.records import RecordHandler, timer_record
from streams.processor.table_scan import owned_rows
from streams.timers.index import DueTimer, TimerIndex

log = logging.getLogger(__name__)

# Rows read between two yields to the event loop while the index is rebuilt.
REBUILD_YIELD_EVERY = 5000
TABLE_WAITS = "waits"  # wait key (utf-8 bytes) -> envelope.Row (slot, seen offsets, outbox)

# RocksDB options per table partition.  faust's defaults (64 MiB write
# buffers x 3 and a 2 GiB block cache for every partition) reserve gigabytes
# with 8 partitions; these keep a worker with 8 partitions under ~150 MiB of
# RocksDB memory.  Larger buffers help only at far higher write rates.
ROCKSDB_OPTIONS: dict[str, Any] = {
    "write_buffer_size": 4 * 1024 * 1024,
    "max_write_buffer_number": 2,
    "target_file_size_base": 16 * 1024 * 1024,
    "block_cache_size": 8 * 1024 * 1024,
    "block_cache_compressed_size": 0,
    "bloom_filter_size": 10,
    "max_open_files": 512,
}


def now_ms() -> int:
    return int(time.time() * 1000)


def _credentials(settings: Settings) -> Any:
    sec = settings.security
    if sec.protocol == "PLAINTEXT":
        return None
    context = None
    if sec.protocol.endswith("SSL"):
        context = ssl.create_default_context(cafile=sec.ssl_cafile)
        if sec.ssl_certfile:
            context.load_cert_chain(sec.ssl_certfile, sec.ssl_keyfile)
    if sec.protocol.startswith("SASL"):
        return faust.SASLCredentials(username=sec.sasl_username, password=sec.sasl_password,
                                     mechanism=sec.sasl_mechanism or "PLAIN",
                                     ssl_context=context)
    return context


class Worker:
    """Holds what the agent, the punctuator and the web views share."""

    def __init__(self, settings: Settings, definitions: Mapping[str, WaitDefinition]) -> None:
        self.settings = settings
        self.definitions = definitions
        self.counters: Counter[str] = Counter()
        self.index = TimerIndex()
        self.census = Census()
        # Clear while the index and census are rebuilt: the agent waits, so
        # no record is applied between the rebuild's read of a row and the
        # rebuild's replacing of what that row contributed.
        self.indexed = asyncio.Event()
        self.indexed.set()
        self.topic_names = {role: settings.topic(role.value) for role in Role}
        self.role_by_topic = {name: role for role, name in self.topic_names.items()}
        self.handler = RecordHandler(definitions, settings.partitions)
        # (input role, partition) -> offset below which faust has committed.
        self.committed: dict[tuple[Role, int], int] = {}
        # Called after each record is applied (the console's lateness histogram).
        self.observers: list[Callable[[InputRecord, Handled, int], None]] = []
        self.sender: OutputSender | None = None
        if settings.guarantee is Guarantee.AT_LEAST_ONCE:
            self.sender = OutputSender(lambda: Producer(settings.confluent(**{
                "partitioner": "murmur2_random", "acks": "all", "enable.idempotence": True,
                "linger.ms": 5, "message.timeout.ms": MESSAGE_TIMEOUT_MS})))
        self.app = self._build_app()
        self._timer_producer: Producer | None = None

    # -- faust wiring --------------------------------------------------------
    def _build_app(self) -> faust.App:
        s = self.settings
        app = faust.App(
            s.app_id,
            broker=[f"kafka://{h.strip()}" for h in s.bootstrap.split(",")],
            broker_credentials=_credentials(s),
            store="rocksdb://",
            datadir=str(s.data_dir),
            processing_guarantee=s.guarantee.value,
            topic_partitions=s.partitions,
            topic_allow_declare=True,
            consumer_auto_offset_reset="earliest",
            producer_acks=-1,
            # Let records of consecutive events share produce requests:
            # fewer, larger requests per event for a few ms of latency.
            producer_linger=0.005,
            broker_session_timeout=s.session_timeout,
            broker_heartbeat_interval=max(1.0, s.session_timeout / 6),
            web_port=s.web_port,
            web_bind=s.web_host,
            # What peers connect to when the console forwards a request.
            web_host=s.advertised_host,
            key_serializer="raw",
            value_serializer="raw",
            autodiscover=False,
            # Do not wait for the stream buffer to drain on rebalance: the
            # records are re-delivered to the new owner anyway.
            stream_wait_empty=False,
        )
        raw: dict[str, Any] = {"key_type": bytes, "value_type": bytes,
                               "key_serializer": "raw", "value_serializer": "raw"}
        self.inputs = app.topic(*(self.topic_names[r] for r in INPUT_ROLES),
                                partitions=s.partitions, **raw)
        self.outputs = {role: app.topic(self.topic_names[role], partitions=s.partitions, **raw)
                        for role in Role}
        # Keys and values are raw bytes: the app's default serializers are "raw".
        self.waits = app.Table(TABLE_WAITS, partitions=s.partitions, options=ROCKSDB_OPTIONS,
                               key_type=bytes, value_type=bytes)
        app.agent(self.inputs, name="xwait-processor", concurrency=1)(self._process)
        app.timer(interval=s.timer_tick, name="xwait-punctuator")(self._punctuate)
        self.waits.on_recover(self._rebuild_index)
        on_commit = app.tables.on_commit

        def track_commits(offsets: Any) -> None:
            for tp, offset in offsets.items():
                role = self.role_by_topic.get(tp.topic)
                if role is not None:
                    self.committed[(role, tp.partition)] = offset
            on_commit(offsets)

        app.tables.on_commit = track_commits  # type: ignore[method-assign]
        if self.sender is not None:
            # faust flushes its producer before it commits offsets: deliver
            # the outputs sent with confluent-kafka first (streams.processor.outputs).
            producer: Any = app.producer
            faust_flush = producer.flush
            sender = self.sender

            async def flush_outputs_first() -> None:
                await sender.flush()
                await faust_flush()

            producer.flush = flush_outputs_first
        worker = self

        async def stats(view: View, request: Request) -> Response:
            return view.json(worker.stats())

        app.page("/xwait/stats")(stats)
        self.app = app
        install_console(self)
        return app

    def owned_partitions(self) -> set[int]:
        topic = self.topic_names[Role.REQUESTS]
        return {tp.partition for tp in self.app.assignor.assigned_actives() if tp.topic == topic}

    # -- the agent -------------------------------------------------------------
    async def _process(self, stream: StreamT[bytes]) -> None:
        async for event in stream.events():
            if not self.indexed.is_set():
                await self.indexed.wait()
            msg = event.message
            rec = InputRecord(self.role_by_topic[msg.topic], msg.topic, msg.partition,
                              msg.offset, event.key, event.value)
            now = now_ms()
            handled = self.handler.handle(rec, self._load, now, self._committed)
            await self._apply(rec, handled)
            for observe in self.observers:
                observe(rec, handled, now)

    def _committed(self, role: Role, partition: int) -> int:
        return self.committed.get((role, partition), -1)

    def _load(self, wait_key: str) -> bytes | None:
        value = self.waits.get(wait_key.encode())
        return value if isinstance(value, bytes) else None

    async def _apply(self, rec: InputRecord, handled: Handled) -> None:
        if handled.wait_key is not None:
            key = handled.wait_key.encode()
            if handled.row is RowWrite.DELETE:
                self.waits.pop(key, None)
            elif isinstance(handled.row, bytes):
                self.waits[key] = handled.row
            self.census.move(rec.partition, handled.head_before, handled.head_after)
            after_kinds = {t.kind for t in handled.timers_after}
            for t in handled.timers_before:
                if t.kind not in after_kinds:
                    self.index.disarm(rec.partition, handled.wait_key, t.kind.value)
            for t in handled.timers_after:
                self.index.arm(rec.partition, handled.wait_key, t.kind.value, t.due_at,
                               t.generation)
        if self.sender is not None:
            for out in handled.out:
                await self.sender.send(self.topic_names[out.role], out.key, out.value,
                                       out.partition)
        else:  # exactly_once: the outputs belong to faust's transaction
            for out in handled.out:
                await self.outputs[out.role].send(key=out.key, value=out.value,
                                                  partition=out.partition)
        self.counters.update(handled.counters)
        self.counters["processed." + rec.role.value] += 1

    # -- the punctuator --------------------------------------------------------
    def _producer(self) -> Producer:
        if self._timer_producer is None:
            self._timer_producer = Producer(self.settings.confluent(**{
                "partitioner": "murmur2_random", "acks": "all", "linger.ms": 5,
                "enable.idempotence": True,
            }))
        return self._timer_producer

    async def _punctuate(self) -> None:
        if self.app.rebalancing:
            self.counters["punctuator.skipped_rebalancing"] += 1
            return
        due = self.index.pop_due(now_ms(), self.settings.timer_batch, self.owned_partitions())
        if not due:
            return
        producer = self._producer()
        errors: list[KafkaError] = []

        def delivered(err: KafkaError | None, _msg: object) -> None:
            if err is not None:
                errors.append(err)

        fired = now_ms()
        for t in due:
            producer.produce(self.topic_names[Role.TIMERS], key=t.wait_key.encode(),
                             value=timer_record(t.wait_key, t.kind, t.due_at, t.generation, fired),
                             partition=t.partition, on_delivery=delivered)
        remaining = await asyncio.get_running_loop().run_in_executor(None, producer.flush, 10.0)
        if errors or remaining:
            # The index re-queued them: they are emitted again after redelivery.
            log.warning("timer records not delivered count=%d first_error=%s",
                        len(errors) + remaining, errors[0] if errors else "timeout")
        self.counters["timers.emitted"] += len(due) - len(errors) - remaining

    async def _rebuild_index(self) -> None:
        """After a rebalance, index the armed timers and count the waits of every owned partition.

        Runs before faust resumes the input partitions, so no record is
        processed against a partition whose index is not yet rebuilt.  It
        reads only the rows' heads, and yields to the event loop now and then
        so that heartbeats go on while a large table is read; the agent waits
        for it (`indexed`).
        """
        self.indexed.clear()
        try:
            await self._rebuild()
        finally:
            self.indexed.set()

    async def _rebuild(self) -> None:
        started = time.monotonic()
        await self._rewind_uncommitted_inputs()
        owned = self.owned_partitions()
        found: dict[int, list[DueTimer]] = defaultdict(list)
        counts: dict[int, Counter[CensusKey]] = defaultdict(Counter)
        rows = unreadable = 0
        for partition, key, value in owned_rows(self.waits, owned, self.settings.partitions):
            rows += 1
            if rows % REBUILD_YIELD_EVERY == 0:
                await asyncio.sleep(0)
            try:
                head = read_head(value)
            except RowDecodeError:
                unreadable += 1  # reported (and kept) when a record for the key comes
                continue
            key_of = census_key(head)
            if key_of is not None:
                counts[partition][key_of] += 1
            if head.timers:
                wait_key = key.decode()
                found[partition].extend(
                    DueTimer(partition, wait_key, t.kind.value, t.due_at, t.generation)
                    for t in head.timers)
        for p in self.index.partitions() - owned:
            self.index.drop_partition(p)
        for p in self.census.partitions() - owned:
            self.census.drop_partition(p)
        for p in owned:
            self.index.replace_partition(p, found.get(p, []))
            self.census.replace_partition(p, counts.get(p, Counter()))
        log.info("timer index rebuilt partitions=%s rows=%d timers=%d unreadable=%d "
                 "seconds=%.2f", sorted(owned), rows, len(self.index), unreadable,
                 time.monotonic() - started)

    async def _rewind_uncommitted_inputs(self) -> None:
        """Start input partitions that have no committed offset at their beginning.

        Measured here: after a kill -9 before the group's first commit, the
        restarted worker sometimes began such partitions at their end and
        silently skipped every waiting request (faust 0.15.3 / aiokafka 0.14,
        despite auto_offset_reset=earliest).  An explicit seek removes the
        race: nothing before the first commit is ever skipped.
        """
        consumer: Any = self.app.consumer  # seek_to_committed is not in faust's ConsumerT
        committed = await consumer.seek_to_committed()
        for tp, offset in committed.items():
            if tp.topic in self.role_by_topic and (offset is None or offset < 0):
                log.info("no committed offset topic=%s partition=%d: reading from the start",
                         tp.topic, tp.partition)
                await consumer.seek(tp, 0)

    # -- web ---------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        owned = self.owned_partitions()
        waits: Counter[str] = Counter()
        for (state, _definition), n in self.census.totals(owned).items():
            waits[state] += n
        return {
            "counters": dict(self.counters),
            "ownedPartitions": sorted(owned),
            "armedTimers": len(self.index),
            "waits": dict(waits),
            "guarantee": self.settings.guarantee.value,
        }


def build_app(settings: Settings, definitions: Mapping[str, WaitDefinition] | None = None
              ) -> faust.App:
    if settings.guarantee is Guarantee.EXACTLY_ONCE:
        log.warning("processing guarantee exactly_once: in xwait's kill -9 test this mode "
                    "lost waits (faust 0.15.3); at_least_once did not (see README)")
    if definitions is None:
        definitions = load_definitions(settings.topology / "waits")
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    worker = Worker(settings, definitions)
    app: faust.App = worker.app
    app.xwait = worker  # type: ignore[attr-defined]
    return app


def run(settings: Settings) -> None:
    """Run a worker in this process until it is stopped (SIGTERM / Ctrl-C)."""
    app = build_app(settings)
    # faust's logging set-up leaves the client libraries' loggers open to
    # DEBUG: aiokafka then builds a log record per fetch and per send (a
    # tenth of a worker's CPU, measured with py-spy) only to drop it.
    floor = logging.DEBUG if settings.log_level == "debug" else logging.INFO
    for name in ("aiokafka", "kafka", "faust", "mode"):
        logging.getLogger(name).setLevel(floor)
    sys.argv = ["xwait", "worker", f"--loglevel={settings.log_level}",
                f"--web-port={settings.web_port}", f"--web-bind={settings.web_host}",
                f"--web-host={settings.advertised_host}"]
    app.main()


__all__ = ["ROCKSDB_OPTIONS", "TABLE_WAITS", "Worker", "build_app", "run"]
