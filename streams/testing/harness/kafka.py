"""A bench's Kafka consumers and admin: reading a topic from its start, cleaning up.

A bench shares its broker with whatever else runs there (the shared broker of
the test suite and the other helpers, or one of its own): every run makes its
topics under a prefix of its own and `delete_topics` takes them, and its
consumer groups, away at the end, also after a failure.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Message, TopicPartition
from confluent_kafka.admin import AdminClient

from streams.config import Settings
from streams.testing.harness import BenchError


def check_broker(admin: AdminClient, bootstrap: str) -> None:
    """Fail with a hint unless the broker answers a metadata request."""
    try:
        admin.list_topics(timeout=10)
    except KafkaException as exc:
        raise BenchError(f"the broker at {bootstrap} did not answer a metadata "
                         "request; is it running (scripts/kafka start)?") from exc


def reader(settings: Settings, topics: Iterable[str], group: str, **conf: Any) -> Consumer:
    """A read_committed consumer assigned every partition of `topics` from its start (no
    group membership: nothing to rebalance, nothing left behind but a group id)."""
    consumer = Consumer(settings.confluent(**{
        "group.id": f"{group}-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
        "isolation.level": "read_committed", "auto.offset.reset": "earliest", **conf}))
    consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t in topics
                     for p in range(settings.partitions)])
    return consumer


def close(consumer: Consumer) -> None:
    with contextlib.suppress(KafkaException, RuntimeError):
        consumer.close()


def key_text(msg: Message) -> str:
    key = msg.key()
    return key.decode(errors="replace") if isinstance(key, bytes) else str(key or "")


def topic_records(conf: dict[str, Any], topic: str, partitions: int,
                  kind: Callable[[bytes], str] | None = None, timeout: float = 120,
                  each: Callable[[Message], None] | None = None) -> tuple[int, dict[str, int]]:
    """Records on `topic` (read_committed, from the start, to the end it had when asked),
    and counts by `kind` when given; `each` sees every record."""
    consumer = Consumer({**conf, "group.id": f"compare-count-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        ends = {}
        for p in range(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)
            if high > low:
                ends[p] = high
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        count = 0
        kinds: dict[str, int] = {}
        give_up = time.monotonic() + timeout
        while ends and time.monotonic() < give_up:
            msgs = consumer.consume(5000, timeout=0.5)
            for m in msgs:
                if m.error() is not None:
                    continue
                count += 1
                if each is not None:
                    each(m)
                if kind is not None:
                    k = kind(m.value() or b"")
                    kinds[k] = kinds.get(k, 0) + 1
            if not msgs:  # read_committed skips markers: ask where the consumer stands
                positions = consumer.position([TopicPartition(topic, p) for p in ends])
                if all(tp.offset >= ends[tp.partition] for tp in positions):
                    break
        return count, kinds
    finally:
        close(consumer)


def changelog_ends(settings: Settings) -> dict[int, int]:
    """Per partition of the worker's changelog: the offset of its last record (-1: empty)."""
    consumer = Consumer(settings.confluent(**{"group.id": f"{settings.app_id}-bench-probe",
                                              "enable.auto.commit": False}))
    topic = f"{settings.app_id}-waits-changelog"
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] - 1
                for p in range(settings.partitions)}
    finally:
        close(consumer)


def delete_groups(admin: AdminClient, groups: list[str], timeout: float) -> list[str]:
    """Delete `groups`, again every 2 s until `timeout`: a member killed mid-run stays in
    its group until its session times out, and a group with members cannot be deleted.
    The groups left."""
    give_up = time.monotonic() + timeout
    while groups and time.monotonic() < give_up:
        failed = []
        for group, future in admin.delete_consumer_groups(groups, request_timeout=15).items():
            try:
                future.result(timeout=15)
            except KafkaException:
                failed.append(group)
        groups = failed
        if groups:
            time.sleep(2)
    return groups


def group_ids(admin: AdminClient, prefixes: tuple[str, ...]) -> list[str] | None:
    """The consumer groups on the broker whose ids start with one of `prefixes`; None when
    the broker did not answer."""
    with contextlib.suppress(KafkaException, ValueError, TypeError):
        groups = admin.list_consumer_groups(request_timeout=15).result(timeout=15)
        return [g.group_id for g in groups.valid if g.group_id.startswith(prefixes)]
    return None


def delete_topics(admin: AdminClient, settings: Settings) -> list[str]:
    """Every topic and group of this run (their names start with its unique prefix); the
    topics deleted."""
    prefix = settings.topic_prefix
    try:
        names = [t for t in admin.list_topics(timeout=15).topics
                 if t.startswith((prefix + ".", settings.app_id + "-"))]
    except KafkaException:
        return []
    if names:
        for future in admin.delete_topics(names, operation_timeout=30).values():
            with contextlib.suppress(KafkaException):
                future.result(timeout=30)
    delete_groups(admin, group_ids(admin, (prefix,)) or [], settings.session_timeout + 15)
    return names


def sweep_groups(admin: AdminClient, prefixes: list[str], timeout: float = 90) -> list[str]:
    """Delete the consumer groups of these runs still left; the ids of those that stay.

    A run deletes its groups when it ends, but a member that did not leave (a JVM killed
    during its close) keeps its group until the session times out (45 s for Kafka Streams).
    """
    give_up = time.monotonic() + timeout
    left: list[str] = []
    while time.monotonic() < give_up:
        found = group_ids(admin, tuple(prefixes))
        if found is None:
            return left
        left = found
        if not left:
            return []
        for future in admin.delete_consumer_groups(left, request_timeout=15).values():
            with contextlib.suppress(KafkaException):
                future.result(timeout=15)
        time.sleep(3)
    return left


__all__ = ["changelog_ends", "check_broker", "close", "delete_groups", "delete_topics",
           "group_ids", "key_text", "reader", "sweep_groups", "topic_records"]
