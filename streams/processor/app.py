"""The faust application: one agent deciding input in batches, the waits table, the punctuator.

faust is the frame: group membership and partition assignment, the RocksDB
waits table with its changelog (restores, standby copies), the web server and
the timer.  The worker owns the rest, because that is where records were
lost (issue 8), and where the time went (issue 9):

* input positions and fetching: after every assignment its own consumer
  (`reader`) reads each input partition from the position stored with its
  state (`positions`), and a record is taken only if it is the next one
  expected (`inputs`); faust's input partitions stay paused, and faust never
  commits input offsets (the input topics are subscribed without acks);
* the commit order: the records taken are decided as one batch (`batch`),
  then made durable in the order `commit` writes down - outputs
  acknowledged, then the changelog, then one RocksDB write holding the rows,
  the timer index and census derived from them and the input positions -
  before anything in memory changes;
* time: decisions use the broker's append time of each record; a
  partition's records are applied in the order of that clock across its
  topics (`sequencer`), and the punctuator emits a timer only once the
  partition's stream time has passed it, so a reply appended before its
  deadline wins however far behind the worker is.

Two coroutines share the work.  The taker (`_read_inputs`, started by the
faust agent, concurrency 1: faust issue #606 loses events at higher
concurrency) only takes records: it checks each against the expected offset
and hands it to the sequencer.  The applier
takes what the sequencer releases, decides it as a batch and commits it.
The applier, the assignment hook and the revocation handler take one lock,
so a batch is never cut by a change of ownership: a revocation waits for the
batch in flight, and records taken before it are dropped and read again by
whoever owns their partition next.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import ssl
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from typing import Any

import faust
from confluent_kafka import KafkaError, KafkaException, Producer
from faust.types import TP, StreamT
from faust.web import Request, Response, View

from streams import codec
from streams.codec import RegistryUnavailable
from streams.config import Guarantee, Settings
from streams.console import install as install_console
from streams.core import WaitDefinition
from streams.definitions import load_definitions
from streams.processor import collector, faust_glue, flow
from streams.processor.batch import Batch, build_batch
from streams.processor.census import Census, census_key
from streams.processor.commit import AtLeastOnce, Committer, ExactlyOnce
from streams.processor.envelope import RowDecodeError, read_head
from streams.processor.gaps import EndOffsets, GapReader
from streams.processor.inputs import Gap, InputGate, Verdict
from streams.processor.latency import Latencies
from streams.processor.model import INPUT_ROLES, Handled, InputRecord, Role
from streams.processor.positions import Positions
from streams.processor.reader import InputReader
from streams.processor.records import RecordHandler, timer_record
from streams.processor.sequencer import Sequencer
from streams.processor.store import TableStore
from streams.processor.table_scan import owned_rows
from streams.timers.due import DueTimer, DueTimers, InFlight
from streams.timers.stored import Summary, index_changes

log = logging.getLogger(__name__)

# Rows read between two yields to the event loop while the index is rebuilt.
REBUILD_YIELD_EVERY = 5000
TABLE_WAITS = "waits"  # see streams.processor.store for the key layout
# Most records decided in one batch.  Larger batches amortise the two
# produce round trips and the RocksDB write over more records; beyond a few
# hundred the gain is small and a rebalance waits longer for the batch in flight.
BATCH_MAX = 500
# How long a topic may hold the others back while records below its end
# offset do not arrive, before the worker reads that range itself (offsets
# that hold transaction markers only never arrive through the fetch).
STUCK_S = 2.0
# Most records one such direct read takes (the rest come through the fetch).
STALLED_READ_MAX = 1000
# Changelog records read at a time below where a restore began (`_fill_restore`).
FILL_CHUNK = 10_000
# How long a stopping worker waits for the batch it is committing (under the
# 30 s a Kubernetes pod gets by default between SIGTERM and SIGKILL).
STOP_COMMIT_WAIT_S = 20.0
# How long the applier lets the agent take records before it stages the
# first of a batch: a millisecond of latency for batches of more than one.
BATCH_LINGER_S = 0.001
# How often the applier looks for stalled topics and steers the fetch (`flow`).
HOUSEKEEPING_S = 0.1
# Least time between two probes the applier asks for itself (the punctuator
# probes every tick besides): each is one ListOffsets request, and under a
# steady load the applier asks after nearly every release.
PROBE_MIN_S = 0.01
# How often the consumer group's offsets are brought up to the stored positions
# (for lag monitors; the worker itself starts from the stored positions).
GROUP_COMMIT_INTERVAL_S = 2.0
# How long the applier waits before deciding again records whose schema the
# registry could not give (the registry is down; the records are fine).
REGISTRY_RETRY_S = 2.0
# Exit code of a worker stopped because a batch could not be made durable.
EXIT_COMMIT_FAILED = 70

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


class _Laps:
    """Seconds spent in each step of a takeover, for its log line: a slow one says which."""

    def __init__(self) -> None:
        self._start = self._mark = time.monotonic()
        self.seconds: dict[str, float] = {}

    def total(self) -> float:
        """Seconds since the laps began."""
        return time.monotonic() - self._start

    def lap(self, step: str) -> None:
        now = time.monotonic()
        self.seconds[step] = round(now - self._mark, 2)
        self._mark = now

    def __str__(self) -> str:
        return " ".join(f"{step}:{secs:.2f}" for step, secs in self.seconds.items())


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
        self.census = Census()  # waits by state and definition, as decided
        # Per owned partition: armed timers and the lowest due time, as decided.
        self.summaries: dict[int, Summary] = {}
        self.sequencer = Sequencer()
        self.latency = Latencies()
        self.gc_watch: collector.GcWatch | None = None  # set by `run` (a whole process)
        self.gate = InputGate()
        # Per owned partition: the input positions of what was decided, and of
        # what is durable (stored; they differ while a batch is being committed).
        self.positions: dict[int, Positions] = {}
        self.durable: dict[int, Positions] = {}
        self._committing: asyncio.Future[None] | None = None
        self._staged: list[InputRecord] = []  # released, to be decided in the next batch
        self._deciding: list[InputRecord] = []  # taken from `_staged`, rows not pending yet
        # Per partition: batches taken from `_staged` and not stored yet.
        self._unstored: Counter[int] = Counter()
        self._pending_rows: dict[int, Mapping[bytes, bytes | None]] = {}
        self.topic_names = {role: settings.topic(role.value) for role in Role}
        self.role_by_topic = {name: role for role, name in self.topic_names.items()}
        self.handler = RecordHandler(definitions, settings.partitions)
        # Called after each record is applied (the console's lateness histogram).
        self.observers: list[Callable[[InputRecord, Handled, int], None]] = []
        # Set once an assignment is taken over (positions sought, timer index taken).
        self.ready = asyncio.Event()
        self._lock = asyncio.Lock()
        self._timer_producer: Producer | None = None
        self._last_group_commit = 0.0
        self._wake = asyncio.Event()  # something may be releasable: the applier looks
        self._paused: set[TP] = set()  # input partitions paused because too much is held
        # (role, partition) behind its end -> (next offset, since when it has not moved)
        self._stuck_since: dict[tuple[Role, int], tuple[int, float]] = {}
        self._last_probe = 0.0
        self._background_probe: asyncio.Future[None] | None = None
        self._probing = asyncio.Lock()
        self.ends: dict[TP, int] = {}  # input end offsets seen by the last probe
        self.failure: BaseException | None = None
        self._stopping = False  # partitions given up for good: the worker is stopping
        self.app = self._build_app()
        self.store = TableStore(self.waits)
        self.store.maintain_index_on_restore()
        self.index = DueTimers(self.store.db)
        changelog = self.changelog = f"{settings.app_id}-{TABLE_WAITS}-changelog"
        conf = settings.confluent(**{"partitioner": "murmur2_random", "linger.ms": 5})
        self.committer: Committer = (
            ExactlyOnce(conf, self.topic_names, changelog, settings.app_id, settings.partitions)
            if settings.guarantee is Guarantee.EXACTLY_ONCE
            else AtLeastOnce(conf, self.topic_names, changelog))
        self.gaps = GapReader(settings.confluent(**{"group.id": f"{settings.app_id}-gaps"}))
        self.reader = InputReader(settings.confluent(**{"group.id": f"{settings.app_id}-inputs"}),
                                  {self.topic_names[r]: r for r in INPUT_ROLES})
        self.end_offsets = EndOffsets(settings.confluent())
        self._probe_thread = ThreadPoolExecutor(1, thread_name_prefix="xwait-probe")
        self.tails = GapReader(settings.confluent(**{"group.id": f"{settings.app_id}-gaps"}))
        faust_glue.restore_to_last_data_record(self.app, {changelog}, self._data_ends)

    # -- faust wiring --------------------------------------------------------
    def _build_app(self) -> faust.App:
        s = self.settings
        faust_glue.read_committed_consumers()
        app = faust.App(
            s.app_id,
            broker=[f"kafka://{h.strip()}" for h in s.bootstrap.split(",")],
            broker_credentials=_credentials(s),
            store="rocksdb://",
            datadir=str(s.data_dir),
            # The worker makes its own transactions (streams.processor.commit);
            # faust's would wrap only what faust itself sends, which is nothing.
            processing_guarantee="at_least_once",
            topic_partitions=s.partitions,
            topic_allow_declare=True,
            consumer_auto_offset_reset="earliest",
            producer_acks=-1,
            broker_session_timeout=s.session_timeout,
            broker_heartbeat_interval=max(1.0, s.session_timeout / 6),
            web_port=s.web_port,
            web_bind=s.web_host,
            # What peers connect to when the console forwards a request.
            web_host=s.advertised_host,
            # faust's /table/<name>/<key>/ views would dump raw rows to anyone
            # who reaches the port; the console's API reads them behind a token.
            web_tables_enabled=False,
            key_serializer="raw",
            value_serializer="raw",
            autodiscover=False,
            # Do not wait for the stream buffer to drain on rebalance: the
            # records are read again from the stored positions anyway.
            stream_wait_empty=False,
            TableManager=faust_glue.TablesDeclaredFirst,
        )
        raw: dict[str, Any] = {"key_type": bytes, "value_type": bytes,
                               "key_serializer": "raw", "value_serializer": "raw"}
        # acks=False: faust never commits these topics' offsets (see module docstring).
        self.inputs = app.topic(*(self.topic_names[r] for r in INPUT_ROLES),
                                partitions=s.partitions, acks=False, **raw)
        # Keys and values are raw bytes: the app's default serializers are "raw".
        self.waits = app.Table(TABLE_WAITS, partitions=s.partitions, options=ROCKSDB_OPTIONS,
                               key_type=bytes, value_type=bytes)
        app.agent(self.inputs, name="xwait-processor", concurrency=1)(self._process)
        app.task(self._punctuate_forever)
        faust_glue.after_seek_to_committed(app, self._take_over)
        faust_glue.deliver_what_was_fetched(app, [self.topic_names[r] for r in INPUT_ROLES])
        faust_glue.keep_paused_through_flow_control(app)
        faust_glue.before_stopping(app, self._on_stopping)
        app.on_partitions_revoked.connect(self._on_revoked)  # type: ignore[arg-type]
        worker = self

        async def stats(view: View, request: Request) -> Response:
            return view.json(worker.stats())

        app.page("/xwait/stats")(stats)
        self.app = app
        install_console(self)
        return app

    def owned_partitions(self) -> set[int]:
        return self.gate.owned()

    def read_row(self, key: bytes, partition: int) -> bytes | None:
        """The stored row of a wait key in an owned partition (for the console)."""
        return self.store.get(partition, key)

    def owned_rows(self) -> Iterator[tuple[int, bytes, bytes]]:
        """Every stored row of the owned partitions (for the console's lists)."""
        return owned_rows(self.waits, self.owned_partitions(), self.settings.partitions)

    # -- the agent: taking records ---------------------------------------------
    async def _process(self, stream: StreamT[bytes]) -> None:
        """Start the applier and the input reader; offer what faust's fetch delivers.

        The inputs are read by the worker's own consumer (`reader`): faust's
        input partitions stay paused once taken over, so faust delivers input
        records only where it resumes a partition itself; they are offered
        like the reader's, and the gate takes each offset once.
        """
        applier = asyncio.ensure_future(self._applier(stream.channel))
        reading = asyncio.ensure_future(self._read_inputs())
        try:
            async for event in stream.events():
                msg = event.message
                role = self.role_by_topic.get(msg.topic)
                if role is None:
                    continue
                ts = msg.timestamp
                await self._offer(InputRecord(
                    role, msg.topic, msg.partition, msg.offset, event.key, event.value,
                    None if ts is None else round(ts * 1000), msg.timestamp_type == 1))
        finally:
            applier.cancel()
            reading.cancel()
            if self._background_probe is not None:
                self._background_probe.cancel()
            self.reader.stop()

    async def _read_inputs(self) -> None:
        """Offer each batch the input reader fetched, then let it fetch the next."""
        self.reader.start()
        while self.failure is None:
            fetched = await self.reader.next_batch()
            if self.reader.failure is not None:
                await self._fail(self.reader.failure, "reading the input topics")
                return
            for rec in fetched.records:
                await self._offer(rec)
            for topic, p, start, stop in fetched.passed:
                self._passed_over(self.role_by_topic[topic], p, start, stop)
            self.reader.taken()

    def _passed_over(self, role: Role, p: int, start: int, stop: int) -> None:
        """The fetch passed over offsets without records (transaction markers): expect `stop`."""
        passed = self.gate.passed(role, p, start, stop)
        if passed:
            self.sequencer.skipped(role, p, stop)
            self.counters["inputs.markers_passed"] += passed
            self._wake.set()

    async def _offer(self, rec: InputRecord) -> None:
        """Take a fetched record if it is the next one expected of its partition."""
        epoch = self.gate.epoch
        verdict = self.gate.check(rec.role, rec.partition, rec.offset, rec.follows)
        if verdict is Verdict.APPLY and rec.follows is not None:
            want = self.gate.expected(rec.role, rec.partition)
            if want is not None and rec.offset > want:
                self.counters["inputs.markers_passed"] += rec.offset - want
        if verdict is Verdict.GAP:
            gap = self.gate.gap(rec.role, rec.partition, rec.offset)
            filled = await self._read_gap(gap)
            if filled is None or self.gate.epoch != epoch:
                return
            # Another taker (the stall reader, faust's fetch) may have moved on meanwhile:
            # take what is still expected, then `rec` if it is next.
            for early in self.gate.read_directly(rec.role, rec.partition, gap.start,
                                                 rec.offset, filled) or ():
                self._take(early)
            verdict = self.gate.check(rec.role, rec.partition, rec.offset)
        if verdict is Verdict.APPLY:
            self._take(rec)
        else:
            self.counters[f"inputs.{verdict.value}"] += 1

    def _take(self, rec: InputRecord) -> None:
        self.gate.advance(rec.role, rec.partition, rec.offset)
        now = now_ms()
        if rec.log_append_time and rec.timestamp is not None:
            self.latency.add("taken", now - rec.timestamp)
        self.sequencer.add(rec, now)
        self._wake.set()
        if self.sequencer.held(rec.partition, rec.role) >= flow.HELD_MAX:
            self._pause(TP(rec.topic, rec.partition))

    def _pause(self, tp: TP) -> None:
        if tp not in self._paused:
            self._paused.add(tp)
            self.reader.pause(tp.topic, tp.partition)
            self.counters["inputs.paused"] += 1

    def _steer_fetch(self) -> None:
        """Pause what is held while a partition waits for the fetch; resume the rest (`flow`)."""
        owned = self.sequencer.partitions()
        waiting = flow.waited_for(self.sequencer, owned)
        for p in owned:
            for role in INPUT_ROLES:
                tp = TP(self.topic_names[role], p)
                held = self.sequencer.held(p, role)
                if tp not in self._paused:
                    if flow.should_pause(held, role, waiting):
                        self._pause(tp)
                elif flow.may_resume(held, role, waiting):
                    self._paused.discard(tp)
                    self.reader.resume(tp.topic, tp.partition)
                    self.counters["inputs.resumed"] += 1

    async def _read_gap(self, gap: Gap) -> list[InputRecord] | None:
        """The records the fetch passed over below `gap.stop` (streams.processor.gaps)."""
        role, partition = gap.role, gap.partition
        loop = asyncio.get_running_loop()
        try:
            found = await loop.run_in_executor(None, self.gaps.read, role,
                                               self.topic_names[role], partition, gap.start,
                                               gap.stop)
        except Exception as exc:  # noqa: BLE001 - any failure: stop rather than skip
            await self._fail(exc, f"reading offsets {gap.start}..{gap.stop - 1} of "
                                  f"{self.topic_names[role]}[{partition}]")
            return None
        self.counters["inputs.gaps"] += 1
        self.counters["inputs.gap_records"] += len(found)
        level = logging.WARNING if found else logging.INFO
        log.log(level, "input gap topic=%s partition=%d offsets=%d..%d records_read=%d%s",
                self.topic_names[role], partition, gap.start, gap.stop - 1, len(found),
                " (the fetch skipped them: applied now)" if found
                else " (no records there: transaction markers, aborts or retention)")
        return found

    # -- the applier: deciding and committing ------------------------------------
    async def _applier(self, channel: Any) -> None:
        """Decide and commit what the sequencer releases, batch after batch."""
        try:
            await self._apply_forever(channel)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a bug here must stop the worker, loudly
            await self._fail(exc, "the applier")

    async def _apply_forever(self, channel: Any) -> None:
        """Stage what the sequencer releases; decide and commit it batch by batch.

        A batch is decided when the previous one is committed, or as soon as
        BATCH_MAX records are staged (then its decisions overlap the previous
        commit's wait for acknowledgements).  While a commit waits, released
        records gather, so batches grow with the load instead of shrinking to
        one record each.
        """
        last_housekeeping = 0.0
        while self.failure is None:
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=0.2)
            except TimeoutError:
                pass
            self._wake.clear()
            if not self._staged and not channel.empty():
                await asyncio.sleep(BATCH_LINGER_S)  # let the agent take what faust holds
            released = self.sequencer.release(BATCH_MAX - len(self._staged))
            if released:
                now = now_ms()
                self.latency.add_all("released", (now - r.timestamp for r in released
                                                  if r.log_append_time and r.timestamp))
                self._staged += released
            if self.sequencer.wants_probe() and self.ready.is_set():
                self._probe_in_background()
            busy = self._committing is not None and not self._committing.done()
            if self._staged and (not busy or len(self._staged) >= BATCH_MAX):
                await self._run_batch()
                if self.sequencer.held():
                    self._wake.set()  # more may be releasable now
            if time.monotonic() - last_housekeeping > HOUSEKEEPING_S:
                last_housekeeping = time.monotonic()
                await self._unstick()
                self._steer_fetch()

    async def _unstick(self) -> None:
        """Read directly what a topic behind its end offset does not deliver.

        A topic not taken to the end offset of the last probe holds its
        partition's stream time back.  If it makes no progress for STUCK_S,
        the offsets may hold no records (the commit markers of a
        transactional producer), or the fetch skipped them (issue 8): the
        range is read from the broker, whatever it holds is taken, and the
        offsets without records are passed.  A topic paused because too much
        of it is held is not behind for want of fetching; it is left alone.
        """
        now = time.monotonic()
        behind = {(role, p): (start, stop) for role, p, start, stop in self.sequencer.behind()
                  if TP(self.topic_names[role], p) not in self._paused}
        for key in list(self._stuck_since):
            if key not in behind or behind[key][0] != self._stuck_since[key][0]:
                del self._stuck_since[key]
        for key, (start, stop) in behind.items():
            _, since = self._stuck_since.setdefault(key, (start, now))
            if now - since < STUCK_S:
                continue
            del self._stuck_since[key]
            await self._read_stalled(*key, start, stop)

    async def _read_stalled(self, role: Role, p: int, start: int, stop: int) -> None:
        epoch = self.gate.epoch
        loop = asyncio.get_running_loop()
        try:
            found = await loop.run_in_executor(None, self.gaps.read, role,
                                               self.topic_names[role], p, start, stop,
                                               STALLED_READ_MAX)
        except Exception as exc:  # noqa: BLE001 - the broker is away: try again later
            log.warning("reading a stalled input range failed topic=%s partition=%d: %s",
                        self.topic_names[role], p, exc)
            return
        covered = stop if len(found) < STALLED_READ_MAX else found[-1].offset + 1
        taken = None if self.gate.epoch != epoch else self.gate.read_directly(
            role, p, start, covered, found)
        if taken is None:
            # `start` came from an older state: taking this would skip what lies
            # below it (a whole range was lost that way in a crash run).
            self.counters["inputs.stall_reads_dropped"] += 1
            return
        for rec in taken:
            self._take(rec)
        self.sequencer.skipped(role, p, covered)
        self.counters["inputs.stalls_read"] += 1
        self.counters["inputs.stall_records"] += len(found)
        log.log(logging.WARNING if found else logging.INFO,
                "input range read directly topic=%s partition=%d offsets=%d..%d records=%d%s",
                self.topic_names[role], p, start, covered - 1, len(found),
                " (the fetch did not deliver them)" if found
                else " (no records there: transaction markers or aborted records)")
        self._wake.set()

    async def _run_batch(self) -> None:
        """Decide the staged records and start committing them.

        Commits are pipelined one deep: a batch is decided while the previous
        one may still wait for the broker's acknowledgements, reading that
        batch's rows from memory (`_pending_rows`) until they are in RocksDB.
        Batches are committed strictly in order, each in the order of the
        commit protocol, so a crash still leaves a prefix of them durable.
        """
        async with self._lock:
            records, self._staged = self._staged, []
            if self.failure is not None or not records:
                return
            parts = {r.partition for r in records}
            self._unstored.update(parts)
            self._deciding = records
            try:
                batch = self._decide(records)
                await self._finish_commit()
                if batch is None:
                    self._stored(parts)  # unreleased: staged again
                    await asyncio.sleep(REGISTRY_RETRY_S)
                    return
                if self.failure is None:
                    for p, part in batch.parts.items():
                        self._pending_rows[p] = part.rows
                    self._committing = asyncio.ensure_future(self._commit(batch, parts))
                    self._committing.add_done_callback(lambda _f: self._wake.set())
            finally:
                self._deciding = []

    def _stored(self, parts: set[int]) -> None:
        self._unstored.subtract(parts)
        for p in parts:
            if self._unstored[p] <= 0:
                del self._unstored[p]

    def _in_flight(self, owned: set[int]) -> dict[int, InFlight]:
        """Per owned partition with input taken but not stored: which waits, and the stored time.

        The timer index knows only what is stored.  A timer emitted once the
        stream time passed it, while records released before it were still
        being decided or committed, was often stale by the time its record
        came back (a reply in those records had ended the wait): 42,163 of
        87,211 timer records at 500 waits/s, each one more record to read and
        decide while behind.  Going by the stream time of the last stored
        batch instead made every deadline wait for the batches in flight
        (deadline lateness p99 0.8-1.1 s at 500 waits/s).  So only the
        timers of the waits those batches touch wait for them: a record
        changes no wait but the one its key names.  Released records not
        decided yet count whole; of a batch being committed, the rows it
        changes.  (Records still held by the sequencer were appended after
        the stream time: a timer due by it comes before them.)
        """
        keys: dict[int, set[str]] = {}
        for rec in (*self._staged, *self._deciding):
            if rec.key:
                keys.setdefault(rec.partition, set()).add(rec.key.decode("utf-8", "replace"))
        for p, rows in self._pending_rows.items():
            # Rows stay pending after their batch is stored, until the next one
            # is: while nothing of the partition is unstored, they are not in flight.
            if p in self._unstored:
                keys.setdefault(p, set()).update(k.decode("utf-8", "replace") for k in rows)
        out: dict[int, InFlight] = {}
        for p in owned:
            if p not in keys and p not in self._unstored:
                continue
            stored = self.durable.get(p)
            out[p] = InFlight(stored.stream_time if stored is not None else 0,
                              keys.get(p, set()))
        return out

    def _decide(self, records: list[InputRecord]) -> Batch | None:
        stream_times = self.sequencer.times()

        def load(partition: int, key: bytes) -> bytes | None:
            pending = self._pending_rows.get(partition)
            if pending is not None and key in pending:
                return pending[key]
            return self.store.get(partition, key)

        try:
            batch = build_batch(self.handler, records, load, self.positions, stream_times,
                                now_ms())
        except RegistryUnavailable as exc:
            # Not the records' fault: decide them again once the registry answers.
            self.sequencer.unrelease(records)  # timers-first order is restored by release
            self.counters["registry_unavailable"] += 1
            log.warning("schema registry unavailable, %d records wait: %s", len(records), exc)
            return None
        for p, part in batch.parts.items():
            part.positions = replace(part.positions, stream_time=stream_times.get(p, 0))
            self.positions[p] = part.positions  # decided; durable once the commit is done
            summary = self.summaries.setdefault(p, Summary())
            low = self.index.low(p)  # how far the punctuator found nothing pending
            summary.armed += part.armed
            for change in part.changes:
                for t in change.after.timers:
                    low = min(low, t.due_at)
                self.census.move(p, change.before, change.after)
            summary.low = low
            summary.waits = self.census.counts(p)
            part.summary = summary.copy()
        return batch

    async def _commit(self, batch: Batch, parts: set[int]) -> None:
        started = now_ms()
        try:
            offsets = await self.committer.commit(batch)
            for p, part in batch.parts.items():
                self.store.write(p, part.rows, part.positions, offsets.get(p),
                                 part.index, part.summary)
        except Exception as exc:  # noqa: BLE001 - nothing of the batch is stored
            await self._fail(exc, f"a batch of {len(batch)} records")
            return
        done = now_ms()
        self.latency.add("commit", done - started)
        self.latency.add_all("durable", (done - rec.timestamp for rec, _, _ in batch.decided
                                         if rec.log_append_time and rec.timestamp))
        self._remember(batch)
        self._stored(parts)

    async def _finish_commit(self) -> None:
        """Wait for the batch being committed, if any: its rows are in RocksDB after this."""
        committing, self._committing = self._committing, None
        if committing is not None:
            await committing
        self._pending_rows.clear()

    def _remember(self, batch: Batch) -> None:
        """Step 6 of the commit protocol: what the worker keeps in memory."""
        for p, part in batch.parts.items():
            self.durable[p] = part.positions
            self.index.stored(p)
            for change in part.changes:
                self.index.changed(p, change.wait_key, change.before.timers,
                                   change.after.timers)
            for key, timer_kind, due_at in part.unindexed:
                self.index.forget(p, key, timer_kind, due_at)
            for key, kind, due_at, generation in part.not_due:
                self.index.requeue(DueTimer(p, key, kind, due_at, generation))
        self.counters.update(batch.counters)
        self.counters["batches"] += 1
        for rec, handled, now in batch.decided:
            for observe in self.observers:
                observe(rec, handled, now)

    async def _fail(self, exc: BaseException, what: str) -> None:
        """Stop the worker: `what` could not be made durable, and nothing of it was stored."""
        if self.failure is not None:
            return
        self.failure = exc
        log.critical("stopping the worker: %s failed (%s: %s). Nothing of it was stored; "
                     "its input is read again from the stored positions when the worker "
                     "is started again.", what, type(exc).__name__, exc)
        self.counters["failures"] += 1
        loop = asyncio.get_running_loop()
        # faust's own shutdown can hang on a broker that is gone: exit regardless.
        loop.call_later(10.0, os._exit, EXIT_COMMIT_FAILED)
        try:
            await self.app.stop()
        finally:
            os._exit(EXIT_COMMIT_FAILED)

    # -- assignment --------------------------------------------------------------
    async def _take_over(self) -> None:
        """After faust sought the inputs to the group's offsets: seek to the stored positions.

        Runs before faust resumes the flow of records, once per assignment.
        Each input partition starts at the position stored with the
        partition's state; without one (a partition never processed, or rows
        of an earlier version), at the group's committed offset, else at the
        beginning.  A position below what retention kept starts at the
        earliest record left, with a warning.
        """
        async with self._lock:
            if self._stopping:
                return
            try:
                await self._finish_commit()
                await self._take_over_locked()
            except Exception as exc:  # noqa: BLE001 - e.g. the producer cannot be made
                await self._fail(exc, "taking over the assigned partitions")

    async def _take_over_locked(self) -> None:
        steps = _Laps()
        owned = faust_glue.active_partitions(self.app, self.topic_names[Role.REQUESTS])
        gone = self.gate.owned() - owned
        if gone:
            self._forget(gone)
        tps = [TP(self.topic_names[r], p) for p in sorted(owned) for r in INPUT_ROLES]
        # On connections of its own: on faust's, the request would wait behind a
        # fetch long-polling for new records (1.5 s of every takeover).
        got = await asyncio.get_running_loop().run_in_executor(
            self._probe_thread, partial(self.end_offsets.get, [(tp.topic, tp.partition)
                                                               for tp in tps], earliest=True))
        earliest = {tp: got[(tp.topic, tp.partition)] for tp in tps}
        steps.lap("earliest")
        committed = await faust_glue.committed_offsets(self.app, tps)
        steps.lap("committed")
        # Fence the previous owners first (exactly_once), then read what they
        # committed after faust's restore, and only then trust rows and positions.
        await self.committer.assign(owned)
        steps.lap("producers")
        await self._read_changelog_tail(owned)
        for p in sorted(owned):  # before anything of the partition is read
            await self._fill_restore(p)
        steps.lap("changelog")
        for p in sorted(owned):
            stored = self.store.positions(p)
            starts: dict[Role, int] = {}
            seeks: dict[TP, int] = {}
            for role in INPUT_ROLES:
                tp = TP(self.topic_names[role], p)
                start = stored.get(role) if stored is not None else None
                if start is None:
                    start = committed.get(tp)
                if start is None or start < earliest[tp]:
                    if start is not None:
                        log.warning("input position below the earliest record kept: records "
                                    "were deleted by retention before they were applied "
                                    "topic=%s partition=%d position=%d earliest=%d",
                                    tp.topic, p, start, earliest[tp])
                    start = earliest[tp]
                starts[role] = start
                seeks[tp] = start
            await faust_glue.seek(self.app, seeks)
            stream_time = stored.stream_time if stored is not None else 0
            self.positions[p] = self.durable[p] = Positions(starts, stream_time)
            self.gate.assign(p, starts)
            self.sequencer.assign(p, starts, stream_time)
        steps.lap("positions")
        for p in sorted(owned):
            await self._take_index(p)
        steps.lap("index")
        self._paused.clear()
        self._read_owned_inputs()
        # faust resumed them when the recovery completed; the reader reads them.
        self.app.consumer.pause_partitions(tps)
        self.ready.set()
        self._wake.set()
        log.info("partitions taken over partitions=%s positions=%s seconds=%.2f steps=%s",
                 sorted(owned), {p: {r.value: o for r, o in self.positions[p].next_offset.items()}
                                 for p in sorted(owned)}, steps.total(), steps)

    async def _on_revoked(self, sender: Any, revoked: set[TP], **kwargs: Any) -> None:
        """faust revokes partitions: wait for the batch in flight, then let them go."""
        topic = self.topic_names[Role.REQUESTS]
        await self._give_up({tp.partition for tp in revoked if tp.topic == topic})

    async def _on_stopping(self) -> None:
        """The worker stops: give every partition up before faust leaves the group.

        Otherwise the applier went on deciding what it held and committing it
        after faust had left the group, while the next owner restored the
        changelog without those commits and decided the same inputs again:
        2,809 duplicate outcomes under exactly_once in one long crash run, all
        from a second worker stopped with SIGTERM (its last transactions
        committed up to 4 s after it left).  A worker that fails gives nothing
        up here: it commits nothing more anyway, and the failing commit may be
        the one this would wait for.
        """
        if self.failure is not None:
            return
        self._stopping = True
        giving_up = asyncio.ensure_future(self._give_up(self.gate.owned()))
        done, _ = await asyncio.wait({giving_up}, timeout=STOP_COMMIT_WAIT_S)
        if not done:
            # A commit hanging on an unreachable broker: stop regardless, as a crash
            # would. Nothing of the batch is stored here; the next owner fences this
            # worker's transactions and reads whatever of it the changelog holds.
            log.warning("stopping with a batch still committing after %.0f s: the next "
                        "owner of its partitions decides it again", STOP_COMMIT_WAIT_S)
            return
        log.info("stopping: the batch in flight is committed, every partition given up")

    async def _give_up(self, partitions: set[int]) -> None:
        async with self._lock:
            await self._finish_commit()
            self.ready.clear()
            if partitions:
                self._forget(partitions)
                await self.committer.revoke(partitions)

    def _read_owned_inputs(self) -> None:
        """Have the input reader read the owned partitions from the next offsets expected."""
        self.reader.assign({(self.topic_names[role], p): expected
                            for p in self.gate.owned() for role in INPUT_ROLES
                            if (expected := self.gate.expected(role, p)) is not None})

    def _forget(self, partitions: set[int]) -> None:
        self.gate.revoke(partitions)
        self._read_owned_inputs()
        self._staged = [r for r in self._staged if r.partition not in partitions]
        self._paused = {tp for tp in self._paused if tp.partition not in partitions}
        self._stuck_since = {k: v for k, v in self._stuck_since.items() if k[1] not in partitions}
        for p in partitions:
            self._unstored.pop(p, None)
            self.sequencer.drop(p)
            self.positions.pop(p, None)
            self.durable.pop(p, None)
            self.index.drop(p)
            self.census.drop_partition(p)
            self.summaries.pop(p, None)

    async def _read_changelog_tail(self, owned: set[int]) -> None:
        """Apply what the changelog holds beyond the last record the restore applied.

        faust restores a partition before the worker takes it over, and only
        the take-over fences the previous owner (`committer.assign`).  An owner
        that went on committing in between (one stopping, or paused past its
        session timeout) left rows and positions the restore never saw, and
        the inputs behind them would be decided again.  After the fence
        nothing more arrives, so what is there now is read and applied on top,
        in order, as the restore would have.  Usually there is nothing to
        apply: the cost is a request for the end offsets and, under
        exactly_once (the end is a commit marker), a read of the last records
        (a takeover took 0.73 s at the median of a long crash run, 0.61 before).
        """
        if not owned:
            return
        loop = asyncio.get_running_loop()
        ends = await loop.run_in_executor(
            self._probe_thread, partial(self.end_offsets.get,
                                        [(self.changelog, p) for p in sorted(owned)]))
        starts = {p: self._changelog_next(p) for p in sorted(owned)}
        # The changelog's end is a transaction marker after every exactly_once batch:
        # compare with its last data record, not with its end offset.
        beyond = {p: end for p, start in starts.items()
                  if (end := ends[(self.changelog, p)]) > start}
        if not beyond:
            return
        for p, end in sorted((await self._data_ends(self.changelog, beyond)).items()):
            start = starts[p]
            if start >= end:
                continue
            # The generator reads when iterated: in the thread, not on the loop.
            records = await loop.run_in_executor(None, list, self._changelog(p, start, end))
            self.store.apply_changelog((p, r.offset, r.key, r.value) for r in records)
            self.counters["restore.tail_records"] += len(records)
            log.warning("changelog read past the restore topic=%s partition=%d offsets=%d..%d "
                        "records=%d (committed by the previous owner after the restore: "
                        "applied now)", self.changelog, p, start, end - 1, len(records))

    def _changelog_next(self, p: int) -> int:
        last = self.store.changelog_offset(p)
        return 0 if last is None else last + 1

    async def _data_ends(self, topic: str, ends: dict[int, int]) -> dict[int, int]:
        """`GapReader.data_ends` in a thread: the offset after each partition's last data record."""
        loop = asyncio.get_running_loop()
        found: dict[int, int] = await loop.run_in_executor(None, self.tails.data_ends, topic,
                                                           ends)
        return found

    def _changelog(self, p: int, start: int, stop: int) -> Iterator[InputRecord]:
        """Blocking: the records of changelog offsets [start, stop), read in chunks."""
        at = start
        while at < stop:
            chunk = self.gaps.read(Role.REQUESTS, self.changelog, p, at, stop,
                                   FILL_CHUNK)  # the role only labels the records
            yield from chunk
            if len(chunk) < FILL_CHUNK:
                return
            at = chunk[-1].offset + 1

    async def _fill_restore(self, p: int) -> None:
        """Read what lies below where a restore of this partition began, if anything does.

        A restore into an empty database (from a standby's first fetch, or
        an empty disk) remembers its first changelog offset
        (`TableStore.restored_from`).  faust may have dropped the records
        before it: they are read from the broker and applied under the
        newer ones (`TableStore.fill_below`) before the partition's rows are
        trusted.  Usually there is nothing below and this is one request.
        """
        first = self.store.restored_from(p)
        if first is None:
            return
        loop = asyncio.get_running_loop()
        try:
            got = await loop.run_in_executor(
                self._probe_thread, partial(self.end_offsets.get, [(self.changelog, p)],
                                            earliest=True))
            start = got[(self.changelog, p)]
            filled, read = await loop.run_in_executor(None, self._fill_below, p, start, first)
        except Exception as exc:  # noqa: BLE001 - rows may be missing: never take it over so
            await self._fail(exc, f"reading {self.changelog}[{p}] below offset {first}")
            return
        self.counters["restore.filled_rows"] += filled
        if start >= first:
            return  # the restore began at the changelog's first record
        log.log(logging.WARNING if filled else logging.INFO,
                "changelog below the restore read topic=%s partition=%d offsets=%d..%d "
                "records=%d rows_filled=%d%s", self.changelog, p, start, first - 1, read,
                filled, " (the restore had skipped them)" if filled else "")

    def _fill_below(self, p: int, start: int, stop: int) -> tuple[int, int]:
        """Blocking: read changelog offsets [start, stop) in chunks and fill them in."""
        read = 0

        def records() -> Iterator[tuple[bytes | None, bytes | None]]:
            nonlocal read
            for r in self._changelog(p, start, stop):
                read += 1
                yield r.key, r.value

        return self.store.fill_below(p, records()), read

    async def _take_index(self, p: int) -> None:
        """Take a partition's timer index and census from its database.

        Nothing is read per row: both are stored with the rows.  Only a
        database written by an earlier version (no summary) is read once,
        row head by row head, to build them.
        """
        summary = self.store.summary(p)
        if summary is None:
            summary = await self._build_index(p)
        self.summaries[p] = summary
        self.census.replace_partition(p, Counter(summary.waits))
        self.index.take(p, summary.low)

    async def _build_index(self, p: int) -> Summary:
        """Build a partition's timer index and summary from its rows (reading only heads)."""
        started = time.monotonic()
        summary = Summary()
        puts: list[tuple[bytes, bytes]] = []
        rows = unreadable = 0
        for _, key, value in owned_rows(self.waits, {p}, self.settings.partitions):
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
                summary.waits[key_of] += 1
            _, new = index_changes(key.decode(), (), head.timers)
            puts += new
            summary.armed += len(new)
            for t in head.timers:
                summary.low = min(summary.low, t.due_at)
        self.store.write_index(p, puts, summary)
        log.info("timer index built from rows partition=%d rows=%d timers=%d unreadable=%d "
                 "seconds=%.2f", p, rows, summary.armed, unreadable, time.monotonic() - started)
        return summary

    # -- the punctuator --------------------------------------------------------
    def _producer(self) -> Producer:
        if self._timer_producer is None:
            self._timer_producer = Producer(self.settings.confluent(**{
                "partitioner": "murmur2_random", "acks": "all", "linger.ms": 2,
                "enable.idempotence": True,
            }))
        return self._timer_producer

    async def _punctuate_forever(self) -> None:
        """A tick, then `timer_tick` seconds' sleep, for as long as the app runs.

        Not faust's `app.timer`, which logs a WARNING ("Timer ... is
        overlapping") for every tick that takes longer than its interval.
        Under a backlog most ticks do - each waits for the event loop between
        batches and for its timer records' acknowledgements - and a timer
        storm logged one a second: noise in the logs of a worker that is only
        busy.  Each tick's duration is in /xwait/stats (`latencyMs.tick`).
        """
        while True:
            await asyncio.sleep(self.settings.timer_tick)
            await self._punctuate()

    async def _punctuate(self) -> None:
        """Probe the inputs' end offsets (stream time), then emit the timers due by it."""
        if self.app.rebalancing or not self.ready.is_set() or self.failure is not None:
            self.counters["punctuator.skipped"] += 1
            return
        owned = self.gate.owned()
        if not owned:
            return
        started = time.monotonic()
        try:
            await self._probe(owned)
            self._wake.set()
            await self._emit_due(owned)
            await self._commit_group_offsets(owned)
        except (KafkaException, TimeoutError) as exc:  # the broker is away: next tick again
            log.warning("punctuator tick failed: %s", exc)
        self.latency.add("tick", round((time.monotonic() - started) * 1000))

    def _probe_in_background(self) -> None:
        """Probe while the applier decides: records held for proof need not wait for a tick.

        A record is released once no other input topic of its partition can
        still hold an older one; a topic with nothing fetched proves that only
        by a probe sent after the record was appended.  The applier used to
        probe only when it had nothing staged, so under a steady load records
        of a partition whose commands topic was quiet waited for the
        punctuator's next probe (up to a tick).  The probe goes to its own
        thread; its answer wakes the applier.
        """
        if self._background_probe is not None and not self._background_probe.done():
            return
        self._background_probe = asyncio.ensure_future(self._probe_and_wake())

    async def _probe_and_wake(self) -> None:
        try:
            early = PROBE_MIN_S - (time.monotonic() - self._last_probe)
            if early > 0:
                await asyncio.sleep(early)
            if await self._probe_now():
                self._wake.set()
        except Exception as exc:  # noqa: BLE001 - a bug here must stop the worker, loudly
            await self._fail(exc, "probing the inputs' end offsets")

    async def _probe_now(self) -> bool:
        """A probe the applier asks for: records wait for proof that nothing older is left."""
        if self._probing.locked() or time.monotonic() - self._last_probe < PROBE_MIN_S:
            return False
        try:
            await self._probe(self.gate.owned())
        except (KafkaException, TimeoutError) as exc:
            log.warning("probe failed: %s", exc)
            return False
        return True

    async def _probe(self, owned: set[int]) -> None:
        async with self._probing:
            self._last_probe = time.monotonic()
            tps = [TP(self.topic_names[r], p) for p in sorted(owned) for r in INPUT_ROLES]
            at = now_ms()  # before the request leaves: records appended later are not below
            loop = asyncio.get_running_loop()
            got = await loop.run_in_executor(self._probe_thread, self.end_offsets.get,
                                             [(tp.topic, tp.partition) for tp in tps])
            ends = {TP(t, p): end for (t, p), end in got.items()}
            self.ends = ends
            self.counters["probes"] += 1
            self.sequencer.probed(at, [(self.role_by_topic[tp.topic], tp.partition, end)
                                       for tp, end in ends.items()])

    def armed_timers(self) -> int:
        owned = self.gate.owned()
        return sum(s.armed for p, s in self.summaries.items() if p in owned)

    def input_lag(self) -> dict[tuple[str, int], int]:
        """Per owned input partition: records not yet applied, as of the last probe."""
        lag: dict[tuple[str, int], int] = {}
        for tp, end in self.ends.items():
            pos = self.positions.get(tp.partition)
            if pos is None:
                continue
            at = pos.get(self.role_by_topic[tp.topic])
            if at is not None:
                lag[(tp.topic, tp.partition)] = max(0, end - at)
        return lag

    async def _emit_due(self, owned: set[int]) -> None:
        times = {p: t for p, t in self.sequencer.times().items() if p in owned}
        scan = time.perf_counter()
        due = self.index.pop_due(times, self.settings.timer_batch, self._in_flight(owned))
        self.latency.add("scan_us", round((time.perf_counter() - scan) * 1e6))
        if not due:
            return
        try:
            producer = self._producer()
        except KafkaException as exc:
            for t in due:
                self.index.requeue(t)
            await self._fail(exc, "creating the timer producer")
            return
        failed: list[DueTimer] = []

        def delivered(timer: DueTimer) -> Callable[[KafkaError | None, object], None]:
            def report(err: KafkaError | None, _msg: object) -> None:
                if err is not None:
                    failed.append(timer)
            return report

        fired = now_ms()
        for t in due:
            producer.produce(self.topic_names[Role.TIMERS], key=t.wait_key.encode(),
                             value=timer_record(t.wait_key, t.kind, t.due_at, t.generation, fired),
                             partition=t.partition, on_delivery=delivered(t))
        remaining = await asyncio.get_running_loop().run_in_executor(None, producer.flush, 10.0)
        if remaining:
            failed = list(due)  # not known which: emitting one twice is harmless
        for t in failed:
            self.index.requeue(t)
        if failed:
            self.counters["timers.failed"] += len(failed)
            log.warning("timer records not delivered count=%d: emitted again next tick",
                        len(failed))
        self.counters["timers.emitted"] += len(due) - len(failed)

    async def _commit_group_offsets(self, owned: set[int]) -> None:
        if time.monotonic() - self._last_group_commit < GROUP_COMMIT_INTERVAL_S:
            return
        self._last_group_commit = time.monotonic()
        offsets = {TP(self.topic_names[role], p): offset
                   for p in owned if p in self.durable
                   for role, offset in self.durable[p].next_offset.items()}
        await faust_glue.commit_group_offsets(self.app, offsets)

    # -- web ---------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        owned = self.owned_partitions()
        waits: Counter[str] = Counter()
        for (state, _definition), n in self.census.totals(owned).items():
            waits[state] += n
        return {
            "counters": dict(self.counters),
            "ownedPartitions": sorted(owned),
            "armedTimers": self.armed_timers(),
            "timersInFlight": self.index.in_flight(),
            "waits": dict(waits),
            "guarantee": self.settings.guarantee.value,
            "streamTime": {str(p): t for p, t in sorted(self.sequencer.times().items())},
            "held": self.sequencer.held(),
            "latencyMs": self.latency.summary(),
            "gcThreshold": list(gc.get_threshold()),
            "gcPasses": None if self.gc_watch is None else list(self.gc_watch.passes),
            "positions": {str(p): {r.value: o for r, o in pos.next_offset.items()}
                          for p, pos in sorted(self.positions.items())},
        }


def build_app(settings: Settings, definitions: Mapping[str, WaitDefinition] | None = None
              ) -> faust.App:
    if definitions is None:
        definitions = load_definitions(settings.topology / "waits")
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    codec.configure(settings)  # the Confluent wire format when a registry is set
    worker = Worker(settings, definitions)
    worker.store.check()
    app: faust.App = worker.app
    app.xwait = worker  # type: ignore[attr-defined]
    return app


def run(settings: Settings) -> None:
    """Run a worker in this process until it is stopped (SIGTERM / Ctrl-C)."""
    app = build_app(settings)
    collector.tune(settings.gc_threshold)
    watch = collector.GcWatch(app.xwait.latency)  # type: ignore[attr-defined]
    watch.install()
    app.xwait.gc_watch = watch  # type: ignore[attr-defined]
    # faust's logging set-up leaves the client libraries' loggers open to
    # DEBUG: aiokafka then builds a log record per fetch and per send (a
    # tenth of a worker's CPU, measured with py-spy) only to drop it.
    floor = logging.DEBUG if settings.log_level == "debug" else logging.INFO
    for name in ("aiokafka", "kafka", "faust", "mode"):
        logging.getLogger(name).setLevel(floor)
    sys.argv = ["xwait", "worker", f"--loglevel={settings.log_level}",
                f"--web-port={settings.web_port}", f"--web-host={settings.advertised_host}",
                f"--web-bind={settings.web_host}"]
    app.main()


__all__ = ["BATCH_MAX", "ROCKSDB_OPTIONS", "TABLE_WAITS", "Worker", "build_app", "run"]
