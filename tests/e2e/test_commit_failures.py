"""A worker that cannot make a batch durable stops before any input position moves.

The broker refuses the outcome (the outcomes topic takes no record that
large): the worker exits with a clear error instead of acknowledging the
reply, and once the topic is fixed a restarted worker ends the wait from the
reply that is still there.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka.admin import AdminClient

from streams.config import Settings
from streams.processor.worker import EXIT_COMMIT_FAILED
from tests.e2e.harness import Client, Watcher, WorkerProcess, parked
from tests.made_topics import limit_record_size

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _outcomes_take_at_most(settings: Settings, max_bytes: int | None) -> None:
    """Set (None: drop) the outcomes topic's max.message.bytes, and return once the broker
    shows it (`tests.made_topics.limit_record_size`)."""
    limit_record_size(AdminClient(settings.confluent()), settings.topic("outcomes"), max_bytes)


def test_an_outcome_kafka_refuses_stops_the_worker_and_its_reply_is_decided_after_the_fix(
    e2e: Settings, workers: Callable[..., WorkerProcess], client: Client, watcher: Watcher
) -> None:
    worker = workers("w1")
    key = parked(client, watcher, "slow-approval")
    # The outcome's batch is about 280 bytes (61 of batch header, the 32-byte key, some
    # 180 of Avro with random ids), uncompressed (neither the worker's producer nor the
    # topic sets a compression): well over 100.
    _outcomes_take_at_most(e2e, 100)
    try:
        client.reply(key, {"decision": "approved"})
        client.flush()
        assert worker.proc is not None
        assert worker.proc.wait(120) == EXIT_COMMIT_FAILED
        assert "stopping the worker" in worker.log_tail(80)
        watcher.poll(1.0)
        assert not watcher.seen.for_key("outcomes", key)
    finally:
        _outcomes_take_at_most(e2e, None)

    worker.start()
    outcome = watcher.outcome(key, timeout=60)
    assert (outcome["outcome"], outcome["reason"]) == ("RECEIVED", "reply_valid")
