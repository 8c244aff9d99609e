"""Rule 11 end to end: the SDK, the CLI and the API move a live deadline on the real broker;
refusals come back as Rejected records with their reason; the operator's words reach the
Outcome record."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from streams.client import XwaitClient
from tests.console.conftest import Cluster, eventually, http, needs_processor_mapping, new_key
from tests.e2e.harness import XWAIT, Watcher, settings_env

pytestmark = [pytest.mark.kafka, needs_processor_mapping, pytest.mark.rule11]

HOUR = 3_600_000
MINUTE = 60_000


@pytest.fixture(scope="module")
def watcher(cluster: Cluster) -> Iterator[Watcher]:
    w = Watcher(cluster.settings)
    try:
        yield w
    finally:
        w.close()


def deadline_of(w: dict[str, Any]) -> int:
    (due,) = [t["dueAt"] for t in w["timers"] if t["kind"] == "deadline"]
    return int(due)


def rescheduled(cluster: Cluster, key: str, count: int = 1) -> dict[str, Any]:
    _, w = eventually(lambda: cluster.status(key),
                      lambda r: r[0] == 200 and sum(e["event"] == "rescheduled"
                                                    for e in r[1]["trace"]) >= count,
                      60, f"{key} rescheduled {count} time(s)")
    result: dict[str, Any] = w
    return result


def test_the_sdk_sets_a_new_deadline_from_now(cluster: Cluster) -> None:
    key = new_key()
    cluster.start(key)  # slow-approval: PT1H
    cluster.wait_state(key, "parked")
    sent = int(time.time() * 1000)
    with XwaitClient(cluster.settings) as xw:
        xw.reschedule(key, deadline="PT2H", reason="vendor asked", operator="sam")
    w = rescheduled(cluster, key)
    assert sent + 2 * HOUR - 5000 <= deadline_of(w) <= int(time.time() * 1000) + 2 * HOUR
    entry = w["trace"][-1]
    assert "vendor asked" in entry["detail"] and "by sam" in entry["detail"]


def test_the_cli_moves_the_deadline_by_a_shift(cluster: Cluster) -> None:
    key = new_key()
    cluster.start(key)
    before = deadline_of(cluster.wait_state(key, "parked"))
    env = {**os.environ, **settings_env(cluster.settings)}
    done = subprocess.run([str(XWAIT), "reschedule", key, "--by", "PT30M", "--reason",
                           "holiday", "--operator", "olga"], env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "reschedule sent" in done.stdout
    assert deadline_of(rescheduled(cluster, key)) == before + 30 * MINUTE
    earlier = subprocess.run([str(XWAIT), "reschedule", key, "--by=-PT45M"], env=env,
                             capture_output=True, text=True, timeout=60, check=False)
    assert earlier.returncode == 0, earlier.stderr
    assert deadline_of(rescheduled(cluster, key, 2)) == before - 15 * MINUTE


def test_the_api_reschedules_a_suspended_waits_time_left(cluster: Cluster) -> None:
    key = new_key()
    cluster.start(key)
    cluster.wait_state(key, "parked")
    url = f"{cluster.w2.url}/xwait/api/waits/{key}"
    http("POST", f"{url}/suspend", {"reason": "audit", "operator": "ann"})
    cluster.wait_state(key, "suspended")
    status, body = http("POST", f"{url}/reschedule", {"deadline": "PT5H", "operator": "ann",
                                                      "reason": "audit runs long"})
    assert status == 202
    assert body["command"]["deadline"] == "PT5H"
    w = rescheduled(cluster, key)
    assert w["state"] == "suspended"
    assert w["suspension"]["remaining"] == [{"kind": "deadline", "ms": 5 * HOUR}]


def test_refusals_are_rejected_records_with_their_reason(cluster: Cluster,
                                                         watcher: Watcher) -> None:
    done_key, past_key = new_key(), new_key()
    cluster.start(done_key)
    cluster.start(past_key)
    cluster.wait_state(past_key, "parked")
    cluster.wait_state(done_key, "parked")
    http("POST", f"{cluster.w1.url}/xwait/api/waits/{done_key}/cancel",
         {"reason": "gone", "operator": "o"})
    cluster.wait_state(done_key, "done")
    for key, body in ((done_key, {"deadline": "PT1H"}), (past_key, {"moveBy": "-PT2H"})):
        status, _ = http("POST", f"{cluster.w1.url}/xwait/api/waits/{key}/reschedule",
                         {**body, "operator": "o"})
        assert status == 202
    seen = watcher.until(lambda s: bool(s.for_key("rejected", done_key))
                         and bool(s.for_key("rejected", past_key)), 60, "two refusals")
    assert [r["reason"] for r in seen.for_key("rejected", done_key)] == ["late"]
    (past,) = seen.for_key("rejected", past_key)
    assert past["reason"] == "deadline_passed"
    assert past["detail"].startswith("Expected a new deadline after")
    assert cluster.status(past_key)[1]["state"] == "parked"


def test_the_outcome_record_names_the_operator_and_their_reason(cluster: Cluster,
                                                                 watcher: Watcher) -> None:
    key = new_key()
    cluster.start(key)
    cluster.wait_state(key, "parked")
    http("POST", f"{cluster.w1.url}/xwait/api/waits/{key}/cancel",
         {"reason": "duplicate expense", "operator": "carl"})
    outcome = watcher.outcome(key, timeout=60)
    assert (outcome["outcome"], outcome["reason"]) == ("CANCELLED", "cancelled_by_operator")
    assert (outcome["operator"], outcome["operatorReason"]) == ("carl", "duplicate expense")
