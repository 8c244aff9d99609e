"""Commands through the API: the token, and the state change they cause."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from streams.config import Settings
from streams.console.api import Access, ApiError, Console
from tests.console.conftest import TOKEN, Cluster, eventually, http, new_key

pytestmark = pytest.mark.kafka


def post(cluster: Cluster, key: str, action: str, body: dict[str, Any],
         token: str | None = TOKEN, operator: str | None = "tess") -> tuple[int, Any]:
    """POST a command to w1, as operator `operator` unless the body names one."""
    if operator is not None:
        body = {"operator": operator, **body}
    return http("POST", f"{cluster.w1.url}/xwait/api/waits/{key}/{action}", body, token=token)


def test_a_command_without_the_token_is_refused_and_changes_nothing(cluster: Cluster) -> None:
    key = new_key()
    cluster.start(key)
    cluster.wait_state(key, "parked")
    status, body = post(cluster, key, "suspend", {"reason": "x"}, token=None)
    assert status == 401
    assert "Bearer" in body["error"]
    status, body = post(cluster, key, "cancel", {"reason": "x"}, token="wrong")  # noqa: S106
    assert status == 401
    status, body = cluster.status(key)
    assert body["state"] == "parked"


def test_suspend_then_resume_with_the_token(cluster: Cluster) -> None:
    key = new_key()
    cluster.start(key)
    cluster.wait_state(key, "parked")
    # Sent to w1 whatever the owner: the command reaches the owner through Kafka.
    status, body = post(cluster, key, "suspend", {"reason": "customer on holiday",
                                                 "operator": "alice"})
    assert status == 202
    assert body["command"] == {"correlationKey": key, "command": "SUSPEND",
                               "operator": "alice", "reason": "customer on holiday"}
    assert "by alice" in cluster.wait_state(key, "suspended")["trace"][-1]["detail"]
    w = cluster.wait_state(key, "suspended")
    assert w["suspension"]["reason"] == "customer on holiday"
    assert w["suspension"]["resumeTo"] == "parked"
    assert w["timers"] == []
    assert [r["kind"] for r in w["suspension"]["remaining"]] == ["deadline"]
    status, _ = post(cluster, key, "resume", {"reason": "holiday over", "operator": "bob"})
    assert status == 202
    w = cluster.wait_state(key, "parked")
    assert [t["kind"] for t in w["timers"]] == ["deadline"]
    resumed = [e for e in w["trace"] if e["event"] == "resumed"]
    assert resumed and resumed[0]["detail"].endswith(": holiday over (by bob)"), w["trace"]


def test_migrate_through_the_api_is_traced_and_its_version_shown(cluster: Cluster) -> None:
    key = new_key()
    cluster.start(key)
    before = cluster.wait_state(key, "parked")
    assert before["definitionVersion"]
    # Already on the newest: the command changes nothing (counted, not traced).
    status, body = post(cluster, key, "migrate", {"reason": "new policy", "operator": "mia"})
    assert status == 202 and body["command"]["command"] == "MIGRATE"
    # A version the definitions topic lacks is refused before anything is sent, the
    # versions it holds listed.
    status, answer = post(cluster, key, "migrate", {"version": "no-such-version"})
    assert status == 400
    assert "unknown version 'no-such-version'" in answer["error"]
    assert before["definitionVersion"] in answer["error"]
    _, shown = eventually(lambda: cluster.status(key),
                          lambda r: r[0] == 200 and r[1]["definitionVersion"] is not None, 30,
                          "the status")
    assert shown["definitionVersion"] == before["definitionVersion"]


def test_a_cancel_sent_before_the_request_is_held_then_ends_the_wait(cluster: Cluster) -> None:
    key = new_key()
    status, _ = post(cluster, key, "cancel", {"reason": "withdrawn", "operator": "olga"})
    assert status == 202
    # Until the request comes, the owner shows the held command on the 404.
    _, body = eventually(lambda: cluster.status(key),
                         lambda r: r[0] == 404 and r[1].get("earlyCommands") == 1, 60,
                         "the command held")
    assert body["earlyReplies"] == 0
    cluster.start(key)
    w = cluster.wait_state(key, "done")
    assert w["outcome"] == "CANCELLED"


def test_deliver_ends_the_wait_received_and_its_history_stays_readable(
        cluster: Cluster) -> None:
    key = new_key()
    cluster.start(key, payload='{"expense": 42}')
    cluster.wait_state(key, "parked")
    status, _ = post(cluster, key, "deliver", {"responseData": {"decision": "approved"},
                                               "reason": "phoned in", "operator": "dora"})
    assert status == 202
    w = cluster.wait_state(key, "done")
    # A finished wait keeps its outcome, response and trace until it is purged.
    assert (w["outcome"], w["reason"]) == ("RECEIVED", "delivered")
    assert (w["operator"], w["operatorReason"]) == ("dora", "phoned in")
    assert w["responseData"] == '{"decision":"approved"}'
    assert w["payload"] == '{"expense": 42}'
    assert [e["event"] for e in w["trace"]][-2:] == ["reply_valid", "ended"]
    assert any("by dora" in e["detail"] for e in w["trace"])
    assert w["endedAt"] >= w["parkedAt"]
    # "Next due" of a finished wait is nothing; its purge time is said as such.
    assert w["nextDueAt"] is None and w["timers"] == []
    assert w["purgeAt"] > w["endedAt"]


def test_review_queue_lists_an_invalid_reply_and_accept_ends_it(cluster: Cluster) -> None:
    key = new_key()
    cluster.start(key)
    cluster.wait_state(key, "parked")
    cluster.client.reply(key, {"decision": "maybe"})
    cluster.client.flush()
    w = cluster.wait_state(key, "in_review")
    assert w["validationIssue"]
    status, queue = eventually(lambda: http("GET", f"{cluster.w2.url}/xwait/api/review"),
                               lambda r: key in [x["key"] for x in r[1]["inReview"]], 60,
                               "the wait in the review queue")
    assert status == 200
    status, _ = post(cluster, key, "review", {"outcome": "Accept", "note": "fine by me",
                                              "reason": "called the vendor"})
    assert status == 202
    w = cluster.wait_state(key, "done")
    assert (w["outcome"], w["reason"]) == ("RECEIVED", "review_accepted")
    assert "Accept: fine by me; called the vendor (by tess)" in [
        e["detail"] for e in w["trace"] if e["event"] == "reviewed"]
    assert (w["reviewOutcome"], w["reviewNote"], w["operator"]) == ("Accept", "fine by me",
                                                                   "tess")
    assert w["validationIssue"] and w["responseData"] == '{"decision": "maybe"}'


def test_review_queue_shows_rejected_records_with_their_reason(cluster: Cluster) -> None:
    key = new_key()
    cluster.client.raw("replies", key.encode(), b"\x00not a record")
    cluster.client.flush()
    _, queue = eventually(lambda: http("GET", f"{cluster.w1.url}/xwait/api/review"),
                          lambda r: any(x.get("key") == key for x in r[1]["rejected"]), 60,
                          "the rejected record")
    found = next(x for x in queue["rejected"] if x.get("key") == key)
    assert found["reason"] == "undecodable"
    assert found["topic"] == cluster.settings.topic("replies")


@pytest.mark.parametrize(("action", "body"), [
    ("suspend", {}),                                   # a reason is required
    ("deliver", {}),                                   # responseData is required
    ("deliver", {"responseData": "{not json"}),
    ("review", {"outcome": "Maybe", "note": "n"}),
    ("review", {"outcome": "Accept"}),                 # a note is required
    ("review", {"outcome": "Submit Correction", "note": "n"}),  # corrected data missing
    ("reschedule", {}),                                # a deadline or a shift is required
    ("reschedule", {"deadline": "PT1H", "moveBy": "PT1H"}),
    ("reschedule", {"moveBy": "soon"}),
])
def test_malformed_commands_answer_400(cluster: Cluster, action: str,
                                       body: dict[str, Any]) -> None:
    status, answer = post(cluster, new_key(), action, body)
    assert status == 400
    assert answer["error"]


def test_a_command_without_an_operator_answers_400(cluster: Cluster) -> None:
    status, answer = post(cluster, new_key(), "resume", {}, operator=None)
    assert status == 400
    assert "operator" in answer["error"]


def test_an_unknown_command_answers_404(cluster: Cluster) -> None:
    status, _ = post(cluster, new_key(), "explode", {})
    assert status == 404


@dataclass
class _NoTokenWorker:
    settings: Settings


def test_without_a_configured_token_commands_are_disabled() -> None:
    console = Console(_NoTokenWorker(Settings()))  # type: ignore[arg-type]
    with pytest.raises(ApiError) as refused:
        console.authorize(f"Bearer {TOKEN}", Access.COMMAND)
    assert refused.value.status == 503
    assert "XWAIT_CONSOLE_TOKEN" in refused.value.body["error"]
