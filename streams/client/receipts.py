"""Waiting for the receipt of one reply or command (``<prefix>.receipts``).

The sender picks a fresh receipt id, and BEFORE it produces the record it
assigns itself the one partition of the receipts topic the id hashes to
(murmur2, as the worker's producer places it), at that partition's current
end: whatever the worker writes for this record comes after, so nothing is
missed, and nothing older is read.  It then produces the record with the
``xwait-receipt`` header and reads that partition (``read_committed``: a
receipt of a batch whose transaction was aborted is never seen) until a
record keyed by its id arrives.  The first one counts: a record decided
again (a takeover, at-least-once) gets the same receipt again.

Nothing is read or written when no one asks: a record without the header
costs the worker one comparison.
"""

from __future__ import annotations

import time
import uuid
from types import TracebackType

from confluent_kafka import Consumer, KafkaException, TopicPartition

from streams import codec, config
from streams.client._kafka import build, connect_timeout, known_topics
from streams.client.errors import ClientError, ReceiptTimeout, UndecodableOutput
from streams.client.records import Receipt
from streams.codec import RecordType, UndecodableRecord
from streams.errors import KafkaUnavailable
from streams.kafka_errors import error_text
from streams.partitioning import partition_for

__all__ = ["RECEIPT_TIMEOUT_S", "ReceiptReader", "new_receipt_id"]

RECEIPT_TIMEOUT_S = 10.0
"""How long ``wait=True`` (and ``--wait``) waits for the receipt: a worker that owns the
key's partition answers within a second; longer means it is down, restoring, or far
behind, and the record is decided when it catches up (its receipt then comes too late for
this caller, and is dropped with the topic's short retention)."""

_POLL_S = 0.2


def new_receipt_id() -> str:
    """A fresh receipt id: 128 random bits as 32 hex digits."""
    return uuid.uuid4().hex


class ReceiptReader:
    """Reads the receipt of one id; made (and placed at the partition's end) before the
    record is produced."""

    def __init__(self, settings: config.Settings, receipt_id: str) -> None:
        self.receipt_id = receipt_id
        self.topic = settings.topic("receipts")
        self._key = receipt_id.encode()
        self._codec = codec.for_settings(settings)
        self._consumer = build(Consumer, settings.confluent(**{
            "group.id": f"xwait-receipt-{receipt_id}",  # never joined: assign() only
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "client.id": "xwait-client",
        }))
        try:
            known_topics(self._consumer, settings, self.topic)
            timeout = connect_timeout(settings.connect_timeout)
            count = len(self._consumer.list_topics(
                self.topic, timeout=timeout).topics[self.topic].partitions)
            where = TopicPartition(self.topic, partition_for(self._key, count))
            try:
                _low, end = self._consumer.get_watermark_offsets(where, timeout=timeout,
                                                                 cached=False)
            except KafkaException as exc:
                raise KafkaUnavailable(f"{settings.bootstrap} did not say where "
                                       f"{self.topic} ends: {error_text(exc)}") from exc
            # A concrete offset, not OFFSET_END: that is resolved only at the first
            # fetch, which may come after the worker wrote the receipt.
            self._consumer.assign([TopicPartition(self.topic, where.partition, end)])
        except BaseException:
            self._consumer.close()
            raise

    def wait(self, timeout: float, what: str) -> Receipt:
        """The receipt, once it arrived; ReceiptTimeout after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ReceiptTimeout(what, self.receipt_id, timeout)
            msg = self._consumer.poll(min(_POLL_S, left))
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.fatal():
                    raise ClientError(f"{self.topic}: fatal consumer error: {err.str()}")
                continue  # librdkafka retries on its own (a leader moving)
            if msg.key() != self._key:
                continue  # another sender's receipt: not decoded
            try:
                record = self._codec.decode(RecordType.RECEIPT, msg.value())
            except UndecodableRecord as exc:
                raise UndecodableOutput(self.topic, int(msg.partition() or 0),
                                        int(msg.offset() or 0), msg.value(),
                                        exc.detail) from exc
            return Receipt.from_record(record)

    def close(self) -> None:
        self._consumer.close()

    def __enter__(self) -> ReceiptReader:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
