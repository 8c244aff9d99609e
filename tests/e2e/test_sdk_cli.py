"""The SDK and the CLI drive a real worker: what a user types, the outcome they see."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from streams.cli import main
from streams.client import ClientError, Outcome, UnknownVersion, XwaitClient
from streams.config import Settings
from streams.partitioning import partition_for
from tests.e2e.harness import Watcher, WorkerProcess, until_status

pytestmark = [
    pytest.mark.kafka, pytest.mark.slow, pytest.mark.rule1, pytest.mark.rule4, pytest.mark.rule9,
]


def _cli(e2e: Settings, *args: str) -> list[str]:
    return [*args, "--bootstrap", e2e.bootstrap, "--prefix", e2e.topic_prefix,
            "--topology", str(e2e.topology)]


def _started(e2e: Settings, capsys: pytest.CaptureFixture[str]) -> str:
    """A slow-approval wait started by `xwait start --json`: the key it printed."""
    assert main(_cli(e2e, "start", "slow-approval", "--json")) == 0
    [key] = json.loads(capsys.readouterr().out)["correlationKeys"]
    assert isinstance(key, str)
    return key


def _parked(e2e: Settings, capsys: pytest.CaptureFixture[str], watcher: Watcher) -> str:
    """A wait started as `_started` does, once its request was processed: its key."""
    key = _started(e2e, capsys)
    watcher.parked(key)
    return key


def test_sdk_starts_a_wait_replies_and_reads_the_typed_outcome(
    e2e: Settings, worker: WorkerProcess
) -> None:
    with XwaitClient(e2e) as xw, xw.subscribe("outcomes", from_beginning=True) as outcomes:
        key = xw.start_wait("slow-approval", tenant="acme", payload={"amount": 120})
        xw.reply(key, {"decision": "approved"}, channel="portal", tenant="acme")
        deadline = time.monotonic() + 30
        found: Outcome | None = None
        while found is None and time.monotonic() < deadline:
            record = outcomes.poll(0.5)
            if record is not None and record.correlation_key == key:
                found = record
    assert found is not None, "the SDK consumer saw the outcome"
    assert (found.outcome, found.reason, found.tenant) == ("RECEIVED", "reply_valid", "acme")
    assert found.response_data == {"decision": "approved"}  # the value, not JSON text
    assert json.loads(found.response_data_text or "") == {"decision": "approved"}
    assert [t.event for t in found.trace][0] == "requested"


def test_cli_start_and_reply_end_a_wait_received(
    e2e: Settings, worker: WorkerProcess, watcher: Watcher, capsys: pytest.CaptureFixture[str]
) -> None:
    key = _started(e2e, capsys)
    assert main(_cli(e2e, "reply", key, "--channel", "portal", "--data",
                     '{"decision": "rejected"}')) == 0
    outcome = watcher.outcome(key)
    assert outcome["outcome"] == "RECEIVED"
    assert json.loads(str(outcome["responseData"])) == {"decision": "rejected"}


@pytest.mark.parametrize(("command", "expected"), [
    (["cancel", "--reason", "withdrawn"], ("CANCELLED", "cancelled_by_operator")),
    (["deliver", "--data", '{"decision": "approved"}'], ("RECEIVED", "delivered")),
])
def test_cli_operator_commands_end_a_parked_wait(
    e2e: Settings, worker: WorkerProcess, watcher: Watcher, capsys: pytest.CaptureFixture[str],
    command: list[str], expected: tuple[str, str],
) -> None:
    key = _parked(e2e, capsys, watcher)
    assert main(_cli(e2e, command[0], key, *command[1:])) == 0
    outcome = watcher.outcome(key)
    assert (outcome["outcome"], outcome["reason"]) == expected


def test_cli_suspend_resume_and_review_correct_a_wait(
    e2e: Settings, worker: WorkerProcess, watcher: Watcher, capsys: pytest.CaptureFixture[str]
) -> None:
    key = _parked(e2e, capsys, watcher)
    assert main(_cli(e2e, "suspend", key, "--reason", "audit")) == 0
    assert main(_cli(e2e, "reply", key, "--channel", "portal", "--data",
                     '{"decision": "perhaps"}')) == 0
    until_status(worker, key, lambda code, body: len(body.get("held") or []) == 1,
                 "the reply held while suspended")
    watcher.poll(0.2)
    assert not watcher.seen.for_key("actions", key)[1:], "nothing is decided while suspended"
    assert main(_cli(e2e, "resume", key, "--reason", "audit closed",
                     "--operator", "cid")) == 0
    watcher.until(lambda s: any(a["action"] == "REVIEW_NEEDED" for a in s.for_key("actions", key)),
                  30, "the review")
    assert main(_cli(e2e, "review", "correct", key, "--note", "typo", "--data",
                     '{"decision": "approved"}', "--operator", "rita")) == 0
    outcome = watcher.outcome(key)
    assert (outcome["outcome"], outcome["reason"]) == ("RECEIVED", "review_corrected")
    assert outcome["reviewNote"] == "typo"
    assert json.loads(str(outcome["responseData"])) == {"decision": "approved"}
    # Every command is in the trace with its reason and its operator.
    details = {t["event"]: t["detail"] for t in outcome["trace"]}
    assert details["resumed"].endswith(": audit closed (by cid)"), details
    assert details["reviewed"] == "Submit Correction: typo (by rita)", details


def _records_keyed(settings: Settings, role: str, key: str) -> int:
    """How many records of the role's topic carry `key`: its partition, read to the end."""
    topic = settings.topic(role)
    consumer = Consumer(settings.confluent(**{"group.id": "count", "enable.auto.commit": False,
                                              "enable.partition.eof": True}))
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        tp = TopicPartition(topic, partition_for(key.encode(), len(partitions)), 0)
        _, end = consumer.get_watermark_offsets(tp, timeout=10)
        consumer.assign([tp])
        found, position = 0, 0
        deadline = time.monotonic() + 30
        while position < end:
            assert time.monotonic() < deadline, f"{topic} was not read to its end"
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            position = (msg.offset() or 0) + 1
            found += msg.key() == key.encode()
        return found
    finally:
        consumer.close()


def test_cli_migrate_to_a_version_no_worker_published_exits_2_listing_them_and_sends_nothing(
    e2e: Settings, worker: WorkerProcess, watcher: Watcher, capsys: pytest.CaptureFixture[str]
) -> None:
    key = _parked(e2e, capsys, watcher)
    assert main(_cli(e2e, "definitions", "--json", "--console", worker.url)) == 0
    version = next(d["version"] for d in json.loads(capsys.readouterr().out)["definitions"]
                   if d["name"] == "slow-approval")

    # The worker names the wait's definition: its versions are listed.
    assert main(_cli(e2e, "migrate", key, "--to", "deadbeef0000", "--console",
                     worker.url)) == 2
    err = capsys.readouterr().err
    assert "unknown version 'deadbeef0000' of definition 'slow-approval'" in err, err
    assert f"the versions of 'slow-approval' in {e2e.topic('definitions')} are {version}" in err
    # Unchecked (--force asks no worker): no definition has it.
    assert main(_cli(e2e, "migrate", key, "--to", "deadbeef0000", "--force")) == 2
    err = capsys.readouterr().err
    assert "no definition in" in err and f"slow-approval: {version}" in err, err
    # The SDK refuses it the same way, with an error `except ClientError` catches.
    with XwaitClient(e2e, check_keys=False) as xw, pytest.raises(ClientError) as caught:
        xw.migrate(key, version="deadbeef0000", operator="olga")
    assert isinstance(caught.value, UnknownVersion)
    assert caught.value.known["slow-approval"] == (version,)
    assert _records_keyed(e2e, "commands", key) == 0, "nothing was sent"

    # A version the store holds is sent as before.
    assert main(_cli(e2e, "migrate", key, "--to", version, "--console", worker.url)) == 0
    assert "migrate sent" in capsys.readouterr().out
    assert _records_keyed(e2e, "commands", key) == 1
