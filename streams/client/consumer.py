"""``XwaitConsumer``: the processor's outputs (outcomes, actions, rejected) as typed records.

Reads with ``isolation.level=read_committed``, so records of a processor
transaction that was aborted (exactly-once mode) are never seen.

Offsets, when a ``group_id`` is given: a record counts as processed when the
caller asks for the next one (or leaves the ``with`` block without an
error), and only then is its offset stored for the periodic auto-commit. A
consumer that crashes while handling a record therefore sees it again after
restart (at least once), and never skips one. Without ``group_id`` the
consumer is a throw-away reader (a unique group, nothing committed), as
``xwait tail`` uses it.

Where reading starts, for a partition without a committed offset: the
oldest record with ``from_beginning``, else the first record written after
the consumer was created (``since_ms``, found by timestamp). Not "the end
of the partition when the group finally assigns it": joining a group takes
a moment, and a record produced meanwhile (the outcome of the wait just
started, say) would be skipped. A group with committed offsets continues
from them either way.

With ``key``, only records of that wait key are returned; a throw-away
reader then reads only the one partition the key hashes to.
"""

from __future__ import annotations

import logging
import time
import uuid
from types import TracebackType
from typing import Any, Generic, Literal, TypeVar, overload

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from streams import codec, config
from streams.client._kafka import build, known_topics
from streams.client.errors import ClientError, InvalidRequest, TopicMissing, UndecodableOutput
from streams.client.records import Action, Outcome, Rejected
from streams.codec import UndecodableRecord
from streams.errors import KafkaUnavailable
from streams.kafka_errors import error_code, error_text
from streams.partitioning import partition_for

__all__ = ["Kind", "XwaitConsumer"]

log = logging.getLogger(__name__)

Kind = Literal["outcomes", "actions", "rejected"]
_TYPES: dict[str, type[Outcome | Action | Rejected]] = {
    "outcomes": Outcome, "actions": Action, "rejected": Rejected,
}

T = TypeVar("T", Outcome, Action, Rejected)


class XwaitConsumer(Generic[T]):
    """Typed records from one output topic; iterate, or :meth:`poll` with a timeout."""

    # The overloads are alike in shape (duplicates lists the pair), deliberately: one a kind
    # of record, so that a type checker knows what a consumer of "outcomes" yields.
    @overload
    def __init__(self: XwaitConsumer[Outcome], kind: Literal["outcomes"],
                 settings: config.Settings | None = ..., *, group_id: str | None = ...,
                 from_beginning: bool = ..., key: str | None = ...,
                 since_ms: int | None = ...) -> None: ...

    @overload
    def __init__(self: XwaitConsumer[Action], kind: Literal["actions"],
                 settings: config.Settings | None = ..., *, group_id: str | None = ...,
                 from_beginning: bool = ..., key: str | None = ...,
                 since_ms: int | None = ...) -> None: ...

    @overload
    def __init__(self: XwaitConsumer[Rejected], kind: Literal["rejected"],
                 settings: config.Settings | None = ..., *, group_id: str | None = ...,
                 from_beginning: bool = ..., key: str | None = ...,
                 since_ms: int | None = ...) -> None: ...

    @overload
    def __init__(self, kind: str, settings: config.Settings | None = ..., *,
                 group_id: str | None = ..., from_beginning: bool = ...,
                 key: str | None = ..., since_ms: int | None = ...) -> None: ...

    def __init__(self, kind: str, settings: config.Settings | None = None, *,
                 group_id: str | None = None, from_beginning: bool = False,
                 key: str | None = None, since_ms: int | None = None) -> None:
        """``since_ms``: with ``from_beginning`` false, where a partition without a
        committed offset starts (epoch ms; default: now)."""
        if kind not in _TYPES:
            raise InvalidRequest(f"unknown output {kind!r}: expected one of {sorted(_TYPES)}")
        self.kind = kind
        self.settings = settings if settings is not None else config.from_env()
        self.topic = self.settings.topic(kind)
        self.key = key
        self._key_bytes = None if key is None else key.encode("utf-8")
        self._type: Any = _TYPES[kind]
        self._codec = codec.for_settings(self.settings)
        self._commits = group_id is not None
        self._start_ms = None if from_beginning else (
            since_ms if since_ms is not None else int(time.time() * 1000))
        self._pending: Message | None = None  # handed out, offset not stored yet
        self._headers: dict[str, str] = {}  # of the record poll returned last
        self._at_end: set[int] = set()  # partitions read up to their end (key mode)
        self._partitions: list[int] = []
        self._consumer = build(Consumer, self.settings.confluent(**{
            "group.id": group_id or f"xwait-client-{uuid.uuid4().hex}",
            # Only for partitions _place() leaves alone (none, today).
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.auto.commit": self._commits,
            "enable.auto.offset.store": False,
            "enable.partition.eof": key is not None,
            "client.id": "xwait-client",
        }))
        try:
            known_topics(self._consumer, self.settings, self.topic)
            if key is not None and group_id is None:
                # One partition holds the key's records: read it alone, no group.
                meta = self._consumer.list_topics(self.topic,
                                                  timeout=self.settings.connect_timeout)
                count = len(meta.topics[self.topic].partitions)
                own = TopicPartition(self.topic, partition_for(self._key_bytes or b"", count))
                self._consumer.assign(self._place([own], committed=False))
            else:
                self._consumer.subscribe([self.topic], on_assign=self._on_assign)
        except BaseException:
            self._consumer.close()
            raise

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        consumer.assign(self._place(partitions, committed=self._commits))

    def _place(self, partitions: list[TopicPartition], *, committed: bool
               ) -> list[TopicPartition]:
        """Start offsets: the committed one if any, else the beginning or ``since_ms``."""
        self._partitions = [tp.partition for tp in partitions]
        todo = partitions
        if committed:
            found = self._consumer.committed(partitions, timeout=self.settings.connect_timeout)
            todo = [tp for tp in found if tp.offset < 0]
            placed = [tp for tp in found if tp.offset >= 0]
        else:
            placed = []
        if not todo:
            return placed
        if self._start_ms is None:
            return placed + [TopicPartition(tp.topic, tp.partition, OFFSET_BEGINNING)
                             for tp in todo]
        asked = [TopicPartition(tp.topic, tp.partition, self._start_ms) for tp in todo]
        by_time = self._offsets_for_times(asked)
        # -1: no record at or after that time yet, so everything from now on is new.
        return placed + [TopicPartition(tp.topic, tp.partition,
                                        tp.offset if tp.offset >= 0 else OFFSET_END)
                         for tp in by_time]

    def _offsets_for_times(self, asked: list[TopicPartition]) -> list[TopicPartition]:
        """The broker's offsets for timestamps, retried while a fresh topic's leader settles."""
        ask = self.settings.connect_timeout
        deadline = time.monotonic() + ask
        while True:
            try:
                found: list[TopicPartition] = self._consumer.offsets_for_times(
                    asked, timeout=ask)
                return found
            except KafkaException as exc:
                if time.monotonic() >= deadline:
                    raise KafkaUnavailable(
                        f"{self.settings.bootstrap} did not say where to start reading "
                        f"{self.topic} within {ask:g} s: {error_text(exc)}") from exc
                time.sleep(0.2)  # NOT_LEADER... right after the topic was created

    @property
    def caught_up(self) -> bool:
        """With ``key``: every partition read has been read to its end at least once."""
        return bool(self._partitions) and self._at_end >= set(self._partitions)

    def poll(self, timeout: float = 1.0) -> T | None:
        """The next record, or None when none arrived within ``timeout`` seconds.

        Raises :class:`UndecodableOutput` for a record the codec cannot read;
        the consumer has moved past it, so calling again continues.
        """
        self._store_pending()
        msg = self._consumer.poll(timeout)
        if msg is None:
            return None
        err = msg.error()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:  # noqa: SLF001 - public constant
                self._at_end.add(int(msg.partition() or 0))
                return None
            if err.fatal():
                raise ClientError(f"{self.topic}: fatal consumer error: {err.str()}")
            if err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise TopicMissing(self.topic)
            log.warning("consumer error topic=%s error=%s", self.topic, err.str())
            return None
        self._pending = msg
        if self._key_bytes is not None and msg.key() != self._key_bytes:
            return None  # another wait's record: not decoded at all
        try:
            record = self._codec.decode(self._type.record_type, msg.value())
        except UndecodableRecord as exc:
            raise UndecodableOutput(str(msg.topic()), int(msg.partition() or 0),
                                    int(msg.offset() or 0), msg.value(), exc.detail) from exc
        result: T = self._type.from_record(record)
        self._headers = _text_headers(msg.headers())
        return result

    @property
    def headers(self) -> dict[str, str]:
        """The Kafka headers of the record :meth:`poll` returned last, as text: the
        wait's ``traceparent`` (W3C trace context; on every action and outcome of a
        wait started with one), and ``xwait-receipt`` on a Rejected record of a
        reply or command sent with a receipt id.  Continue the wait's trace from
        ``traceparent`` in an adapter or an outcome consumer."""
        return dict(self._headers)

    def _store_pending(self) -> None:
        if self._pending is not None and self._commits:
            self._consumer.store_offsets(message=self._pending)
        self._pending = None

    def commit(self) -> None:
        """Commit, synchronously, the offsets of every record handed out so far."""
        if not self._commits:
            return
        self._store_pending()
        try:
            self._consumer.commit(asynchronous=False)
        except KafkaException as exc:
            # _NO_OFFSET: nothing new since the last (auto-)commit, which is fine.
            # librdkafka's local error codes all start with "_"; it is public API.
            if error_code(exc) != KafkaError._NO_OFFSET:  # noqa: SLF001
                raise ClientError(f"{self.topic}: commit failed: {error_text(exc)}") from exc

    def __iter__(self) -> XwaitConsumer[T]:
        return self

    def __next__(self) -> T:
        """Blocks until the next record; the iteration never ends on its own."""
        while True:
            record = self.poll(1.0)
            if record is not None:
                return record

    def close(self, *, processed: bool = True) -> None:
        """Leave the group; ``processed`` says whether the last record handed out is done."""
        if not processed:
            self._pending = None
        try:
            self.commit()
        finally:
            self._consumer.close()

    def __enter__(self) -> XwaitConsumer[T]:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close(processed=exc_type is None)


def _text_headers(headers: Any) -> dict[str, str]:
    """A record's headers (librdkafka's list of (name, value) pairs) as text."""
    return {str(name): value.decode("utf-8", "replace") if isinstance(value, bytes)
            else str(value) for name, value in (headers or []) if value is not None}
