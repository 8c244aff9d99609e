"""The latest records of the rejected topic, for the review queue.

A short read of `<prefix>.rejected` (every partition, the last
`PER_PARTITION` records of each) by a throw-away confluent-kafka consumer
that joins no group and commits nothing.  It answers for the whole cluster
and survives worker restarts, which an in-memory buffer of what this worker
produced would not; its cost is one consumer and a few fetches per request
(a fraction of a second on a healthy broker), which an ops page can afford.
Runs in a thread: confluent-kafka blocks.
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from streams import codec
from streams.codec import RecordType, UndecodableRecord
from streams.config import Settings
from streams.kafka_errors import error_text
from streams.processor.model import RECORD_TYPE, Role

_PARTITION_EOF = -191  # librdkafka's RD_KAFKA_RESP_ERR__PARTITION_EOF

# Records read per partition; the page shows the newest `limit` of them all.
PER_PARTITION = 50
# How long the read may take before it returns what it has.  The broker is
# local or close in every deployment we know; a slow one shows fewer records.
READ_TIMEOUT_S = 5.0
PREVIEW_CHARS = 400


class ReviewReadFailed(Exception):
    """The rejected topic could not be read (broker down, topic missing)."""


def _original(topic: str, prefix: str, data: bytes | None) -> Any:
    """The original record as JSON data when it decodes, else a text preview."""
    if data is None:
        return None
    role_name = topic[len(prefix) + 1:] if topic.startswith(prefix + ".") else ""
    role = next((r for r in RECORD_TYPE if r.value == role_name), None)
    if role is not None:
        try:
            return dict(codec.decode(RECORD_TYPE[role], data))
        except (UndecodableRecord, ValueError):
            pass
    return data[:PREVIEW_CHARS].decode("utf-8", errors="replace")


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def latest_rejected(settings: Settings, limit: int = 50) -> list[dict[str, Any]]:
    """The newest rejected records, newest first (blocking)."""
    topic = settings.topic(Role.REJECTED.value)
    consumer = Consumer(settings.confluent(**{
        "group.id": "xwait-console-review", "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "enable.partition.eof": True,
        "socket.timeout.ms": int(READ_TIMEOUT_S * 1000),
    }))
    try:
        try:
            meta = consumer.list_topics(topic, timeout=READ_TIMEOUT_S)
        except KafkaException as exc:
            raise ReviewReadFailed(f"{settings.bootstrap} did not answer: {error_text(exc)}"
                                   ) from exc
        tmeta = meta.topics.get(topic)
        if tmeta is None or tmeta.error is not None:
            raise ReviewReadFailed(f"topic {topic} is missing")
        assign, ends = [], {}
        for p in tmeta.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                       timeout=READ_TIMEOUT_S)
            if high > low:
                assign.append(TopicPartition(topic, p, max(low, high - PER_PARTITION)))
                ends[p] = high
        records: list[dict[str, Any]] = []
        if assign:
            consumer.assign(assign)
            deadline = time.monotonic() + READ_TIMEOUT_S
            pending = set(ends)
            while pending and time.monotonic() < deadline:
                for msg in consumer.consume(500, timeout=0.2):
                    p = msg.partition()
                    err = msg.error()
                    if err is not None:
                        if p is not None and err.code() == _PARTITION_EOF:
                            pending.discard(p)
                        continue
                    offset = msg.offset()
                    if p is None or offset is None:
                        continue
                    if offset + 1 >= ends[p]:
                        pending.discard(p)
                    records.append(_record(settings, p, offset, msg.value()))
        records.sort(key=lambda r: (r.get("rejectedAt") or 0, r["offset"]), reverse=True)
        return records[:limit]
    finally:
        consumer.close()


def _record(settings: Settings, partition: int, offset: int, value: bytes | None
            ) -> dict[str, Any]:
    try:
        rec = dict(codec.decode(RecordType.REJECTED, value))
    except UndecodableRecord as exc:
        return {"partition": partition, "offset": offset, "reason": "undecodable",
                "detail": str(exc), "key": None, "original": None, "rejectedAt": None}
    original = _original(str(rec.get("topic", "")), settings.topic_prefix, rec.get("original"))
    out = _jsonable({k: v for k, v in rec.items() if k != "original"})
    out.update({"rejectedPartition": partition, "rejectedOffset": offset,
                "original": _jsonable(original)})
    return dict(out) if isinstance(out, dict) else {}

