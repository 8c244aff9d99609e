"""The webhook adapter on the broker (rule 12): `xwait adapter webhook` POSTs actions to a
real local HTTP server that fails on purpose, POSTs again itself what may come out
otherwise (429 after its Retry-After, 5xx, a timeout), reports the results, and the wait
escalates with send_failed only when a send fails for good; every POST of one action
carries one Idempotency-Key; it commits after reporting, so a restart goes on where it
stopped."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from streams.client import XwaitClient
from streams.config import Settings
from streams.testing.workers import XWAIT, free_port, settings_env
from tests.adapter.hooks import Answer, Hit, Script, webhook_server
from tests.e2e.conftest import new_e2e
from tests.e2e.harness import Watcher, WorkerProcess
from tests.waiting import until

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.rule12]

HOOKED = """
variant: single-channel
channels: [portal]
deadline: PT3M
reminder: {every: PT2M, limit: 1}
on_send_failure: {retries: 2, backoff: PT1S, then: escalate}
"""
ROUTES = """
timeout: PT1S
retries: 1
max_retry_wait: PT30S
routes:
  - action: [SEND_REQUEST, SEND_REMINDER]
    url: "{base}/send/{{definition}}/{{waitKey}}?attempt={{sendAttempt}}"
    headers: {{X-Token: "${{HOOK_TOKEN}}"}}
  - action: RUN_ESCALATION
    url: "{base}/escalate/{{waitKey}}"
"""


@pytest.fixture(scope="module")
def e2e(kafka_bootstrap: str, e2e_folder: Path) -> Settings:
    s = new_e2e(kafka_bootstrap, e2e_folder, tag="hook")
    (s.topology / "waits" / "hooked.yaml").write_text(HOOKED)
    return s


@pytest.fixture(scope="module")
def script() -> Script:
    return Script(hang_s=2.5)


@pytest.fixture(scope="module")
def hooks(script: Script) -> Iterator[str]:
    with webhook_server(script) as base:
        yield base


class Adapter:
    def __init__(self, settings: Settings, folder: Path, base: str) -> None:
        self.config = folder / "hooks.yaml"
        self.config.write_text(ROUTES.format(base=base))
        self.metrics_port = free_port()
        self.log = folder / "adapter.log"
        self.env = {**os.environ, **settings_env(settings), "HOOK_TOKEN": "t0ken"}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Adapter:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(  # noqa: S603 - our own CLI
                [str(XWAIT), "adapter", "webhook", "--config", str(self.config),
                 "--metrics-port", str(self.metrics_port)],
                env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 30
        while self.metrics() is None:
            assert self.proc.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, "the adapter's metrics never answered"
            time.sleep(0.2)
        return self

    def metrics(self) -> str | None:
        try:
            with urllib.request.urlopen(  # noqa: S310 - loopback
                    f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=2) as resp:
                return str(resp.read().decode())
        except OSError:
            return None

    def count(self, action: str, result: str) -> float:
        text = self.metrics() or ""
        found = re.search(rf'xwait_webhook_actions_total\{{action="{action}",'
                          rf'definition="hooked",result="{result}"\}} ([0-9.]+)', text)
        return float(found.group(1)) if found else 0.0

    def count_retries(self, status: str) -> float:
        found = re.search(rf'xwait_webhook_retries_total\{{action="SEND_REQUEST",'
                          rf'status="{status}"\}} ([0-9.]+)', self.metrics() or "")
        return float(found.group(1)) if found else 0.0

    def stop(self) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        os.killpg(self.proc.pid, signal.SIGTERM)
        return self.proc.wait(30)


@pytest.fixture(scope="module")
def adapter(e2e: Settings, e2e_folder: Path, hooks: str) -> Iterator[Adapter]:
    a = Adapter(e2e, e2e_folder, hooks)
    yield a.start()
    a.stop()


def _status(worker: WorkerProcess, key: str) -> dict[str, Any]:
    """The wait's status; empty while its row is not stored yet (outputs go out first)."""
    try:
        with urllib.request.urlopen(  # noqa: S310 - loopback
                f"{worker.url}/xwait/api/waits/{key}", timeout=5) as resp:
            found: dict[str, Any] = json.loads(resp.read())
            return found
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return {"sends": []}
        raise


def _committed_to_the_end(e2e: Settings) -> bool:
    """Whether the adapter's group has committed every action written so far."""
    topic = e2e.topic("actions")
    consumer = Consumer(e2e.confluent(**{"group.id": f"{e2e.topic_prefix}-webhook",
                                         "enable.auto.commit": False}))
    try:
        parts = [TopicPartition(topic, p) for p in range(e2e.partitions)]
        committed = consumer.committed(parts, timeout=10)
        ends = [consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in parts]
        return all((c.offset if c.offset >= 0 else 0) == end
                   for c, end in zip(committed, ends, strict=True))
    finally:
        consumer.close()


def _sent(script: Script, key: str) -> list[Hit]:
    return [h for h in script.for_key(key) if h.path.startswith("/send/")]


def test_a_webhook_that_bounces_twice_then_fails_for_good_escalates_with_send_failed(
    e2e: Settings, worker: WorkerProcess, watcher: Watcher, script: Script, adapter: Adapter,
) -> None:
    script.answers["/send/"] = [503, 503, 404]
    with XwaitClient(e2e) as xw:
        key = xw.start_wait("hooked", payload={"to": "sam@example.com"})
    outcome = watcher.outcome(key, timeout=60)
    assert (outcome["outcome"], outcome["reason"]) == ("ESCALATED", "send_failed")
    assert outcome["sendError"] == "SEND_REQUEST: HTTP 404 Not Found: mailbox unavailable"
    sent = _sent(script, key)
    assert [h.status for h in sent] == [503, 503, 404]
    # The adapter POSTed send attempt 1 again itself; xwait then sent attempt 2.
    assert [h.path.rsplit("=", 1)[1] for h in sent] == ["1", "1", "2"]  # sendAttempt
    first, again, retried = (h.headers["X-Xwait-Action-Id"] for h in sent)
    assert first == again != retried
    # One key for every POST of the action: the first send attempt's id.
    assert {h.headers["Idempotency-Key"] for h in sent} == {first}
    assert all(h.body["idempotencyKey"] == first for h in sent)
    assert all(h.headers["X-Token"] == "t0ken" for h in sent)
    assert sent[0].body["payload"] == {"to": "sam@example.com"}
    until(lambda: [h for h in script.for_key(key) if h.path.startswith("/escalate/")],
          "the escalation's POST", 30)
    trace = [(t["event"], t["detail"]) for t in outcome["trace"]]
    assert [e for e, _ in trace].count("send_failed") == 2
    assert [e for e, _ in trace].count("send_retried") == 1
    assert any(e == "send_failed" and "HTTP 503 Service Unavailable" in d and "(2 POSTs)" in d
               for e, d in trace)
    until(lambda: adapter.count("SEND_REQUEST", "permanent") >= 1, "the metrics", 30)
    assert adapter.count("SEND_REQUEST", "failed") >= 1
    assert adapter.count_retries("503") >= 1


def test_a_delivered_send_and_a_timeout_are_reported_and_the_retry_is_delivered(
    e2e: Settings, worker: WorkerProcess, watcher: Watcher, script: Script, adapter: Adapter,
) -> None:
    # A timeout (the adapter waits 1 s) twice: the adapter's retry, then xwait's, taken.
    script.answers["/send/"] = [0, 0, 200]
    with XwaitClient(e2e) as xw:
        key = xw.start_wait("hooked")
        # The worker has decided the delivery (the reply below must come after it).
        until(lambda: [s["state"] for s in _status(worker, key)["sends"]] == ["delivered"],
              "the retry to be delivered", 60)
        xw.reply(key, {"decision": "approved"}, channel="portal")
    outcome = watcher.outcome(key, timeout=60)
    assert outcome["reason"] == "reply_valid"
    details = [(t["event"], t["detail"]) for t in outcome["trace"]]
    assert any(e == "send_failed" and "timed out" in d for e, d in details)
    assert ("send_delivered", "SEND_REQUEST, send attempt 2") in details
    # The receiver may have taken the ones it answered too late: all three are one key.
    sent = _sent(script, key)
    assert len(sent) == 3 and len({h.headers["Idempotency-Key"] for h in sent}) == 1


def test_a_429_asking_to_wait_is_posted_again_after_it_and_the_approval_is_received(
    e2e: Settings, worker: WorkerProcess, watcher: Watcher, script: Script, adapter: Adapter,
) -> None:
    # Issue 49: one 429 ended an approval send_failed in 3.9 s, without a retry.
    script.answers["/send/"] = [Answer(429, {"Retry-After": "2"}), 200]
    with XwaitClient(e2e) as xw:
        key = xw.start_wait("hooked", payload={"to": "sam@example.com"})
        until(lambda: [s["state"] for s in _status(worker, key)["sends"]] == ["delivered"],
              "the send to be delivered", 60)
        xw.reply(key, {"decision": "approved"}, channel="portal")
    outcome = watcher.outcome(key, timeout=60)
    assert (outcome["outcome"], outcome["reason"]) == ("RECEIVED", "reply_valid")
    details = [(t["event"], t["detail"]) for t in outcome["trace"]]
    assert ("send_delivered", "SEND_REQUEST, send attempt 1") in details
    assert not [e for e, _ in details if e in ("send_failed", "send_retried")]
    sent = _sent(script, key)
    assert [h.status for h in sent] == [429, 200]
    assert sent[1].at - sent[0].at >= 2 - 0.05  # the Retry-After, not the 1 s backoff
    for header in ("Idempotency-Key", "X-Xwait-Action-Id"):  # one action, POSTed twice
        assert sent[0].headers[header] == sent[1].headers[header]
    until(lambda: adapter.count_retries("429") >= 1, "the metrics", 30)


def test_a_restart_while_waiting_to_post_again_posts_the_same_action_with_the_same_key(
    e2e: Settings, worker: WorkerProcess, watcher: Watcher, script: Script, adapter: Adapter,
) -> None:
    script.answers["/send/"] = [Answer(429, {"Retry-After": "25"}), 200]
    with XwaitClient(e2e) as xw:
        key = xw.start_wait("hooked")
    until(lambda: bool(_sent(script, key)), "the first POST", 60)
    stopping = time.monotonic()
    assert adapter.stop() == 0
    assert time.monotonic() - stopping < 20  # SIGTERM cut the 25 s wait short
    adapter.start()
    until(lambda: len(_sent(script, key)) == 2, "the action POSTed again", 60)
    until(lambda: [s["state"] for s in _status(worker, key)["sends"]] == ["delivered"],
          "the send to be delivered", 60)
    # Nothing was reported for the POST cut short: no failure, no send retry.
    events = [t["event"] for t in _status(worker, key)["trace"]]
    assert "send_failed" not in events and "send_retried" not in events
    before, after = _sent(script, key)
    assert (before.status, after.status) == (429, 200)
    for header in ("Idempotency-Key", "X-Xwait-Action-Id"):  # the same action, send attempt 1
        assert before.headers[header] == after.headers[header]


def test_a_restarted_adapter_goes_on_where_it_committed(
    e2e: Settings, worker: WorkerProcess, watcher: Watcher, script: Script, adapter: Adapter,
) -> None:
    script.answers["/send/"] = [200]
    assert adapter.stop() == 0  # SIGTERM: the batch in hand is finished and committed
    before = len(script.hits)
    with XwaitClient(e2e) as xw:
        key = xw.start_wait("hooked")
    watcher.parked(key)
    adapter.start()
    until(lambda: bool(script.for_key(key)), "the new wait's POST", 60)
    until(lambda: _committed_to_the_end(e2e), "the adapter to commit every action", 60)
    assert len(script.hits) == before + 1  # nothing it had committed came again
    (hit,) = script.for_key(key)
    assert hit.status == 200
