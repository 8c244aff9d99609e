"""``XwaitClient``: start waits, send replies (commands and results: commands.py), on Kafka.

Every method validates its arguments against the wait definitions in
``<topology>/waits`` *before* anything is produced, so a typo is an exception
at the caller, not a ``Rejected`` record found hours later. Each single-record
method waits for Kafka's acknowledgement and raises :class:`DeliveryFailed`
when there is none: a wait that was never parked must not look started.

Producer settings, and why:

* ``partitioner=murmur2_random`` - librdkafka's default is CRC32; Java clients
  and aiokafka (the processor) hash with murmur2. With CRC32 a reply would land
  on another partition than its request and meet it only after the processor
  forwarded it.
* ``enable.idempotence=true``, ``acks=all`` - a retried send is written once,
  in order, and only acknowledged when the in-sync replicas have it.
* ``linger.ms=5`` - batches ``start_many`` without delaying single sends noticeably.
* ``message.timeout.ms`` below the flush timeout - every record gets a delivery
  report (success or error) before :meth:`XwaitClient.flush` gives up waiting.

Before a reply or an operator command, the client asks a worker's web API
(``settings.console_url``) whether a wait has that key (one GET of one row):
a key nobody parked raises :class:`NoSuchWait` at once instead of becoming an
``unmatched`` rejection ten minutes later, and a reply's channel is checked
against that wait's own definition. ``force=True`` skips the check (a reply
that overtakes its request); when no worker answers, the record is sent
unchecked, as before. ``check_keys=False`` turns the check off for a client
that sends in bulk or already knows its keys.

The client is meant for one thread at a time; create one per thread."""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, overload

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from streams import codec, config
from streams.client import _console
from streams.client._kafka import build, known_topics
from streams.client.commands import Commands, check_key, json_text, wait_key_of
from streams.client.consumer import XwaitConsumer
from streams.client.errors import (
    DeliveryFailed,
    InvalidRequest,
    NoSuchWait,
    ResultTimeout,
    UnknownChannel,
    UnknownDefinition,
)
from streams.client.receipts import RECEIPT_TIMEOUT_S, ReceiptReader, new_receipt_id
from streams.client.records import Action, Outcome, Receipt, Rejected
from streams.client.results import (
    RESULT_LOOKBACK_MS,
    RESULT_POLL_S,
    RESULT_TIMEOUT_S,
    ResultReader,
)
from streams.client.waits import WaitKey, WaitSpec, new_correlation_key, request_traceparent
from streams.codec import RecordType
from streams.core.definition import Variant, WaitDefinition
from streams.core.durations import parse_duration_ms
from streams.core.events import PARTY_SEPARATOR
from streams.definitions import load_definitions
from streams.headers import RECEIPT, TRACEPARENT, Headers
from streams.kafka_errors import error_text
from streams.partitioning import partition_for

__all__ = ["WaitKey", "WaitSpec", "XwaitClient", "new_correlation_key"]

log = logging.getLogger(__name__)

MESSAGE_TIMEOUT_MS = 30_000
"""librdkafka gives up on a record after this long and reports the error. Its default
(300 s) would let a CLI hang for five minutes against a broker that went away."""

FLUSH_TIMEOUT_S = MESSAGE_TIMEOUT_MS / 1000 + 5.0
"""Longer than MESSAGE_TIMEOUT_MS, so every record has its delivery report before flush
returns; a record still unconfirmed after this is reported as failed, never dropped."""

REQUEST_IN_FLIGHT_MS = 10 * 60_000
"""How far back the requests topic is searched when a worker does not know a key: a
request written within this long may still be on its way to a busy or restarting
worker (the default early-reply TTL is as long), so its key is not "unknown"."""

ProgressCallback = Callable[[int, int], None]


class XwaitClient(Commands):
    """Produces StartWait, Reply and Command records; see the module docstring.

    ``settings`` defaults to :func:`streams.config.from_env`; ``bootstrap``
    overrides its broker address. Use as a context manager (or call
    :meth:`close`) so that nothing produced is left unflushed.
    """

    def __init__(self, settings: config.Settings | None = None, *,
                 bootstrap: str | None = None, check_keys: bool = True) -> None:
        base = settings if settings is not None else config.from_env()
        self.settings = base.with_overrides(bootstrap=bootstrap)
        self.check_keys = check_keys
        self._codec = codec.for_settings(self.settings)
        self._started: dict[str, int] = {}  # key -> requestedAt of waits this client started
        self._definitions: dict[str, WaitDefinition] | None = None
        self._producer: Producer | None = None
        self._topics: set[str] = set()
        self._in_flight: dict[int, str] = {}
        self._failed: list[tuple[str, str]] = []
        self._delivered = 0
        self._seq = 0

    # -- definitions -----------------------------------------------------------

    @property
    def definitions(self) -> Mapping[str, WaitDefinition]:
        """The wait definitions of ``<topology>/waits``, loaded once (DefinitionError if broken)."""
        if self._definitions is None:
            # Names, variants and channels are all the client reads: the JSON
            # Schemas are the workers' to check (and `xwait definitions`').
            self._definitions = load_definitions(self.settings.topology / "waits",
                                                 check_schemas=False)
        return self._definitions

    def _stored_versions(self) -> tuple[str, dict[str, list[str]]]:
        """Every version ``<prefix>.definitions`` holds (what workers may decide with), by
        name: read to its end on each call, as versions are published and removed while
        this client lives (a few hundred small records: milliseconds)."""
        from streams.definition_store import TOPIC_ROLE, DefinitionStore

        topic = self.settings.topic(TOPIC_ROLE)
        self._ready(topic)  # the broker, and the topic, within the connect timeout
        versions: dict[str, list[str]] = {}
        for stored in DefinitionStore(self.settings).read_all().values():
            if stored is not None:
                versions.setdefault(stored.name, []).append(stored.version)
        return topic, versions

    def _definition(self, name: str) -> WaitDefinition:
        found = self.definitions.get(name)
        if found is None:
            raise UnknownDefinition(name, list(self.definitions),
                                    str(self.settings.topology / "waits"))
        return found

    # -- waits -----------------------------------------------------------------

    def start_wait(self, definition: str, *, correlation_key: str | None = None,
                   tenant: str | None = None, payload: Any = None,
                   parties: Sequence[str] = (), deadline: str | None = None,
                   traceparent: str | None = None) -> WaitKey:
        """Park a new wait and return its key (a fresh 128-bit one unless given).

        The request is sent with a W3C ``traceparent`` header: ``traceparent`` if
        given, else the caller's current OpenTelemetry span's, else a fresh trace; the
        key returned carries it (``key.traceparent``), and the wait's actions and
        outcome carry it too.  Returns once Kafka acknowledged the StartWait; raises
        :class:`InvalidRequest` (nothing produced) or :class:`DeliveryFailed`.
        """
        return self.start_many([WaitSpec(definition, correlation_key, tenant, payload,
                                         parties, deadline, traceparent)])[0]

    def start_many(self, items: Iterable[WaitSpec],
                   on_progress: ProgressCallback | None = None) -> list[WaitKey]:
        """Park a batch of waits, each with its own key and deadline; return the keys in order.

        Every item is validated before the first is produced, so a bad item
        leaves the topic untouched. One flush at the end; ``on_progress(done,
        total)`` is called as Kafka acknowledges records. On failure,
        :class:`DeliveryFailed` lists the keys that did not make it.
        """
        specs = list(items)
        if not specs:
            return []
        now_ms = int(time.time() * 1000)
        records = []
        traces = []
        for i, spec in enumerate(specs):
            where = f"item {i}: " if len(specs) > 1 else ""
            try:
                records.append(self._start_record(spec, now_ms, where))
                traces.append(request_traceparent(spec.traceparent, where))
            except InvalidRequest as exc:
                if len(specs) > 1:
                    exc.item = i
                    if not str(exc).startswith(f"item {i}: "):
                        exc.args = (f"item {i}: {exc}",)
                raise
        keys = [r["correlationKey"] for r in records]
        if len(set(keys)) != len(keys):
            raise InvalidRequest("the batch names the same correlation key more than once")
        topic = self.settings.topic("requests")
        self._ready(topic)
        total = len(records)
        for record, trace in zip(records, traces, strict=True):
            self._produce(topic, record["correlationKey"], RecordType.START_WAIT, record,
                          ((TRACEPARENT, trace.encode()),))
            if on_progress is not None:
                on_progress(self._delivered, total)
        self._flush(FLUSH_TIMEOUT_S, on_progress, total)
        self._started.update((key, now_ms) for key in keys)
        return [WaitKey(key, trace) for key, trace in zip(keys, traces, strict=True)]

    def _start_record(self, spec: WaitSpec, now_ms: int, where: str) -> dict[str, Any]:
        d = self._definition(spec.definition)
        key = spec.correlation_key if spec.correlation_key is not None else new_correlation_key()
        check_key(key, f"{where}correlation key")
        parties = list(spec.parties)
        if isinstance(spec.parties, str):
            raise InvalidRequest(f"{where}parties must be a list of names, not a string")
        if parties and d.variant is not Variant.FIRST_VALID:
            raise InvalidRequest(
                f"{where}parties are only for a first-valid definition; {d.name!r} is "
                f"{d.variant.value}")
        if d.variant is Variant.FIRST_VALID and not (parties or d.parties):
            raise InvalidRequest(
                f"{where}definition {d.name!r} is first-valid and names no default "
                "parties: give parties")
        if len(set(parties)) != len(parties) or any(
                not isinstance(p, str) or not p or PARTY_SEPARATOR in p for p in parties):
            raise InvalidRequest(
                f"{where}parties must be distinct, non-empty names without "
                f"{PARTY_SEPARATOR!r}, got {parties}")
        if spec.deadline is not None:
            try:
                parse_duration_ms(spec.deadline)
            except ValueError as exc:
                raise InvalidRequest(f"{where}deadline: {exc}") from None
        return {
            "correlationKey": key,
            "definition": d.name,
            "tenant": spec.tenant,
            "payload": None if spec.payload is None else json_text(spec.payload,
                                                                    f"{where}payload"),
            "parties": parties,
            "deadline": spec.deadline,
            "requestedAt": now_ms,
        }

    # -- replies ---------------------------------------------------------------

    def reply(self, correlation_key: str, response_data: Any, *, channel: str,
              tenant: str | None = None, reply_id: str | None = None,
              sent_at: int | None = None, force: bool = False,
              wait: bool | float = False) -> Receipt | None:
        """Answer a wait: ``correlation_key`` is ``WAITKEY`` or ``WAITKEY~PARTY``.

        The Kafka key is WAITKEY either way, so the reply lands in its wait's
        partition. ``response_data`` is JSON text or a JSON-serialisable value.
        Raised before anything is produced: :class:`NoSuchWait` when a worker
        says no wait has the key (``force=True`` sends anyway, for a reply
        that overtakes its request), :class:`UnknownChannel` when the wait's
        definition (or, unchecked, every definition) refuses ``channel``.
        ``reply_id`` lets the processor drop a retry.

        ``wait=True`` (or a timeout in seconds; True: ``RECEIPT_TIMEOUT_S``) returns
        what the worker made of the reply, its :class:`Receipt`: ``won`` (with the
        outcome, or the winning party), ``held`` (before its request, until
        ``held_until``; or while its wait is suspended), ``late``, ``duplicate``,
        ``tenant_mismatch``, ``in_review`` (with the validation issue), ``escalated``,
        ``recorded`` (a probe's not-ready result) or ``rejected`` (with the reason),
        each with the broker time it was decided at; :class:`ReceiptTimeout` when none
        came in time.  Without ``wait`` it returns None once Kafka took the reply.
        """
        wait_key = wait_key_of(correlation_key)
        if not isinstance(channel, str) or not channel:
            raise InvalidRequest(f"channel must be a non-empty string, got {channel!r}")
        found = self._check_wait(wait_key, force, "reply")
        self._check_channel(channel, None if found is None else found.get("definition"))
        record = {
            "correlationKey": correlation_key,
            "tenant": tenant,
            "channel": channel,
            "responseData": json_text(response_data, "response data"),
            "replyId": reply_id,
            "sentAt": sent_at,
        }
        return self._send_one("replies", wait_key, RecordType.REPLY, record, wait)

    def _check_channel(self, channel: str, definition: str | None) -> None:
        """Refuse a channel the wait's definition lacks (a definition without channels takes any).

        Without the wait's definition (no worker answered, or ``force``), a
        channel no definition accepts is refused.
        """
        own = self.definitions.get(definition) if definition is not None else None
        if own is not None:
            if own.channels and channel not in own.channels:
                raise UnknownChannel(channel, own.channels, own.name)
            return
        defs = self.definitions.values()
        if any(not d.channels or channel in d.channels for d in defs):
            return
        raise UnknownChannel(channel, sorted({c for d in defs for c in d.channels}))

    def _check_wait(self, wait_key: str, force: bool, sending: str | None
                    ) -> dict[str, Any] | None:
        """The wait's status from a worker; NoSuchWait when it answers 404; None if unknown.

        ``sending`` names what would not be sent, for the error (None: nothing is).
        """
        if force or not self.check_keys:
            return None
        base = self.settings.console_url
        try:
            status, body = _console.get(
                base, _console.wait_path(wait_key), timeout=_console.CHECK_TIMEOUT_S,
                token=self.settings.console_read_token or self.settings.console_token)
        except _console.ConsoleUnreachable as exc:
            log.info("key not checked key=%s: %s", wait_key, exc)
            return None
        if status == 404 and isinstance(body, dict):
            if wait_key in self._started or self._recently_requested(wait_key):
                return None  # parked a moment ago: its request is on its way to the worker
            raise NoSuchWait(wait_key, base, int(body.get("earlyReplies") or 0),
                             int(body.get("earlyCommands") or 0), sending)
        if status != 200 or not isinstance(body, dict):
            log.info("key not checked key=%s status=%s", wait_key, status)  # 503: rebalance
            return None
        return body

    def _recently_requested(self, wait_key: str) -> bool:
        """Whether a StartWait for the key was written in the last REQUEST_IN_FLIGHT_MS.

        A worker answers 404 for a wait whose request it has not processed yet
        (`KEY=$(xwait start ...); xwait reply $KEY`): only the requests topic
        knows such a key. One partition, the last few minutes, keys compared
        without decoding: read only on the rare 404 path.
        """
        topic = self.settings.topic("requests")
        wanted = wait_key.encode("utf-8")
        consumer = build(Consumer, self.settings.confluent(**{
            "group.id": f"xwait-client-{secrets.token_hex(8)}", "enable.auto.commit": False,
            "enable.partition.eof": True, "client.id": "xwait-client"}))
        ask = self.settings.connect_timeout
        try:
            meta = consumer.list_topics(topic, timeout=ask).topics.get(topic)
            if meta is None or not meta.partitions:
                return False
            tp = TopicPartition(topic, partition_for(wanted, len(meta.partitions)),
                                int(time.time() * 1000) - REQUEST_IN_FLIGHT_MS)
            [start] = consumer.offsets_for_times([tp], timeout=ask)
            if start.offset < 0:
                return False  # nothing written since then
            consumer.assign([start])
            deadline = time.monotonic() + ask
            while time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                if msg is None:
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:  # noqa: SLF001 - public
                        return False
                    continue
                if msg.key() == wanted:
                    return True
            return False
        except KafkaException:
            return False  # cannot tell: treat the key as unknown, as the worker says
        finally:
            consumer.close()

    # -- consuming -------------------------------------------------------------

    @overload
    def subscribe(self, kind: Literal["outcomes"], *, group_id: str | None = ...,
                  from_beginning: bool = ...) -> XwaitConsumer[Outcome]: ...

    @overload
    def subscribe(self, kind: Literal["actions"], *, group_id: str | None = ...,
                  from_beginning: bool = ...) -> XwaitConsumer[Action]: ...

    @overload
    def subscribe(self, kind: Literal["rejected"], *, group_id: str | None = ...,
                  from_beginning: bool = ...) -> XwaitConsumer[Rejected]: ...

    @overload
    def subscribe(self, kind: str, *, group_id: str | None = ...,
                  from_beginning: bool = ...) -> XwaitConsumer[Any]: ...

    def subscribe(self, kind: str, *, group_id: str | None = None,
                  from_beginning: bool | None = None) -> XwaitConsumer[Any]:
        """A consumer of ``outcomes``, ``actions`` or ``rejected`` as typed records.

        With a ``group_id`` offsets are committed (at least once, see
        :class:`XwaitConsumer`) and a group's first run starts at the oldest
        record (``from_beginning`` defaults to True), so nothing written
        before it first joined is missed. Without, it is a throw-away reader
        of what is written from now on. For the outcome of one wait, use
        :meth:`result`.
        """
        if from_beginning is None:
            from_beginning = group_id is not None
        return XwaitConsumer(kind, self.settings, group_id=group_id,
                             from_beginning=from_beginning)

    # -- results ---------------------------------------------------------------

    def result(self, correlation_key: str, *, timeout: float = RESULT_TIMEOUT_S,
               since_ms: int | None = None) -> Outcome:
        """The outcome of one wait: the first record for its key on ``<prefix>.outcomes``.

        Returns at once when the wait already ended, else when it ends;
        raises :class:`ResultTimeout` after ``timeout`` seconds, and
        :class:`NoSuchWait` when a worker says no wait has the key and the
        outcomes topic holds none for it either.

        Only the key's partition is read, from ``since_ms`` (epoch ms) on:
        default, the wait's ``requestedAt`` for a wait this client started,
        else its ``parkedAt`` as a worker reports it, else the oldest record
        kept (a finished wait's row is purged after its retention; its
        outcome stays on the topic longer).
        """
        reader = self._result_reader(correlation_key, since_ms)
        try:
            deadline = time.monotonic() + timeout
            while True:
                found = reader.step(min(0.5, max(0.0, deadline - time.monotonic())))
                if found is not None:
                    return found
                if time.monotonic() >= deadline:
                    raise ResultTimeout(correlation_key, timeout)
        finally:
            reader.close()

    async def result_async(self, correlation_key: str, *, timeout: float = RESULT_TIMEOUT_S,
                           since_ms: int | None = None) -> Outcome:
        """:meth:`result` for asyncio code: the blocking reads run in a worker thread.

        They run in slices of a fraction of a second, so cancelling the task
        (or ``asyncio.timeout``) frees the thread promptly.
        """
        import asyncio  # here: importing it costs every CLI command 45 ms

        reader = await asyncio.to_thread(self._result_reader, correlation_key, since_ms)
        try:
            deadline = time.monotonic() + timeout
            while True:
                slice_s = min(RESULT_POLL_S, max(0.0, deadline - time.monotonic()))
                found = await asyncio.to_thread(reader.step, slice_s)
                if found is not None:
                    return found
                if time.monotonic() >= deadline:
                    raise ResultTimeout(correlation_key, timeout)
        finally:
            await asyncio.to_thread(reader.close)

    def _result_reader(self, correlation_key: str, since_ms: int | None) -> ResultReader:
        check_key(correlation_key, "correlation key")
        unknown_to_workers = False
        if since_ms is None and correlation_key in self._started:
            since_ms = self._started[correlation_key] - RESULT_LOOKBACK_MS
        elif since_ms is None:
            try:
                wait = self._check_wait(correlation_key, False, None)
            except NoSuchWait:
                unknown_to_workers = True  # its outcome may outlive its row: look anyway
            else:
                parked = None if wait is None else wait.get("parkedAt")
                if isinstance(parked, int):
                    since_ms = parked - RESULT_LOOKBACK_MS
        consumer = XwaitConsumer("outcomes", self.settings, key=correlation_key,
                                 from_beginning=since_ms is None, since_ms=since_ms)
        return ResultReader(consumer, correlation_key, self.settings.console_url,
                             unknown_to_workers)

    # -- Kafka -----------------------------------------------------------------

    def _ready(self, topic: str) -> Producer:
        """The producer, after one metadata round trip proved the broker and ``topic`` exist."""
        if self._producer is None:
            self._producer = build(Producer, self.settings.confluent(**{
                "partitioner": "murmur2_random",
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": MESSAGE_TIMEOUT_MS,
                "client.id": "xwait-client",
            }))
        if topic not in self._topics:
            self._topics = known_topics(self._producer, self.settings, topic)
        return self._producer

    def _send_one(self, role: str, key: str, record_type: RecordType,
                  record: Mapping[str, Any], wait: bool | float = False) -> Receipt | None:
        """Produce one record and wait for Kafka's acknowledgement; with ``wait``, then for
        its receipt (`streams.client.receipts`: placed at the receipts' end first)."""
        topic = self.settings.topic(role)
        self._ready(topic)
        if wait is False:
            self._produce(topic, key, record_type, record)
            self.flush()
            return None
        timeout = RECEIPT_TIMEOUT_S if wait is True else float(wait)
        if timeout <= 0:
            raise InvalidRequest(f"wait must be True or a number of seconds above 0, "
                                 f"got {wait!r}")
        receipt_id = new_receipt_id()
        with ReceiptReader(self.settings, receipt_id) as reader:
            self._produce(topic, key, record_type, record, ((RECEIPT, receipt_id.encode()),))
            self.flush()
            what = str(record.get("command") or record_type.value).lower()
            return reader.wait(timeout, f"{what} of {key!r}")

    def _produce(self, topic: str, key: str, record_type: RecordType,
                 record: Mapping[str, Any], headers: Headers | None = None) -> None:
        producer = self._ready(topic)
        value = self._codec.encode(record_type, record)
        self._seq += 1
        token = self._seq
        self._in_flight[token] = key

        def delivered(err: KafkaError | None, _msg: Message) -> None:
            self._in_flight.pop(token, None)
            if err is None:
                self._delivered += 1
            else:
                self._failed.append((key, str(err.str())))

        while True:
            try:
                producer.produce(topic, key=key.encode("utf-8"), value=value,
                                 on_delivery=delivered,
                                 headers=list(headers) if headers else None)
                break
            except BufferError:
                producer.poll(0.1)  # local queue full: let deliveries drain, then retry
            except KafkaException as exc:
                self._in_flight.pop(token, None)
                self._failed.append((key, error_text(exc)))
                break
        producer.poll(0)

    def flush(self, timeout: float = FLUSH_TIMEOUT_S) -> int:
        """Wait for every record produced so far; return how many Kafka acknowledged.

        Raises :class:`DeliveryFailed` naming each key Kafka refused or did not
        confirm within ``timeout`` seconds.
        """
        return self._flush(timeout, None, None)

    def _flush(self, timeout: float, on_progress: ProgressCallback | None,
               total: int | None) -> int:
        if self._producer is not None:
            deadline = time.monotonic() + timeout
            while self._in_flight and time.monotonic() < deadline:
                self._producer.flush(min(0.1, max(0.0, deadline - time.monotonic())))
                if on_progress is not None:
                    on_progress(self._delivered, total or self._delivered + len(self._in_flight))
        failed = self._failed + [(key, f"not confirmed within {timeout:g} s")
                                 for key in self._in_flight.values()]
        delivered = self._delivered
        self._failed, self._in_flight, self._delivered = [], {}, 0
        if failed:
            raise DeliveryFailed(failed, delivered)
        return delivered

    def close(self) -> None:
        """Flush what is pending (raising on failures) and release the producer."""
        try:
            self.flush()
        finally:
            self._producer = None

    def __enter__(self) -> XwaitClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.close()
        else:  # do not hide the original error behind a flush failure
            try:
                self.close()
            except DeliveryFailed:
                log.warning("records not delivered while handling another error", exc_info=True)
