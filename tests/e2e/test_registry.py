"""Registry mode end to end, as the README shows it: a worker, the CLI and a Confluent producer.

With XWAIT_SCHEMA_REGISTRY_URL set, the worker's outputs are in the Confluent
wire format under xwait's registered ids, and a reply written by
confluent-kafka's own AvroSerializer (what any Confluent client writes) is
read by its id.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from streams import topics
from streams.cli import main
from streams.codec import default_codec
from streams.config import Settings
from tests.conftest import NO_CONSOLE
from tests.e2e.harness import WorkerProcess, e2e_settings
from tests.prefixes import unique_prefix

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


@pytest.fixture(scope="module")
def registry_mode(kafka_bootstrap: str, schema_registry: str,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    folder: Path = tmp_path_factory.mktemp("registry")
    prefix = unique_prefix("g")
    base = Settings(bootstrap=kafka_bootstrap, topic_prefix=prefix, partitions=2,
                    console_url=NO_CONSOLE, schema_registry_url=schema_registry)
    s = e2e_settings(base, folder)
    topics.create(s, topics.load_specs(s))
    worker = WorkerProcess(s, folder).start()
    try:
        yield s.with_overrides(console_url=f"http://127.0.0.1:{worker.web_port}")
    finally:
        worker.stop()


def _cli(s: Settings, *args: str) -> list[str]:
    return [*args, "--bootstrap", s.bootstrap, "--prefix", s.topic_prefix, "--topology",
            str(s.topology), "--console", s.console_url,
            "--schema-registry", str(s.schema_registry_url)]


def _first_raw(s: Settings, role: str, key: str) -> bytes:
    topic = s.topic(role)
    consumer = Consumer(s.confluent(**{"group.id": "raw", "enable.auto.commit": False}))
    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None and msg.key() == key.encode():
                return bytes(msg.value() or b"")
        raise AssertionError(f"no {role} record for {key}")
    finally:
        consumer.close()


def test_cli_and_worker_speak_the_confluent_format_and_read_a_confluent_producers_reply(
    registry_mode: Settings, capsys: pytest.CaptureFixture[str],
) -> None:
    s = registry_mode
    url = str(s.schema_registry_url)
    # a wait started with the CLI, written in the Confluent format
    assert main(_cli(s, "start", "slow-approval")) == 0
    key = capsys.readouterr().out.strip()
    with SchemaRegistryClient({"url": url}) as registry:
        request_id = registry.get_latest_version(f"{s.topic_prefix}.requests-value").schema_id
        assert _first_raw(s, "requests", key)[:5] == b"\x00" + request_id.to_bytes(4, "big")
        # answered by a plain Confluent producer: AvroSerializer with the Reply schema
        reply_schema = (default_codec().schemas.directory / "Reply.avsc").read_text()
        serializer = AvroSerializer(registry, reply_schema)
        value = serializer(
            {"correlationKey": key, "tenant": None, "channel": "portal",
             "responseData": json.dumps({"decision": "approved"}), "replyId": None,
             "sentAt": None},
            SerializationContext(s.topic("replies"), MessageField.VALUE))
        producer = Producer(s.confluent(partitioner="murmur2_random"))
        producer.produce(s.topic("replies"), key=key.encode(), value=value)
        assert producer.flush(10) == 0
        # the outcome: read by `xwait result`, and framed with the registry's outcome id
        assert main(_cli(s, "result", key, "--timeout", "60", "--json")) == 0
        outcome = json.loads(capsys.readouterr().out)
        assert (outcome["outcome"], outcome["reason"]) == ("RECEIVED", "reply_valid")
        outcome_id = registry.get_latest_version(f"{s.topic_prefix}.outcomes-value").schema_id
        assert _first_raw(s, "outcomes", key)[:5] == b"\x00" + outcome_id.to_bytes(4, "big")
