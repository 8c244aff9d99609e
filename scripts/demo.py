"""The README's demo: a round trip through the contract's topics.

Run by `make demo` after the broker and topics are up.  It grows with the
engine; today it produces a StartWait as JSON to the requests topic and reads
it back, which proves the broker, the topics and the client set-up.
"""

from __future__ import annotations

import json
import secrets
import sys
import time
import uuid

from confluent_kafka import Consumer, Producer

from streams.config import from_env


def main() -> int:
    settings = from_env()
    topic = settings.topic("requests")
    key = secrets.token_hex(16)
    record = {"correlationKey": key, "definition": "expense-approval",
              "requestedAt": int(time.time() * 1000)}
    producer = Producer(settings.confluent(partitioner="murmur2_random"))
    producer.produce(topic, key=key.encode(), value=json.dumps(record).encode())
    producer.flush(10)
    consumer = Consumer(settings.confluent(**{
        "group.id": f"xwait-demo-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest",
        "enable.auto.commit": False}))
    consumer.subscribe([topic])
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error() or msg.key() != key.encode():
                continue
            print(f"round trip ok: {topic} partition {msg.partition()} offset {msg.offset()}: "
                  f"{msg.value().decode()}")
            return 0
    finally:
        consumer.close()
    print("demo: the record did not come back within 30 s", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
