"""The JSON API against two real workers: status, list, routing, bad requests."""

from __future__ import annotations

import time
import urllib.parse
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


def test_finished_waits_are_listed_with_their_outcome_and_searched_by_outcome(
        cluster: Cluster) -> None:
    tenant = f"h-{uuid.uuid4().hex[:8]}"
    parked, cancelled, delivered = new_key(), new_key(), new_key()
    for key in (parked, cancelled, delivered):
        cluster.start(key, tenant=tenant)
    for key in (parked, cancelled, delivered):
        cluster.wait_state(key, "parked")
    http("POST", f"{cluster.w2.url}/xwait/api/waits/{cancelled}/cancel",
         {"reason": "duplicate", "operator": "carl"})
    http("POST", f"{cluster.w2.url}/xwait/api/waits/{delivered}/deliver",
         {"responseData": {"decision": "approved"}, "operator": "dora"})
    cluster.wait_state(cancelled, "done")
    cluster.wait_state(delivered, "done")

    _, done = http("GET", f"{cluster.w1.url}/xwait/api/waits?tenant={tenant}&state=done")
    by_key = {w["key"]: w for w in done["waits"]}
    assert set(by_key) == {cancelled, delivered}
    assert (by_key[cancelled]["outcome"], by_key[cancelled]["reason"]) == (
        "CANCELLED", "cancelled_by_operator")
    assert by_key[delivered]["nextDueAt"] is None
    assert by_key[delivered]["purgeAt"] > by_key[delivered]["endedAt"]
    _, only = http("GET", f"{cluster.w1.url}/xwait/api/waits?tenant={tenant}&outcome=CANCELLED")
    assert [w["key"] for w in only["waits"]] == [cancelled]
    _, every = http("GET", f"{cluster.w1.url}/xwait/api/waits?tenant={tenant}&state=all")
    assert {w["key"] for w in every["waits"]} == {parked, cancelled, delivered}
    _, open_ = http("GET", f"{cluster.w1.url}/xwait/api/waits?tenant={tenant}")
    assert [w["key"] for w in open_["waits"]] == [parked]


def test_search_by_key_prefix_and_park_time_in_pages_that_skip_and_repeat_nothing(
        cluster: Cluster) -> None:
    prefix = f"p{uuid.uuid4().hex[:8]}-"
    keys = [prefix + new_key() for _ in range(5)]
    for i, key in enumerate(keys):
        cluster.client.start(key, "slow-approval", deadline=f"PT{10 + i}M")
    cluster.client.flush()
    for key in keys:
        cluster.wait_state(key, "parked")
    seen: list[str] = []
    after = ""
    for _ in range(5):
        status, page = http("GET", f"{cluster.w1.url}/xwait/api/waits?key={prefix}&limit=2"
                                   + (f"&after={urllib.parse.quote(after)}" if after else ""))
        assert status == 200
        seen += [w["key"] for w in page["waits"]]
        if not page["next"]:
            break
        after = page["next"]
    assert seen == keys  # ordered by deadline, 10 to 14 minutes
    now = int(time.time() * 1000)
    _, later = http("GET", f"{cluster.w1.url}/xwait/api/waits?key={prefix}&parkedFrom={now}")
    assert later["waits"] == []
    _, before = http("GET", f"{cluster.w1.url}/xwait/api/waits?key={prefix}"
                            f"&parkedFrom={now - 600_000}&parkedTo={now}")
    assert [w["key"] for w in before["waits"]] == keys


def test_a_chained_wait_shows_its_current_stage_and_party(cluster: Cluster) -> None:
    key = new_key()
    cluster.start(key, "fast-two-stage")
    w = cluster.wait_state(key, "parked")
    assert w["stage"] == {"index": 0, "count": 2, "name": "manager", "party": "manager",
                          "escalatedTo": None, "variant": "chained",
                          "text": "1 of 2: manager (party manager)"}
    cluster.client.reply(key, {"decision": "approved"})
    cluster.client.flush()
    eventually(lambda: cluster.status(key), lambda r: r[1]["stage"]["index"] == 1, 60,
               "the finance stage")
    _, listed = http("GET", f"{cluster.w1.url}/xwait/api/waits?key={key}")
    assert listed["waits"][0]["stage"]["name"] == "finance"


@pytest.mark.parametrize("query", ["outcome=MAYBE", "after=garbage", "parkedFrom=yesterday",
                                   "state=parked&outcome=CANCELLED"])
def test_bad_search_parameters_answer_400(cluster: Cluster, query: str) -> None:
    status, body = http("GET", f"{cluster.w1.url}/xwait/api/waits?{query}")
    assert status == 400
    assert body["error"]
