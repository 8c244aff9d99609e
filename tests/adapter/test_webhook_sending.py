"""What a webhook's answer means and when the adapter POSTs again, without Kafka: a real
local HTTP server answers as told (statuses, Retry-After), no mock of the HTTP client."""

from __future__ import annotations

import email.utils
import math
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from streams.adapter.sending import (
    FIRST_BACKOFF_S,
    Delivery,
    RetryPolicy,
    Sender,
    is_permanent,
    retry_after,
)
from streams.testing.workers import free_port
from tests.adapter.hooks import Answer, Script, webhook_server

pytestmark = [pytest.mark.rule12]

HEADERS = {"Idempotency-Key": "key-1", "X-Xwait-Action-Id": "a-1"}
SLACK_S = 0.05
"""What a wait may come short of what was asked, by the clocks' resolution (never more)."""


@pytest.fixture
def sender() -> Iterator[Sender]:
    s = Sender(timeout_s=5.0, retry=RetryPolicy(retries=3, max_wait_s=30.0))
    yield s
    s.close()


def _deliver(script: Script, sender: Sender) -> Delivery:
    with webhook_server(script) as base:
        return sender.deliver(f"{base}/hook", b'{"a": 1}', HEADERS)


def _gap(script: Script, first: int = 0) -> float:
    return script.hits[first + 1].at - script.hits[first].at


@pytest.mark.parametrize(("status", "delivered", "permanent"), [
    (200, True, False), (204, True, False),
    (400, False, True), (401, False, True), (403, False, True), (404, False, True),
    (409, False, True), (410, False, True), (422, False, True),
    (408, False, False), (425, False, False), (429, False, False),
    (500, False, False), (502, False, False), (503, False, False), (504, False, False),
    (0, False, False),
])
def test_one_post_is_delivered_on_2xx_failed_for_good_on_a_4xx_but_408_425_429(
        status: int, delivered: bool, permanent: bool) -> None:
    # A status is answered at once; 0 hangs past the timeout.  A busy machine took 0.7 s
    # to answer a 502, so only the hang gets the short timeout.
    timeout = 0.5 if status == 0 else 10.0
    script = Script({"/": [status]}, hang_s=1.5)
    with webhook_server(script) as base, Sender(timeout, RetryPolicy(retries=0)) as one:
        result = one.post(f"{base}/hook", b'{"a": 1}', HEADERS)
    assert (result.delivered, result.permanent) == (delivered, permanent)
    assert is_permanent(status) is permanent
    if status >= 400:
        assert result.error is not None and result.error.startswith(f"HTTP {status} ")
        assert result.error.endswith(": mailbox unavailable") and result.http_status == status
    if status == 0:
        assert result.error is not None and "timed out" in result.error
    (hit,) = script.hits
    assert hit.headers["Idempotency-Key"] == "key-1" and hit.body == {"a": 1}


def test_no_connection_is_a_failure_worth_another_try() -> None:
    with Sender(5.0, RetryPolicy(retries=0)) as one:
        result = one.post(f"http://127.0.0.1:{free_port()}/hook", b"{}", HEADERS)
    assert (result.delivered, result.permanent) == (False, False)
    assert result.error is not None and result.error.startswith("POST no answer")


def test_a_429_with_retry_after_seconds_is_delivered_once_that_wait_has_passed(
        sender: Sender) -> None:
    script = Script({"/": [Answer(429, {"Retry-After": "2"}), 200]})
    result = _deliver(script, sender)
    assert (result.delivered, result.posts) == (True, 2)
    assert [h.status for h in script.hits] == [429, 200]
    assert _gap(script) >= 2 - SLACK_S  # the backoff alone would have waited 1 s
    assert {h.headers["Idempotency-Key"] for h in script.hits} == {"key-1"}


def test_a_retry_after_as_an_http_date_is_waited_for(sender: Sender) -> None:
    # An HTTP date has whole seconds: 4 s ahead, truncated, is at least 3 s ahead.
    when = email.utils.formatdate(math.floor(time.time()) + 4, usegmt=True)
    script = Script({"/": [Answer(503, {"Retry-After": when}), 200]})
    result = _deliver(script, sender)
    assert (result.delivered, result.posts) == (True, 2)
    # Less what passed before the answer came (up to 1.5 s on a busy machine): still
    # longer than the 1 s backoff that applies when no Retry-After is read.
    assert _gap(script) >= 1.5


def test_a_retry_after_longer_than_the_cap_is_cut_to_it() -> None:
    script = Script({"/": [Answer(429, {"Retry-After": "3600"}), 200]})
    with Sender(5.0, RetryPolicy(retries=1, max_wait_s=1.5)) as capped:
        started = time.monotonic()
        result = _deliver(script, capped)
    assert (result.delivered, result.posts) == (True, 2)
    assert _gap(script) >= 1.5 - SLACK_S
    assert time.monotonic() - started < 600  # not parked for the hour the answer asked


def test_a_503_then_200_is_delivered_after_the_backoff(sender: Sender) -> None:
    script = Script({"/": [503, 200]})
    result = _deliver(script, sender)
    assert (result.delivered, result.posts, result.error) == (True, 2, None)
    assert _gap(script) >= FIRST_BACKOFF_S - SLACK_S


def test_a_404_fails_for_good_at_once(sender: Sender) -> None:
    script = Script({"/": [404, 200]})
    result = _deliver(script, sender)
    assert (result.delivered, result.permanent, result.posts) == (False, True, 1)
    assert [h.status for h in script.hits] == [404]
    assert result.error == "HTTP 404 Not Found: mailbox unavailable"


def test_when_the_retries_are_spent_the_last_failure_is_reported_with_the_count() -> None:
    script = Script({"/": [502, 503]})
    with Sender(5.0, RetryPolicy(retries=2, max_wait_s=0.2)) as quick:
        result = _deliver(script, quick)
    assert (result.delivered, result.permanent, result.posts) == (False, False, 3)
    assert result.error == "HTTP 503 Service Unavailable: mailbox unavailable (3 POSTs)"
    assert [h.status for h in script.hits] == [502, 503, 503]


def test_without_retries_a_failure_is_reported_after_one_post() -> None:
    script = Script({"/": [Answer(429, {"Retry-After": "1"}), 200]})
    with Sender(5.0, RetryPolicy(retries=0)) as once:
        result = _deliver(script, once)
    assert (result.delivered, result.permanent, result.posts) == (False, False, 1)
    assert result.retry_after_s == 1.0


def test_a_stop_cuts_the_wait_before_a_retry_short_and_reports_nothing() -> None:
    stopping = threading.Event()
    script = Script({"/": [Answer(429, {"Retry-After": "60"}), 200]})
    with webhook_server(script) as base, \
            Sender(5.0, RetryPolicy(3, 60.0), stopping=stopping) as patient, \
            ThreadPoolExecutor(1) as pool:
        future = pool.submit(patient.deliver, f"{base}/hook", b"{}", HEADERS)
        deadline = time.monotonic() + 30
        while not script.hits:
            assert time.monotonic() < deadline, "the first POST never came"
            time.sleep(0.05)
        stopping.set()
        result = future.result(timeout=30)  # not the 60 s the answer asked for
    assert (result.stopped, result.delivered, result.posts) == (True, False, 1)
    assert result.result == "stopped" and len(script.hits) == 1


@pytest.mark.parametrize(("value", "expected"), [
    ("120", 120.0), (" 7 ", 7.0), ("0", 0.0),
    ("Wed, 21 Oct 2015 07:28:00 GMT", 60.0),  # 60 s after "now" below
    ("Wed, 21 Oct 2015 07:28:00 -0000", 60.0),
    ("Wed, 21 Oct 2015 07:26:00 GMT", 0.0),  # in the past: at once
    (None, None), ("", None), ("soon", None), ("-5", None), ("1.5", None), ("²", None),
])
def test_retry_after_reads_delta_seconds_and_http_dates(value: str | None,
                                                        expected: float | None) -> None:
    now = email.utils.parsedate_to_datetime("Wed, 21 Oct 2015 07:27:00 GMT").timestamp()
    assert retry_after(value, now) == expected


def test_the_wait_before_a_retry_is_the_answer_s_or_a_doubling_backoff_at_most_the_cap(
) -> None:
    policy = RetryPolicy(retries=5, max_wait_s=3.0)
    assert [policy.wait_before(n, None) for n in (1, 2, 3)] == [1.0, 2.0, 3.0]
    assert (policy.wait_before(1, 2.5), policy.wait_before(1, 7200.0)) == (2.5, 3.0)
    assert policy.wait_before(2, 0.0) == 0.0
