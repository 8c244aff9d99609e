"""The faust application: one stateful agent, the waits table, the punctuator.

Per input record the agent (concurrency 1: faust issue #606 loses events at
higher concurrency) runs `RecordHandler.handle` and applies the result:

    1. table write (`waits[key] = slot` or delete): faust sends the changelog
       record first, then writes RocksDB;
    2. timer index update (in memory, derived from the table);
    3. sends to outcomes / actions / rejected (or the forward of a misrouted
       record), through faust's producer;
    4. faust acks the event; its commit later flushes the producer (1 and 3)
       and then commits the input offset - in exactly_once, all three go in
       the input partition's transaction instead.

A crash between any two steps re-delivers the input record (its offset was
not committed).  Processing it again against the already-changed state is
safe: the core answers a replayed request with `duplicate`, a replayed reply
with `late`, a replayed timer with a discard; outcome and action ids are
deterministic, so a consumer can also de-duplicate the records of step 3
that were sent before the crash.

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
from collections.abc import AsyncIterator, Mapping
from typing import Any

import faust
from confluent_kafka import KafkaError, Producer
from faust.types import StreamT
from faust.web import Request, Response, View

from streams.config import Settings
from streams.core import WaitDefinition, decode_slot
from streams.definitions import load_definitions
from streams.partitioning import partition_for
from streams.processor.records import (
    INPUT_ROLES,
    Handled,
    InputRecord,
    RecordHandler,
    Role,
    SlotWrite,
    timer_record,
)
from streams.timers.index import DueTimer, TimerIndex

log = logging.getLogger(__name__)

TABLE_WAITS = "waits"  # wait key (utf-8 bytes) -> encode_slot(Slot) bytes

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
        self.topic_names = {role: settings.topic(role.value) for role in Role}
        self.role_by_topic = {name: role for role, name in self.topic_names.items()}
        self.handler = RecordHandler(definitions, settings.partitions, self.topic_names)
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
            web_port=s.web_port,
            web_bind=s.web_host,
            web_host=s.web_host,
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
        worker = self

        async def stats(view: View, request: Request) -> Response:
            return view.json(worker.stats())

        app.page("/xwait/stats")(stats)
        return app

    def owned_partitions(self) -> set[int]:
        topic = self.topic_names[Role.REQUESTS]
        return {tp.partition for tp in self.app.assignor.assigned_actives() if tp.topic == topic}

    # -- the agent -------------------------------------------------------------
    async def _process(self, stream: StreamT[bytes]) -> AsyncIterator[None]:
        async for event in stream.events():
            msg = event.message
            rec = InputRecord(self.role_by_topic[msg.topic], msg.topic, msg.partition,
                              msg.offset, event.key, event.value)
            handled = self.handler.handle(rec, self._load, now_ms())
            await self._apply(rec, handled)
            yield None

    def _load(self, wait_key: str) -> bytes | None:
        value = self.waits.get(wait_key.encode())
        return value if isinstance(value, bytes) else None

    async def _apply(self, rec: InputRecord, handled: Handled) -> None:
        if handled.wait_key is not None:
            key = handled.wait_key.encode()
            if handled.slot is SlotWrite.DELETE:
                self.waits.pop(key, None)
            elif isinstance(handled.slot, bytes):
                self.waits[key] = handled.slot
            after_kinds = {t.kind for t in handled.timers_after}
            for t in handled.timers_before:
                if t.kind not in after_kinds:
                    self.index.disarm(rec.partition, handled.wait_key, t.kind.value)
            for t in handled.timers_after:
                self.index.arm(rec.partition, handled.wait_key, t.kind.value, t.due_at,
                               t.generation)
        for out in handled.out:
            topic = self.outputs[out.role]
            await topic.send(key=out.key, value=out.value, partition=out.partition)
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
        """After a rebalance, index the armed timers of every owned partition.

        Runs before faust resumes the input partitions, so no record is
        processed against a partition whose index is not yet rebuilt.
        """
        started = time.monotonic()
        owned = self.owned_partitions()
        found: dict[int, list[DueTimer]] = defaultdict(list)
        for key, value in self.waits.items():
            partition = partition_for(key, self.settings.partitions)
            if partition not in owned or not isinstance(value, bytes):
                continue
            wait_key = key.decode()
            for t in decode_slot(value).armed_timers():
                found[partition].append(
                    DueTimer(partition, wait_key, t.kind.value, t.due_at, t.generation))
        for p in self.index.partitions() - owned:
            self.index.drop_partition(p)
        for p in owned:
            self.index.replace_partition(p, found.get(p, []))
        log.info("timer index rebuilt partitions=%s timers=%d seconds=%.2f",
                 sorted(owned), len(self.index), time.monotonic() - started)

    # -- web ---------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        return {
            "counters": dict(self.counters),
            "ownedPartitions": sorted(self.owned_partitions()),
            "armedTimers": len(self.index),
            "guarantee": self.settings.guarantee.value,
        }


def build_app(settings: Settings, definitions: Mapping[str, WaitDefinition] | None = None
              ) -> faust.App:
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
    sys.argv = ["xwait", "worker", f"--loglevel={settings.log_level}",
                f"--web-port={settings.web_port}", f"--web-host={settings.web_host}"]
    app.main()


__all__ = ["ROCKSDB_OPTIONS", "TABLE_WAITS", "Worker", "build_app", "run"]
