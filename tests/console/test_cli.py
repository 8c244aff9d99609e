"""`xwait status` and `xwait list` against the workers' API: output and exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid

import pytest

from tests.console.conftest import READ_TOKEN, Cluster, http, new_key
from tests.e2e.harness import XWAIT, free_port

pytestmark = pytest.mark.kafka


def xwait(*args: str, token: str | None = READ_TOKEN,
          env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI as an operator runs it, with the read token in XWAIT_CONSOLE_READ_TOKEN."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("XWAIT_CONSOLE")}
    if token is not None:
        environ["XWAIT_CONSOLE_READ_TOKEN"] = token
    return subprocess.run([str(XWAIT), *args], capture_output=True, text=True, timeout=120,
                          check=False, env={**environ, **(env or {})})


def test_status_prints_the_wait_as_json_and_as_text(cluster: Cluster) -> None:
    key = new_key()
    cluster.start(key, tenant="acme")
    cluster.wait_state(key, "parked")
    done = xwait("status", key, "--console", cluster.w2.url, "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert (data["key"], data["state"], data["tenant"]) == (key, "parked", "acme")
    text = xwait("status", key, "--console", cluster.w1.url)
    assert text.returncode == 0, text.stderr
    assert f"key         {key}" in text.stdout
    assert "state       parked" in text.stdout
    assert "deadline due" in text.stdout
    assert "trace" in text.stdout


def test_status_and_list_without_the_token_exit_1_with_the_reason(cluster: Cluster) -> None:
    done = xwait("status", new_key(), "--console", cluster.w1.url, token=None)
    assert done.returncode == 1
    # The setting a CLI user can act on, not only the HTTP header.
    assert "set XWAIT_CONSOLE_READ_TOKEN or XWAIT_CONSOLE_TOKEN" in done.stderr
    done = xwait("list", "--console", cluster.w1.url, token="wrong")  # noqa: S106
    assert done.returncode == 1
    assert "expected the worker's XWAIT_CONSOLE_READ_TOKEN or XWAIT_CONSOLE_TOKEN" in done.stderr


def test_status_of_a_finished_wait_shows_its_outcome_response_and_trace(
        cluster: Cluster) -> None:
    key = new_key()
    cluster.start(key, tenant="acme", payload='{"expense": 7}')
    cluster.wait_state(key, "parked")
    http("POST", f"{cluster.w1.url}/xwait/api/waits/{key}/deliver",
         {"responseData": {"decision": "approved"}, "reason": "by phone", "operator": "dora"})
    cluster.wait_state(key, "done")
    text = xwait("status", key, "--console", cluster.w2.url)
    assert text.returncode == 0, text.stderr
    out = text.stdout
    assert "outcome     RECEIVED (delivered)" in out
    assert "by          dora: by phone" in out
    assert 'response    {"decision":"approved"}' in out
    assert 'payload     {"expense": 7}' in out
    assert "purged at" in out and "reply_valid" in out and "ended" in out
    listed = xwait("list", "--state", "done", "--key", key, "--console", cluster.w1.url)
    assert listed.returncode == 0, listed.stderr
    assert "ended " in listed.stdout and "RECEIVED (delivered)" in listed.stdout
    by_outcome = xwait("list", "--outcome", "RECEIVED", "--key", key, "--json",
                       "--console", cluster.w1.url)
    assert [w["key"] for w in json.loads(by_outcome.stdout)["waits"]] == [key]


def test_reschedule_refuses_bad_arguments_before_producing_anything() -> None:
    for args, needle in ((("k",), "one of the arguments --deadline --by is required"),
                         (("k", "--deadline", "PT1H", "--by", "PT1H"), "not allowed with"),
                         (("k", "--deadline", "soon"), "deadline"),
                         (("k", "--by=-P1M"), "calendar")):
        done = xwait("reschedule", *args, "--bootstrap", "127.0.0.1:1")
        assert done.returncode == 2, (args, done.stderr)
        assert needle in done.stderr, (args, done.stderr)


def test_status_of_an_unknown_key_exits_4_no_such_wait(cluster: Cluster) -> None:
    done = xwait("status", "nope-" + new_key(), "--console", cluster.w1.url)
    assert done.returncode == 4
    assert "no wait" in done.stderr


def test_list_filters_and_orders(cluster: Cluster) -> None:
    tenant = f"cli-{uuid.uuid4().hex[:8]}"
    late, early = new_key(), new_key()
    cluster.start(late, tenant=tenant, deadline="PT40M")
    cluster.start(early, tenant=tenant, deadline="PT20M")
    cluster.wait_state(late, "parked")
    cluster.wait_state(early, "parked")
    done = xwait("list", "--tenant", tenant, "--console", cluster.w1.url, "--json")
    assert done.returncode == 0, done.stderr
    assert [w["key"] for w in json.loads(done.stdout)["waits"]] == [early, late]
    text = xwait("list", "--tenant", tenant, "--state", "parked", "--limit", "1",
                 "--console", cluster.w2.url)
    assert text.returncode == 0, text.stderr
    assert early in text.stdout and late not in text.stdout
    assert text.stdout.splitlines()[0].split() == ["KEY", "STATE", "DEFINITION", "TENANT",
                                                   "NEXT", "DUE", "/", "ENDED"]


def test_no_worker_answering_exits_3() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    for args in (("status", "k"), ("list",)):
        done = xwait(*args, "--console", url)
        assert done.returncode == 3
        assert "no xwait worker answered" in done.stderr


def test_bad_usage_exits_2() -> None:
    assert xwait("list", "--state", "sleeping").returncode == 2
    assert xwait("status").returncode == 2


def test_status_of_an_escalated_one_stage_wait_says_whom_it_went_to(cluster: Cluster) -> None:
    """fast-approval has one stage: 7 s, then the director 3 s.  Stamped 8.5 s ago, its
    first deadline has passed when it parks; the SUSPEND right behind it holds it at the
    director, so the status can be read at leisure."""
    key = new_key()
    cluster.client.start(key, "fast-approval", requestedAt=int(time.time() * 1000) - 8500)
    cluster.client.command(key, "SUSPEND", reason="read the status", operator="olga")
    cluster.client.flush()
    w = cluster.wait_state(key, "suspended")
    assert w["escalationLevel"] == 1
    assert w["stage"]["text"] == "escalated to director"
    text = xwait("status", key, "--console", cluster.w2.url)
    assert text.returncode == 0, text.stderr
    assert "stage       escalated to director\n" in text.stdout, text.stdout
