"""The ground is real: the project's broker does Kafka transactions."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import NewTopic

from tests.made_topics import create_topics
from tests.prefixes import unique_prefix


def _topic(bootstrap: str) -> str:
    name = f"{unique_prefix('b')}-broker"
    create_topics(bootstrap, NewTopic(name, 1, 1))
    return name


def _read_all(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"g-{uuid.uuid4().hex}",
        "auto.offset.reset": "earliest",
        "isolation.level": isolation,
        "enable.auto.commit": False,
    })
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    last_seen = time.monotonic()
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                # Three quiet seconds after the last record: nothing more is coming.
                if values and time.monotonic() - last_seen > 3:
                    break
                continue
            last_seen = time.monotonic()
            value = msg.value()
            assert value is not None
            values.append(value)
    finally:
        consumer.close()
    return values


def test_read_committed_consumer_sees_committed_records_and_not_aborted_ones(
    kafka_bootstrap: str,
) -> None:
    topic = _topic(kafka_bootstrap)
    producer = Producer({
        "bootstrap.servers": kafka_bootstrap,
        "transactional.id": f"tx-{uuid.uuid4().hex}",
    })
    producer.init_transactions(30)

    producer.begin_transaction()
    producer.produce(topic, key=b"k", value=b"committed-1")
    producer.produce(topic, key=b"k", value=b"committed-2")
    producer.commit_transaction(30)

    producer.begin_transaction()
    producer.produce(topic, key=b"k", value=b"aborted")
    producer.flush(30)
    producer.abort_transaction(30)

    producer.begin_transaction()
    producer.produce(topic, key=b"k", value=b"committed-3")
    producer.commit_transaction(30)

    assert _read_all(kafka_bootstrap, topic, "read_committed") == [
        b"committed-1", b"committed-2", b"committed-3",
    ]
    # The aborted record is really in the log: only isolation hides it.
    assert b"aborted" in _read_all(kafka_bootstrap, topic, "read_uncommitted")
