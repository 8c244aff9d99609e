"""A record compressed with any codec Kafka supports is processed like any other.

Many producers compress (librdkafka, Java clients, Kafka Connect); one
lz4-compressed reply used to stop the worker at every restart.
"""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Producer

from streams.config import Settings
from tests.e2e.harness import Watcher, WorkerProcess, new_key

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_a_wait_started_and_answered_by_compressed_records_is_received(
    e2e: Settings, worker: WorkerProcess, watcher: Watcher, codec: str
) -> None:
    producer = Producer(e2e.confluent(**{"partitioner": "murmur2_random",
                                         "compression.type": codec, "linger.ms": 5}))
    key = new_key()
    producer.produce(e2e.topic("requests"), key=key.encode(), value=json.dumps({
        "correlationKey": key, "definition": "slow-approval",
        "requestedAt": int(time.time() * 1000)}).encode())
    producer.produce(e2e.topic("replies"), key=key.encode(), value=json.dumps({
        "correlationKey": key, "channel": "portal",
        "responseData": json.dumps({"decision": "approved"})}).encode())
    assert producer.flush(30) == 0

    outcome = watcher.outcome(key, timeout=60)
    assert (outcome["outcome"], outcome["reason"]) == ("RECEIVED", "reply_valid")
    assert worker.running
