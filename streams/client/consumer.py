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
"""

from __future__ import annotations

import logging
import uuid
from types import TracebackType
from typing import Any, Generic, Literal, TypeVar, overload

from confluent_kafka import Consumer, KafkaError, KafkaException, Message

from streams import codec, config
from streams.client._kafka import LIBRDKAFKA_LOGGER, known_topics
from streams.client.errors import ClientError, InvalidRequest, TopicMissing, UndecodableOutput
from streams.client.records import Action, Outcome, Rejected
from streams.codec import UndecodableRecord

__all__ = ["Kind", "XwaitConsumer"]

log = logging.getLogger(__name__)

Kind = Literal["outcomes", "actions", "rejected"]
_TYPES: dict[str, type[Outcome | Action | Rejected]] = {
    "outcomes": Outcome, "actions": Action, "rejected": Rejected,
}

T = TypeVar("T", Outcome, Action, Rejected)


class XwaitConsumer(Generic[T]):
    """Typed records from one output topic; iterate, or :meth:`poll` with a timeout."""

    @overload
    def __init__(self: XwaitConsumer[Outcome], kind: Literal["outcomes"],
                 settings: config.Settings | None = ..., *, group_id: str | None = ...,
                 from_beginning: bool = ...) -> None: ...

    @overload
    def __init__(self: XwaitConsumer[Action], kind: Literal["actions"],
                 settings: config.Settings | None = ..., *, group_id: str | None = ...,
                 from_beginning: bool = ...) -> None: ...

    @overload
    def __init__(self: XwaitConsumer[Rejected], kind: Literal["rejected"],
                 settings: config.Settings | None = ..., *, group_id: str | None = ...,
                 from_beginning: bool = ...) -> None: ...

    @overload
    def __init__(self, kind: str, settings: config.Settings | None = ..., *,
                 group_id: str | None = ..., from_beginning: bool = ...) -> None: ...

    def __init__(self, kind: str, settings: config.Settings | None = None, *,
                 group_id: str | None = None, from_beginning: bool = False) -> None:
        if kind not in _TYPES:
            raise InvalidRequest(f"unknown output {kind!r}: expected one of {sorted(_TYPES)}")
        self.kind = kind
        self.settings = settings if settings is not None else config.from_env()
        self.topic = self.settings.topic(kind)
        self._type: Any = _TYPES[kind]
        self._commits = group_id is not None
        self._pending: Message | None = None  # handed out, offset not stored yet
        self._consumer = Consumer(self.settings.confluent(**{
            "group.id": group_id or f"xwait-client-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest" if from_beginning else "latest",
            "isolation.level": "read_committed",
            "enable.auto.commit": self._commits,
            "enable.auto.offset.store": False,
            "client.id": "xwait-client",
            "logger": LIBRDKAFKA_LOGGER,
        }))
        try:
            known_topics(self._consumer, self.settings.bootstrap, self.topic)
            self._consumer.subscribe([self.topic])
        except BaseException:
            self._consumer.close()
            raise

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
            if err.fatal():
                raise ClientError(f"{self.topic}: fatal consumer error: {err.str()}")
            if err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise TopicMissing(self.topic)
            log.warning("consumer error topic=%s error=%s", self.topic, err.str())
            return None
        self._pending = msg
        try:
            record = codec.decode(self._type.record_type, msg.value())
        except UndecodableRecord as exc:
            raise UndecodableOutput(str(msg.topic()), int(msg.partition() or 0),
                                    int(msg.offset() or 0), msg.value(), exc.detail) from exc
        result: T = self._type.from_record(record)
        return result

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
            if exc.args[0].code() != KafkaError._NO_OFFSET:  # noqa: SLF001
                raise ClientError(f"{self.topic}: commit failed: {exc.args[0]}") from exc

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
