"""The JSON API against two real workers: status, list, routing, bad requests."""

from __future__ import annotations

import uuid

import pytest

from streams.partitioning import partition_for
from tests.console.conftest import Cluster, eventually, http, new_key

pytestmark = pytest.mark.kafka


def test_status_of_a_parked_wait_shows_state_timers_and_trace(cluster: Cluster) -> None:
    key = new_key()
    cluster.start(key, tenant="acme", payload='{"amount": 120}')
    w = cluster.wait_state(key, "parked")
    assert w["key"] == key
    assert w["definition"] == "slow-approval"
    assert w["tenant"] == "acme"
    assert [t["kind"] for t in w["timers"]] == ["deadline"]
    assert w["timers"][0]["dueAt"] > w["parkedAt"]
    assert w["nextDueAt"] == w["timers"][0]["dueAt"]
    assert w["suspension"] is None
    assert w["trace"] and w["trace"][0]["event"]
    assert w["outcome"] is None


def test_unknown_key_answers_404_from_any_worker(cluster: Cluster) -> None:
    for w in cluster.workers:
        status, body = cluster.status("no-such-" + new_key(), via=w)
        assert status == 404
        assert "no wait" in body["error"]


def test_a_key_owned_by_the_other_worker_is_answered_by_its_owner(cluster: Cluster) -> None:
    keys = [new_key() for _ in range(12)]
    for key in keys:
        cluster.client.start(key, "slow-approval")
    cluster.client.flush()
    for key in keys:
        cluster.wait_state(key, "parked")
    owners = {key: cluster.owner(key) for key in keys}
    assert {w.name for w in owners.values()} == {"w1", "w2"}  # 12 keys hit both halves
    for key, owner in owners.items():
        other = cluster.w2 if owner is cluster.w1 else cluster.w1
        status, body = cluster.status(key, via=other)
        assert status == 200
        assert body["key"] == key
        assert body["worker"] == owner.url
        assert body["partition"] == partition_for(key.encode(), cluster.settings.partitions)


def test_list_merges_both_workers_ordered_by_next_due(cluster: Cluster) -> None:
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    deadlines = {"PT50M": new_key(), "PT10M": new_key(), "PT30M": new_key(),
                 "PT20M": new_key(), "PT40M": new_key(), "PT15M": new_key()}
    for deadline, key in deadlines.items():
        cluster.client.start(key, "slow-approval", tenant=tenant, deadline=deadline)
    cluster.client.flush()
    expected = [deadlines[d] for d in sorted(deadlines, key=lambda d: int(d[2:-1]))]
    status, body = eventually(
        lambda: http("GET", f"{cluster.w2.url}/xwait/api/waits?tenant={tenant}"),
        lambda r: r[0] == 200 and len(r[1]["waits"]) == 6, 60, "six listed waits")
    assert [w["key"] for w in body["waits"]] == expected
    assert body["complete"] is True
    assert len(body["workers"]) == 2
    due = [w["nextDueAt"] for w in body["waits"]]
    assert due == sorted(due)

    _, limited = http("GET", f"{cluster.w1.url}/xwait/api/waits?tenant={tenant}&limit=2")
    assert [w["key"] for w in limited["waits"]] == expected[:2]
    _, other_def = http("GET", f"{cluster.w1.url}/xwait/api/waits?tenant={tenant}"
                               "&definition=fast-approval")
    assert other_def["waits"] == []
    _, by_def = http("GET", f"{cluster.w1.url}/xwait/api/waits?tenant={tenant}"
                            "&definition=slow-approval&state=parked")
    assert [w["key"] for w in by_def["waits"]] == expected


@pytest.mark.parametrize("query", ["state=sleeping", "limit=0", "limit=many", "limit=100000"])
def test_bad_list_parameters_answer_400(cluster: Cluster, query: str) -> None:
    status, body = http("GET", f"{cluster.w1.url}/xwait/api/waits?{query}")
    assert status == 400
    assert body["error"]
