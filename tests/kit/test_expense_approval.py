"""The shipped `expense-approval` definition, tested with the test kit: days in milliseconds.

The worked example of docs/guides/testing.md is copied from this module (and
tests/kit/test_guide.py keeps it equal).  expense-approval asks a manager on
the portal, reminds every 24 hours at most twice, escalates to the director
after 3 days and gives them 12 more hours; an invalid reply goes to review.
"""

from __future__ import annotations

from datetime import timedelta

from streams.testing.kit import Kit

DAY = timedelta(days=1)


def test_a_reply_before_the_deadline_wins(xwait_kit: Kit) -> None:
    key = xwait_kit.start_wait("expense-approval", payload={"amount": 120})
    xwait_kit.advance("P2DT6H")  # two reminders went out; the deadline is in 18 hours
    xwait_kit.reply(key, {"decision": "approved", "by": "dana"})

    outcome = xwait_kit.outcome(key)
    assert outcome is not None and outcome.outcome == "RECEIVED"
    assert outcome.response_data == {"decision": "approved", "by": "dana"}
    assert xwait_kit.elapsed(outcome.ended_at) == 2 * DAY + timedelta(hours=6)

    xwait_kit.advance("P5D")  # long past the deadline: nothing more happens
    assert [a.action for a in xwait_kit.actions(key)] == [
        "SEND_REQUEST", "SEND_REMINDER", "SEND_REMINDER"]


def test_without_a_reply_two_reminders_then_the_director_then_escalated(
        xwait_kit: Kit) -> None:
    key = xwait_kit.start_wait("expense-approval", payload={"amount": 120})
    xwait_kit.advance("P3D")

    assert [(a.action, xwait_kit.elapsed(a.at)) for a in xwait_kit.actions(key)] == [
        ("SEND_REQUEST", 0 * DAY),
        ("SEND_REMINDER", 1 * DAY),
        ("SEND_REMINDER", 2 * DAY),
        ("RUN_ESCALATION", 3 * DAY),
    ]
    assert xwait_kit.actions(key, "RUN_ESCALATION")[0].party == "director"
    assert xwait_kit.outcome(key) is None  # the director has 12 more hours

    xwait_kit.advance("PT12H")
    outcome = xwait_kit.outcome(key)
    assert outcome is not None
    assert (outcome.outcome, outcome.reason) == ("ESCALATED", "deadline_exhausted")
    assert xwait_kit.elapsed(outcome.ended_at) == 3 * DAY + timedelta(hours=12)


def test_an_invalid_reply_goes_to_review_and_an_operator_accepts_it(xwait_kit: Kit) -> None:
    key = xwait_kit.start_wait("expense-approval", payload={"amount": 120})
    xwait_kit.reply(key, {"decision": "maybe"})  # not one of approved, rejected

    (review,) = xwait_kit.actions(key, "REVIEW_NEEDED")
    assert "'maybe' is not one of" in review.payload["validationIssue"]
    status = xwait_kit.status(key)
    assert status is not None and status["state"] == "in_review"

    xwait_kit.client.review(key, "Accept", "the manager meant yes", operator="olga")
    outcome = xwait_kit.outcome(key)
    assert outcome is not None
    assert (outcome.outcome, outcome.reason) == ("RECEIVED", "review_accepted")
    assert (outcome.review_outcome, outcome.operator) == ("Accept", "olga")


def test_a_failed_send_is_recorded_and_the_wait_goes_on(xwait_kit: Kit) -> None:
    # expense-approval declares no on_send_failure: a failure is only recorded.
    xwait_kit.adapter.fail("SEND_REQUEST", "550 mailbox unavailable", permanent=True)
    key = xwait_kit.start_wait("expense-approval", payload={"to": "sam@example.com"})

    status = xwait_kit.status(key)
    assert status is not None
    assert status["trace"][-1]["event"] == "send_failed"
    assert "550 mailbox unavailable" in status["trace"][-1]["detail"]

    xwait_kit.advance("P1D")  # the reminder goes out all the same
    assert [a.action for a in xwait_kit.adapter.received] == ["SEND_REQUEST", "SEND_REMINDER"]


def test_a_send_that_keeps_failing_is_retried_then_escalated(xwait_kit: Kit) -> None:
    # demo-approval: expense-approval's shape in seconds, with
    # on_send_failure: {retries: 2, backoff: PT1S, then: escalate}
    xwait_kit.adapter.fail("SEND_REQUEST", "503 Service Unavailable", times=None)
    key = xwait_kit.start_wait("demo-approval", payload={"to": "sam@example.com"})
    xwait_kit.advance("PT1S")  # first retry
    xwait_kit.advance("PT1S")  # second retry, then no retry left: the director, now

    assert [(a.action, a.send_attempt, xwait_kit.elapsed(a.at))
            for a in xwait_kit.actions(key)] == [
        ("SEND_REQUEST", 1, timedelta(0)),
        ("SEND_REQUEST", 2, timedelta(seconds=1)),
        ("SEND_REQUEST", 3, timedelta(seconds=2)),
        ("RUN_ESCALATION", 1, timedelta(seconds=2)),  # not after the 8 s deadline
    ]
