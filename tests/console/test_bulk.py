"""The console's bulk action against two real workers: a dry run's count, an operation run
from one worker over both workers' waits, its progress, access, and the list filters it
selects with (version, next due time)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from streams.core.operations import carries
from tests.console.conftest import READ_TOKEN, Cluster, eventually, http, new_key

pytestmark = pytest.mark.kafka


def _park(cluster: Cluster, count: int, **fields: Any) -> list[str]:
    keys = [new_key() for _ in range(count)]
    for key in keys:
        cluster.client.start(key, "slow-approval", **fields)
    cluster.client.flush()
    for key in keys:
        cluster.wait_state(key, "parked")
    return keys


def test_a_dry_run_counts_the_waits_of_every_worker_and_sends_nothing(cluster: Cluster) -> None:
    tenant = f"bd-{uuid.uuid4().hex[:8]}"
    keys = _park(cluster, 8, tenant=tenant)
    assert {cluster.owner(k).name for k in keys} == {"w1", "w2"}, "8 keys hit both workers"
    status, body = http("POST", f"{cluster.w1.url}/xwait/api/bulk",
                        {"command": "cancel", "where": f"tenant={tenant}", "reason": "r",
                         "operator": "ann", "dryRun": True})
    assert status == 200, body
    assert body["count"] == 8
    assert {w["key"] for w in body["sample"]} <= set(keys) and len(body["sample"]) == 8
    assert all(cluster.status(k)[1]["state"] == "parked" for k in keys)


def test_an_operation_started_on_one_worker_commands_the_waits_of_both(
        cluster: Cluster) -> None:
    tenant = f"bo-{uuid.uuid4().hex[:8]}"
    keys = _park(cluster, 6, tenant=tenant)
    status, job = http("POST", f"{cluster.w2.url}/xwait/api/bulk",
                       {"command": "suspend", "where": f"tenant={tenant},state=parked",
                        "reason": "audit", "operator": "ann", "rate": 20})
    assert status == 202, job
    assert job["total"] == 6 and job["operation"].startswith("suspend-")
    done = eventually(
        lambda: http("GET", f"{cluster.w2.url}/xwait/api/bulk/{job['operation']}"),
        lambda r: r[0] == 200 and r[1]["finished"], 90, "the operation to finish")[1]
    assert done["summary"]["applied"] == 6 and done["summary"]["complete"], done
    for key in keys:
        wait = cluster.status(key)[1]
        assert wait["state"] == "suspended"
        assert [e["detail"] for e in wait["trace"]
                if carries((e["detail"],), job["operation"])] == [
            f"audit (by ann, operation {job['operation']})"]
    # The other worker does not run it; the read token may follow it, not start one.
    assert http("GET", f"{cluster.w1.url}/xwait/api/bulk/{job['operation']}")[0] == 404
    assert http("GET", f"{cluster.w2.url}/xwait/api/bulk/{job['operation']}",
                token=READ_TOKEN)[0] == 200
    assert http("POST", f"{cluster.w2.url}/xwait/api/bulk",
                {"command": "resume", "where": f"tenant={tenant}", "operator": "ann"},
                token=READ_TOKEN)[0] == 401


@pytest.mark.parametrize(("body", "says"), [
    ({"command": "explode", "where": "tenant=a", "operator": "ann"}, "'command' must be"),
    ({"command": "cancel", "where": "tenant=a", "reason": "r"}, "needs 'operator'"),
    ({"command": "cancel", "where": "owner=a", "reason": "r", "operator": "ann"},
     "unknown field 'owner'"),
    ({"command": "cancel", "where": "tenant=a", "operator": "ann"}, "cancel needs a reason"),
    ({"command": "resume", "where": "tenant=a", "operator": "ann", "rate": "fast"},
     "'rate' must be"),
])
def test_a_bulk_action_it_cannot_run_answers_400(cluster: Cluster, body: dict[str, Any],
                                                 says: str) -> None:
    status, answer = http("POST", f"{cluster.w1.url}/xwait/api/bulk", body)
    assert status == 400, answer
    assert says in answer["error"]


def test_the_list_selects_by_version_and_by_next_due_time(cluster: Cluster) -> None:
    tenant = f"bl-{uuid.uuid4().hex[:8]}"
    soon, later = new_key(), new_key()
    cluster.client.start(soon, "slow-approval", tenant=tenant, deadline="PT10M")
    cluster.client.start(later, "slow-approval", tenant=tenant, deadline="PT50M")
    cluster.client.flush()
    version = cluster.wait_state(soon, "parked")["definitionVersion"]
    cluster.wait_state(later, "parked")
    now = int(time.time() * 1000)
    base = f"{cluster.w1.url}/xwait/api/waits?tenant={tenant}"

    def listed(query: str) -> list[str]:
        status, body = http("GET", base + query)
        assert status == 200, body
        return [w["key"] for w in body["waits"]]

    assert listed(f"&dueTo={now + 30 * 60_000}") == [soon]
    assert listed(f"&dueFrom={now + 30 * 60_000}") == [later]
    assert listed(f"&version={version}") == [soon, later]
    assert listed("&version=not-a-version") == []
    assert http("GET", base + "&dueFrom=soon")[0] == 400
    assert http("GET", base + "&state=done&dueTo=1")[0] == 400
