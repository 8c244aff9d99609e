"""The SDK and the CLI drive a real worker: what a user types, the outcome they see."""

from __future__ import annotations

import json
import time

import pytest

from streams.cli import main
from streams.client import Outcome, XwaitClient
from streams.config import Settings
from tests.e2e.harness import Watcher, WorkerProcess, until_status

pytestmark = [
    pytest.mark.kafka, pytest.mark.slow, pytest.mark.rule1, pytest.mark.rule4, pytest.mark.rule9,
]


def _cli(e2e: Settings, *args: str) -> list[str]:
    return [*args, "--bootstrap", e2e.bootstrap, "--prefix", e2e.topic_prefix,
            "--topology", str(e2e.topology)]


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
    assert main(_cli(e2e, "start", "slow-approval", "--json")) == 0
    [key] = json.loads(capsys.readouterr().out)["correlationKeys"]
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
    assert main(_cli(e2e, "start", "slow-approval", "--json")) == 0
    [key] = json.loads(capsys.readouterr().out)["correlationKeys"]
    watcher.parked(key)
    assert main(_cli(e2e, command[0], key, *command[1:])) == 0
    outcome = watcher.outcome(key)
    assert (outcome["outcome"], outcome["reason"]) == expected


def test_cli_suspend_resume_and_review_correct_a_wait(
    e2e: Settings, worker: WorkerProcess, watcher: Watcher, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_cli(e2e, "start", "slow-approval", "--json")) == 0
    [key] = json.loads(capsys.readouterr().out)["correlationKeys"]
    watcher.parked(key)
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
