"""A worker that cannot make a batch durable stops before any input position moves.

The broker refuses the outcome (the outcomes topic takes no record that
large): the worker exits with a clear error instead of acknowledging the
reply, and once the topic is fixed a restarted worker ends the wait from the
reply that is still there.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)

from streams.config import Settings
from streams.processor.worker import EXIT_COMMIT_FAILED
from tests.e2e.harness import Client, Watcher, WorkerProcess, new_key

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _outcomes_take_at_most(settings: Settings, max_bytes: int | None) -> None:
    """Set (None: drop) the outcomes topic's max.message.bytes, and return once the broker
    shows it.

    The alter is answered once the controller has committed the change; the broker
    applies it to the topic's log a moment later, when it publishes that metadata
    (after its metadata cache, which describe_configs reads). An outcome produced
    in between is taken under the old limit: once the worker's outcome got through
    and the test waited 120 s for an exit that never came. Right after the alter
    returned, 3 of 40 records of 300 bytes got past a limit of 100 here; none of 100
    once describe_configs showed the limit.
    """
    admin = AdminClient(settings.confluent())
    topic = settings.topic("outcomes")
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


def test_an_outcome_kafka_refuses_stops_the_worker_and_its_reply_is_decided_after_the_fix(
    e2e: Settings, workers: Callable[..., WorkerProcess], client: Client, watcher: Watcher
) -> None:
    worker = workers("w1")
    key = new_key()
    client.start(key, "slow-approval")
    client.flush()
    watcher.parked(key)
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
