"""The rules that involve Kafka itself: ordering across topics, races, bad input."""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

import pytest
from confluent_kafka import Producer

from streams import codec
from streams.config import Settings
from streams.partitioning import partition_for
from tests.e2e.harness import (
    Client,
    Watcher,
    WorkerProcess,
    new_key,
    parked,
    until_status,
    until_time,
)

pytestmark = [
    pytest.mark.kafka, pytest.mark.slow, pytest.mark.rule2, pytest.mark.rule4, pytest.mark.rule7,
    pytest.mark.rule8, pytest.mark.rule9,
]


def test_an_early_reply_is_held_and_correlated_when_its_request_arrives(
    worker: WorkerProcess, client: Client, watcher: Watcher
) -> None:
    key = new_key()
    client.reply(key, {"decision": "approved"})
    client.flush()
    # the reply is processed first, on its own topic: the worker holds it
    until_status(worker, key, lambda code, body: code == 404 and body["earlyReplies"] == 1,
                 "the early reply held")
    watcher.poll(0.2)
    assert not watcher.seen.for_key("outcomes", key)
    client.start(key, "slow-approval")
    client.flush()
    seen = watcher.until(lambda s: bool(s.for_key("outcomes", key)), 30, "the outcome")
    [outcome] = seen.for_key("outcomes", key)
    assert outcome["outcome"] == "RECEIVED"
    assert json.loads(outcome["responseData"]) == {"decision": "approved"}
    assert not seen.for_key("rejected", key)


def test_a_reply_that_overtakes_its_request_still_loses_to_a_deadline_due_before_it(
    worker: WorkerProcess, client: Client, watcher: Watcher
) -> None:
    """Rule 2 for early replies: the request is stamped 5 s before the reply reached
    Kafka, with a 3 s deadline, so the deadline was due 2 s before the reply."""
    lost, won = new_key(), new_key()
    client.reply(lost, {"decision": "approved"}, replyId="after-the-deadline")
    client.reply(won, {"decision": "approved"})
    client.flush()  # both replies are on the broker before either request is sent
    appended = int(time.time() * 1000)
    client.start(lost, "race", requestedAt=appended - 5000, deadline="PT3S")
    client.start(won, "race", requestedAt=appended - 1000, deadline="PT3S")
    client.flush()
    seen = watcher.until(lambda s: bool(s.for_key("outcomes", lost) and
                                        s.for_key("outcomes", won) and
                                        s.for_key("rejected", lost)), 30, "both outcomes")
    [outcome] = seen.for_key("outcomes", lost)
    assert (outcome["outcome"], outcome["reason"]) == ("ESCALATED", "deadline_exhausted")
    assert outcome["endedAt"] == appended - 2000
    [late] = seen.for_key("rejected", lost)
    assert late["reason"] == "late"
    assert json.loads(codec.decode("Reply", late["original"])["responseData"]) == {
        "decision": "approved"}
    [received] = seen.for_key("outcomes", won)
    assert (received["outcome"], received["reason"]) == ("RECEIVED", "reply_valid")


def test_a_command_that_overtakes_its_request_is_applied_when_the_request_arrives(
    worker: WorkerProcess, client: Client, watcher: Watcher
) -> None:
    key = new_key()
    client.command(key, "SUSPEND", reason="audit first", operator="olga")
    client.flush()
    # the command is processed first, on its own topic: the worker holds it
    until_status(worker, key, lambda code, body: code == 404 and body["earlyCommands"] == 1,
                 "the early command held")
    requested = time.time()
    client.start(key, "race")  # a 2 s deadline
    client.flush()
    watcher.parked(key)
    wait = until_status(worker, key, lambda code, body: code == 200, "the wait parked")
    assert wait["state"] == "suspended" and not wait["timers"], "suspended from the start"
    until_time(requested + 2.5, watcher)  # the deadline would have passed by now
    assert not watcher.seen.for_key("outcomes", key), "suspended from the start: no deadline"
    client.command(key, "RESUME")
    client.flush()
    outcome = watcher.outcome(key)
    assert outcome["outcome"] == "ESCALATED", "the full deadline ran after the resume"
    events = [t["event"] for t in outcome["trace"]]
    assert events.index("requested") < events.index("suspended") < events.index("resumed")
    assert not watcher.seen.for_key("rejected", key)


def test_a_reply_racing_the_deadline_gives_exactly_one_outcome_per_wait(
    worker: WorkerProcess, client: Client, watcher: Watcher
) -> None:
    keys = [new_key() for _ in range(60)]
    for key in keys:
        client.start(key, "race")
    client.flush()
    time.sleep(1.6)
    for i, key in enumerate(keys):
        client.reply(key, {"n": i})
        if i % 10 == 0:
            time.sleep(0.1)  # spread the replies across the deadline
    client.flush()
    seen = watcher.until(lambda s: all(s.for_key("outcomes", k) for k in keys), 60,
                         "an outcome for every wait")
    watcher.poll(2)  # anything extra would show up now
    for key in keys:
        [outcome] = seen.for_key("outcomes", key)
        rejected = seen.for_key("rejected", key)
        if outcome["outcome"] == "RECEIVED":
            assert rejected == [], "the reply won; nothing else may be rejected"
        else:
            assert outcome["outcome"] == "ESCALATED"
            assert [r["reason"] for r in rejected] == ["late"], "the deadline won"


def test_a_record_on_the_wrong_partition_is_forwarded_and_counted(
    e2e: Settings, worker: WorkerProcess, client: Client, watcher: Watcher
) -> None:
    key = new_key()
    right = partition_for(key.encode(), e2e.partitions)
    wrong = (right + 1) % e2e.partitions
    before = (worker.stats() or {}).get("counters", {}).get("misrouted", 0)
    client.send("requests", key, {"correlationKey": key, "definition": "slow-approval",
                                  "requestedAt": int(time.time() * 1000)}, partition=wrong)
    client.flush()
    client.reply(key, {"decision": "rejected"})
    client.flush()
    seen = watcher.until(lambda s: bool(s.for_key("outcomes", key)), 30, "the outcome")
    assert seen.for_key("outcomes", key)[0]["outcome"] == "RECEIVED"
    stats = worker.wait_until(lambda s: s["counters"].get("misrouted", 0) > before, 10,
                              "did not count the misrouted record")
    assert stats["counters"]["misrouted"] == before + 1


def test_undecodable_input_is_published_with_its_reason_and_original_bytes(
    worker: WorkerProcess, client: Client, watcher: Watcher
) -> None:
    key = new_key()
    garbage = b"\xc3\x01not avro at all"
    client.raw("replies", key.encode(), garbage)
    client.raw("requests", key.encode(), b'{"correlationKey": 5}')
    client.flush()
    seen = watcher.until(lambda s: len(s.for_key("rejected", key)) == 2, 30, "two rejections")
    by_topic = {r["topic"].rsplit(".", 1)[1]: r for r in seen.for_key("rejected", key)}
    assert by_topic["replies"]["reason"] == "undecodable"
    assert by_topic["replies"]["original"] == garbage
    assert by_topic["requests"]["reason"] == "undecodable"
    assert "correlationKey" in by_topic["requests"]["detail"]
    # Counted too (the counters reach the stats a moment after the records are out).
    worker.wait_until(lambda st: st["counters"].get("rejected.undecodable", 0) >= 2, 30,
                      "both rejections counted")


def test_an_invalid_reply_goes_to_review_and_an_accept_ends_the_wait(
    worker: WorkerProcess, client: Client, watcher: Watcher
) -> None:
    key = client.start_answered("slow-approval", {"decision": "maybe"})
    seen = watcher.until(lambda s: any(a["action"] == "REVIEW_NEEDED"
                                       for a in s.for_key("actions", key)), 30, "review_needed")
    review = next(a for a in seen.for_key("actions", key) if a["action"] == "REVIEW_NEEDED")
    assert "decision" in json.loads(review["payload"])["validationIssue"]
    client.command(key, "REVIEW", reviewOutcome="Accept", reviewNote="verbal ok by phone",
                   operator="ops")
    client.flush()
    seen = watcher.until(lambda s: bool(s.for_key("outcomes", key)), 30, "the outcome")
    [outcome] = seen.for_key("outcomes", key)
    assert outcome["outcome"] == "RECEIVED"
    assert outcome["reviewOutcome"] == "Accept"
    assert outcome["reviewNote"] == "verbal ok by phone"
    assert outcome["responseValid"] is False
    assert outcome["validationIssue"]


def test_a_suspended_wait_does_not_time_out_and_resumes_with_its_remaining_time(
    worker: WorkerProcess, client: Client, watcher: Watcher
) -> None:
    key = new_key()
    requested = time.time()
    client.start(key, "race")  # a 2 s deadline
    client.flush()
    # Appended right after the request, by the broker's clock well before its deadline
    # (waiting for the wait to park first let a busy machine miss the deadline).
    client.command(key, "SUSPEND", reason="maintenance", operator="ops")
    client.flush()
    until_status(worker, key, lambda code, body: body.get("state") == "suspended",
                 "the wait suspended")
    until_time(requested + 4.0, watcher)  # twice the deadline passes while suspended
    assert not watcher.seen.for_key("outcomes", key)
    resumed_at = time.time()
    client.command(key, "RESUME", operator="ops")
    client.flush()
    seen = watcher.until(lambda s: bool(s.for_key("outcomes", key)), 30, "the outcome")
    [outcome] = seen.for_key("outcomes", key)
    assert outcome["outcome"] == "ESCALATED"
    # What was left of the 2 s deadline ran after the resume, not before it.
    assert outcome["endedAt"] / 1000 > resumed_at + 0.5


def test_cancel_ends_a_parked_wait_as_cancelled(
    worker: WorkerProcess, client: Client, watcher: Watcher
) -> None:
    key = parked(client, watcher, "slow-approval")
    client.command(key, "CANCEL", reason="request withdrawn", operator="ops")
    client.flush()
    seen = watcher.until(lambda s: bool(s.for_key("outcomes", key)), 30, "the outcome")
    assert seen.for_key("outcomes", key)[0]["outcome"] == "CANCELLED"


def test_a_forged_timer_record_does_not_end_a_wait_before_its_deadline(
    worker: WorkerProcess, e2e: Settings, client: Client, watcher: Watcher
) -> None:
    key = parked(client, watcher, "slow-approval")  # a deadline an hour away
    # Its SEND_REQUEST is acknowledged before its state is stored (at_least_once, commit
    # steps 2 and 5): the API answered 404 in that moment once, beside two suites.
    status = until_status(worker, key, lambda code, body: code == 200, "the wait stored")
    deadline = next(t for t in status["timers"] if t["kind"] == "deadline")
    forger = Producer(e2e.confluent(partitioner="murmur2_random"))
    forger.produce(e2e.topic("timers"), key=key.encode(), value=codec.encode("Timer", {
        "correlationKey": key, "kind": "deadline", "dueAt": deadline["dueAt"],
        "generation": deadline["generation"], "firedAt": int(time.time() * 1000)}))
    assert forger.flush(30) == 0
    worker.wait_until(lambda s: s["counters"].get("timers.not_yet_due", 0) >= 1, 30,
                      "ignores the early timer record")
    watcher.poll(1.0)
    assert not watcher.seen.for_key("outcomes", key)
    assert _status(worker, key)["state"] == "parked"


def _status(worker: WorkerProcess, key: str) -> dict[str, Any]:
    with urllib.request.urlopen(  # noqa: S310 - loopback test server
        f"{worker.url}/xwait/api/waits/{key}", timeout=5
    ) as resp:
        data: dict[str, Any] = json.loads(resp.read())
        return data
