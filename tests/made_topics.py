"""Topics a test creates itself, ready to use when the call returns.

CreateTopics answers before the broker's metadata lists the topic with a
leader for each partition; a client that asks right away is told the topic
does not exist (seen on a busy machine, never alone).  So every test that
creates a topic directly goes through `create_topics`, which waits for that
condition (`streams.topics.wait_visible`), never for a fixed time.
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)

from streams import topics


def create_topics(bootstrap: str, *new: NewTopic) -> None:
    """Create `new` and return once the broker lists each one, every partition with a leader."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics(list(new)).values():
        future.result(timeout=30)
    topics.wait_visible(admin, [t.topic for t in new])


def limit_record_size(admin: AdminClient, topic: str, max_bytes: int | None) -> None:
    """Set (None: drop) the topic's max.message.bytes, and return once the broker shows it.

    The alter is answered once the controller has committed the change; the broker
    applies it to the topic's log a moment later, when it publishes that metadata
    (after its metadata cache, which describe_configs reads). An outcome produced
    in between is taken under the old limit: once the worker's outcome got through
    and the test waited 120 s for an exit that never came. Right after the alter
    returned, 3 of 40 records of 300 bytes got past a limit of 100 here; none of 100
    once describe_configs showed the limit.
    """
    entry = ConfigEntry("max.message.bytes", str(max_bytes) if max_bytes else None,
                        incremental_operation=AlterConfigOpType.SET if max_bytes
                        else AlterConfigOpType.DELETE)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)
    described = ConfigResource(ConfigResource.Type.TOPIC, topic)
    deadline = time.monotonic() + 30
    while True:
        now = admin.describe_configs([described])[described].result(timeout=10)
        shown = now["max.message.bytes"]
        own = ConfigSource(shown.source) is ConfigSource.DYNAMIC_TOPIC_CONFIG
        applied = own and shown.value == str(max_bytes) if max_bytes else not own
        if applied:
            return
        assert time.monotonic() < deadline, (
            f"{topic}: max.message.bytes still {shown.value} ({shown.source}) 30 s after "
            f"setting it to {max_bytes}")
        time.sleep(0.05)


def read_keys(bootstrap: str, topic: str, isolation: str = "read_committed"
              ) -> list[tuple[bytes, int]]:
    """Every key in the topic's only partition and its offset, as a consumer of
    `isolation` reads them."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-check",
                         "isolation.level": isolation, "enable.partition.eof": True,
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        keys: list[tuple[bytes, int]] = []
        for _ in range(600):
            msg = consumer.poll(0.1)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:  # noqa: SLF001 - public constant
                    return keys
                raise AssertionError(f"{topic}: {err}")
            keys.append((msg.key() or b"", msg.offset() or 0))
        raise AssertionError(f"{topic}: no end of partition within 60 s")
    finally:
        consumer.close()
