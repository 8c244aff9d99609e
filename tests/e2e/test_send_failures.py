"""Rule 12 on the broker: channel adapters report results (SDK and CLI), failed sends go
again after their backoff, then take the definition's path; the outcome names it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from streams.cli import main
from streams.client import XwaitClient
from streams.config import Settings
from tests.e2e.conftest import new_e2e
from tests.e2e.harness import Seen, Watcher, WorkerProcess, new_key

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.rule12]

DEFINITIONS = {
    # One escalation level: a send that fails for good asks the director now.
    "bounce": """
variant: single-channel
channels: [portal]
deadline: PT2M
escalation: [{target: director, deadline: PT2M}]
on_send_failure: {retries: 2, backoff: PT1S, then: escalate}
""",
    # No level left: a send that fails for good ends the wait ESCALATED (send_failed).
    "bounce-flat": """
variant: single-channel
channels: [portal]
deadline: PT2M
on_send_failure: {retries: 1, backoff: PT1S, then: escalate}
""",
    "bounce-review": """
variant: single-channel
channels: [portal]
deadline: PT2M
on_send_failure: {retries: 0, then: review}
""",
}


@pytest.fixture(scope="module")
def e2e(kafka_bootstrap: str, e2e_folder: Path) -> Settings:
    s = new_e2e(kafka_bootstrap, e2e_folder, tag="sf")
    for name, text in DEFINITIONS.items():
        (s.topology / "waits" / f"{name}.yaml").write_text(text)
    return s


def _cli(e2e: Settings, *args: str) -> list[str]:
    return [*args, "--bootstrap", e2e.bootstrap, "--prefix", e2e.topic_prefix,
            "--topology", str(e2e.topology)]


def _actions(seen: Seen, key: str, kind: str) -> list[dict[str, Any]]:
    return [a for a in seen.for_key("actions", key) if a["action"] == kind]


def _wait_for(watcher: Watcher, key: str, kind: str, count: int = 1,
              timeout: float = 30) -> list[dict[str, Any]]:
    seen = watcher.until(lambda s: len(_actions(s, key, kind)) >= count, timeout,
                         f"{count} {kind} of {key}")
    return _actions(seen, key, kind)


def test_a_send_that_bounces_goes_again_then_the_wait_ends_escalated_send_failed(
    e2e: Settings, worker: WorkerProcess, watcher: Watcher,
) -> None:
    with XwaitClient(e2e) as xw:
        key = xw.start_wait("bounce-flat", payload={"to": "sam@example.com"})
        (first,) = _wait_for(watcher, key, "SEND_REQUEST")
        xw.report_failed(first["correlationKey"], first["actionId"], "503 Service Unavailable")
        second = _wait_for(watcher, key, "SEND_REQUEST", 2)[1]
        assert second["sendAttempt"] == 2 and second["actionId"] != first["actionId"]
        assert second["at"] - first["at"] >= 1000  # the backoff, by the broker's clock
        xw.report_failed(second["correlationKey"], second["actionId"], "503 Service Unavailable")
    outcome = watcher.outcome(key)
    assert (outcome["outcome"], outcome["reason"]) == ("ESCALATED", "send_failed")
    assert outcome["sendError"] == "SEND_REQUEST: 503 Service Unavailable"
    assert outcome["definitionVersion"]
    (escalation,) = _actions(watcher.seen, key, "RUN_ESCALATION")
    assert escalation["at"] == outcome["endedAt"]
    events = [t["event"] for t in outcome["trace"]]
    assert events.count("send_failed") == 2 and "send_retried" in events


def test_cli_reports_a_permanent_failure_and_the_director_is_asked_at_once(
    e2e: Settings, worker: WorkerProcess, watcher: Watcher, capsys: pytest.CaptureFixture[str],
) -> None:
    key = new_key()
    assert main(_cli(e2e, "start", "bounce", "--key", key)) == 0
    (sent,) = _wait_for(watcher, key, "SEND_REQUEST")
    capsys.readouterr()
    assert main(_cli(e2e, "report", key, sent["actionId"], "--delivered")) == 0
    assert main(_cli(e2e, "report", key, sent["actionId"], "--failed", "550 no such user",
                     "--permanent", "--json")) == 0
    first_line, printed_json = capsys.readouterr().out.split("\n", 1)
    assert first_line.startswith("result delivered sent")
    printed = json.loads(printed_json)
    assert printed["status"] == "failed" and printed["permanent"] is True
    # Delivered, then failed for the same send: the contradiction is refused.
    seen = watcher.until(lambda s: bool(s.for_key("rejected", key)), 30, "the rejection")
    (rejected,) = seen.for_key("rejected", key)
    assert rejected["reason"] == "duplicate" and rejected["topic"] == e2e.topic("replies")

    key2 = new_key()
    assert main(_cli(e2e, "start", "bounce", "--key", key2)) == 0
    (sent2,) = _wait_for(watcher, key2, "SEND_REQUEST")
    assert main(_cli(e2e, "report", key2, sent2["actionId"], "--failed", "550 no such user",
                     "--permanent")) == 0
    (escalation,) = _wait_for(watcher, key2, "RUN_ESCALATION")
    assert (escalation["level"], escalation["party"]) == (1, "director")
    assert not watcher.seen.for_key("outcomes", key2)  # the director has two minutes
    with XwaitClient(e2e) as xw:
        xw.reply(key2, {"decision": "approved"}, channel="portal")
    outcome = watcher.outcome(key2)
    assert (outcome["outcome"], outcome["reason"]) == ("RECEIVED", "reply_valid")
    assert outcome["escalationLevel"] == 1
    assert outcome["sendError"] == "SEND_REQUEST: 550 no such user"


def test_then_review_asks_a_person_naming_the_failed_send(
    e2e: Settings, worker: WorkerProcess, watcher: Watcher,
) -> None:
    with XwaitClient(e2e) as xw:
        key = xw.start_wait("bounce-review")
        (sent,) = _wait_for(watcher, key, "SEND_REQUEST")
        xw.report_failed(key, sent["actionId"], "mailbox full")
        (review,) = _wait_for(watcher, key, "REVIEW_NEEDED")
        payload = json.loads(review["payload"])
        assert payload["sendFailed"]["actionId"] == sent["actionId"]
        assert payload["validationIssue"] == "send_failed: SEND_REQUEST: mailbox full"
        xw.deliver(key, {"reached": "by phone"}, reason="phoned sam", operator="olga")
    outcome = watcher.outcome(key)
    assert (outcome["outcome"], outcome["reason"]) == ("RECEIVED", "delivered")


def test_results_for_no_wait_or_an_unknown_action_are_rejected_with_their_reason(
    e2e: Settings, worker: WorkerProcess, watcher: Watcher,
) -> None:
    nobody = new_key()
    with XwaitClient(e2e) as xw:
        xw.report_delivered(nobody, "a-1")
        key = xw.start_wait("bounce")
        _wait_for(watcher, key, "SEND_REQUEST")
        xw.report_failed(key, "not-an-action", "boom")
    seen = watcher.until(lambda s: bool(s.for_key("rejected", nobody))
                         and bool(s.for_key("rejected", key)), 30, "two rejections")
    assert [r["reason"] for r in seen.for_key("rejected", nobody)] == ["unmatched"]
    assert [r["reason"] for r in seen.for_key("rejected", key)] == ["unmatched"]
