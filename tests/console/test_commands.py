"""Commands through the API: the token, and the state change they cause."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from streams.config import Settings
from streams.console.api import ApiError, Console
from tests.console.conftest import TOKEN, Cluster, eventually, http, new_key

pytestmark = pytest.mark.kafka


def post(cluster: Cluster, key: str, action: str, body: dict[str, Any],
         token: str | None = TOKEN) -> tuple[int, Any]:
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
    w = cluster.wait_state(key, "suspended")
    assert w["suspension"]["reason"] == "customer on holiday"
    assert w["suspension"]["resumeTo"] == "parked"
    assert w["timers"] == []
    assert [r["kind"] for r in w["suspension"]["remaining"]] == ["deadline"]
    status, _ = post(cluster, key, "resume", {})
    assert status == 202
    w = cluster.wait_state(key, "parked")
    assert [t["kind"] for t in w["timers"]] == ["deadline"]


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


def test_deliver_ends_the_wait_received(cluster: Cluster) -> None:
    key = new_key()
    cluster.start(key)
    cluster.wait_state(key, "parked")
    status, _ = post(cluster, key, "deliver", {"responseData": {"decision": "approved"}})
    assert status == 202
    w = cluster.wait_state(key, "done")
    # A finished wait is trimmed to what recognises late input; its data and
    # trace went out with the Outcome record.
    assert (w["outcome"], w["reason"]) == ("RECEIVED", "delivered")
    assert w["endedAt"] >= w["parkedAt"]


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
    status, _ = post(cluster, key, "review", {"outcome": "Accept", "note": "fine by me"})
    assert status == 202
    w = cluster.wait_state(key, "done")
    assert (w["outcome"], w["reason"]) == ("RECEIVED", "review_accepted")


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
])
def test_malformed_commands_answer_400(cluster: Cluster, action: str,
                                       body: dict[str, Any]) -> None:
    status, answer = post(cluster, new_key(), action, body)
    assert status == 400
    assert answer["error"]


def test_an_unknown_command_answers_404(cluster: Cluster) -> None:
    status, _ = post(cluster, new_key(), "explode", {})
    assert status == 404


@dataclass
class _NoTokenWorker:
    settings: Settings


def test_without_a_configured_token_commands_are_disabled() -> None:
    console = Console(_NoTokenWorker(Settings()))  # type: ignore[arg-type]
    with pytest.raises(ApiError) as refused:
        console.check_token(f"Bearer {TOKEN}")
    assert refused.value.status == 503
    assert "XWAIT_CONSOLE_TOKEN" in refused.value.body["error"]
