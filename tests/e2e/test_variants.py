"""Every variant end to end: a real worker process on the real broker."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.harness import Client, Seen, Watcher, WorkerProcess, new_key

pytestmark = [
    pytest.mark.kafka, pytest.mark.slow, pytest.mark.rule3, pytest.mark.rule5, pytest.mark.rule6,
]


def _one_outcome(seen: Seen, key: str) -> bool:
    return len(seen.for_key("outcomes", key)) >= 1


def _the_outcome(watcher: Watcher, key: str, what: str,
                 timeout: float = 60) -> tuple[Seen, dict[str, Any]]:
    """Everything seen once the wait's outcome came (every output before it too), and
    that outcome (the only one)."""
    watcher.until(lambda s: _one_outcome(s, key), timeout, what)
    seen = watcher.caught_up()
    [outcome] = seen.for_key("outcomes", key)
    return seen, outcome


def _unanswered(client: Client, watcher: Watcher,
                definition: str) -> tuple[str, Seen, dict[str, Any]]:
    """A wait started and never answered, once it ended: its key, everything seen then,
    and its outcome (ESCALATED)."""
    key = new_key()
    client.start(key, definition)
    client.flush()
    seen, outcome = _the_outcome(watcher, key, "the escalated outcome")
    assert outcome["outcome"] == "ESCALATED"
    return key, seen, outcome


def test_single_channel_reply_is_received_with_its_data(
    worker: WorkerProcess, client: Client, watcher: Watcher
) -> None:
    key = client.start_answered("slow-approval", {"decision": "approved"}, tenant="acme")
    seen, outcome = _the_outcome(watcher, key, "the outcome")
    assert outcome["outcome"] == "RECEIVED"
    assert outcome["reason"] == "reply_valid"
    assert json.loads(outcome["responseData"]) == {"decision": "approved"}
    assert outcome["responseValid"] is True
    assert outcome["tenant"] == "acme"
    assert [a["action"] for a in seen.for_key("actions", key)] == ["SEND_REQUEST"]


def test_silence_sends_two_reminders_then_escalates_and_ends_escalated(
    worker: WorkerProcess, client: Client, watcher: Watcher
) -> None:
    key, seen, outcome = _unanswered(client, watcher, "fast-approval")
    assert outcome["remindersSent"] == 2
    assert outcome["escalationLevel"] == 1
    actions = [a["action"] for a in seen.for_key("actions", key)]
    assert actions == ["SEND_REQUEST", "SEND_REMINDER", "SEND_REMINDER", "RUN_ESCALATION"]
    # The deadline (7 s) and the director's level (3 s) ran their course.
    assert outcome["endedAt"] - outcome["parkedAt"] >= 10_000


def test_multi_channel_first_channel_wins_and_the_second_reply_is_late(
    worker: WorkerProcess, client: Client, watcher: Watcher
) -> None:
    key = new_key()
    client.start(key, "fast-quote")
    client.reply(key, {"amount": 120.5, "currency": "EUR"}, channel="webhook")
    client.reply(key, {"amount": 99, "currency": "EUR"}, channel="email")
    client.flush()
    seen = watcher.until(lambda s: _one_outcome(s, key) and bool(s.for_key("rejected", key)), 60,
                         "outcome and the late reply")
    [outcome] = seen.for_key("outcomes", key)
    assert json.loads(outcome["responseData"])["amount"] == 120.5
    [late] = seen.for_key("rejected", key)
    assert late["reason"] == "late"
    assert late["detail"].startswith("Expected")


def test_first_valid_response_wins_and_closes_out_the_other_parties(
    worker: WorkerProcess, client: Client, watcher: Watcher
) -> None:
    key = new_key()
    client.start(key, "fast-first-valid", parties=["carrier-a", "carrier-b", "carrier-c"])
    client.reply(f"{key}~carrier-b", {"price": 10, "replyAcceptable": False})
    client.reply(f"{key}~carrier-c", {"price": 12})
    client.flush()
    seen, outcome = _the_outcome(watcher, key, "the outcome")
    assert outcome["outcome"] == "RECEIVED"
    assert json.loads(outcome["responseData"])["price"] == 12
    watcher.poll(1)
    actions = seen.for_key("actions", key)
    sent = sorted(a["party"] for a in actions if a["action"] == "SEND_REQUEST")
    assert sent == ["carrier-a", "carrier-b", "carrier-c"]
    closed = sorted(a["party"] for a in actions if a["action"] == "CLOSE_OUT")
    assert closed == ["carrier-a", "carrier-b"]
    assert [r["reason"] for r in seen.for_key("rejected", key)] == ["unacceptable"]


def test_probe_polls_until_the_result_is_ready(
    worker: WorkerProcess, client: Client, watcher: Watcher
) -> None:
    key = new_key()
    client.start(key, "fast-probe")
    client.flush()
    watcher.until(lambda s: sum(a["action"] == "POLL" for a in s.for_key("actions", key)) >= 2,
                  30, "two polls")
    client.reply(key, {"resultReady": False}, channel="poll")
    client.reply(key, {"resultReady": True, "result": {"rows": 3}}, channel="poll")
    client.flush()
    _, outcome = _the_outcome(watcher, key, "the outcome", 30)
    assert outcome["outcome"] == "RECEIVED"
    assert outcome["reason"] == "result_ready"


def test_probe_without_a_result_is_stopped_by_its_deadline(
    worker: WorkerProcess, client: Client, watcher: Watcher
) -> None:
    key, seen, outcome = _unanswered(client, watcher, "fast-probe")
    polls = [a for a in seen.for_key("actions", key) if a["action"] == "POLL"]
    assert 3 <= len(polls) <= 8  # every second for a six-second deadline


def test_chained_stages_end_after_the_last_stage_with_both_answers(
    worker: WorkerProcess, client: Client, watcher: Watcher
) -> None:
    key = client.start_answered("fast-two-stage", {"decision": "approved"})
    watcher.until(lambda s: any(a["action"] == "SEND_REQUEST" and a["party"] == "finance"
                                for a in s.for_key("actions", key)), 30, "the finance stage")
    assert not watcher.seen.for_key("outcomes", key)
    client.reply(key, {"decision": "approved"})
    client.flush()
    _, outcome = _the_outcome(watcher, key, "the outcome", 30)
    assert outcome["outcome"] == "RECEIVED"
    assert set(json.loads(outcome["responseData"])) == {"manager", "finance"}
