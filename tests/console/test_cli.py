"""`xwait status` and `xwait list` against the workers' API: output and exit codes."""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest

from tests.console.conftest import Cluster, new_key
from tests.e2e.harness import XWAIT, free_port

pytestmark = pytest.mark.kafka


def xwait(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(XWAIT), *args], capture_output=True, text=True, timeout=120,
                          check=False)


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
                                                   "NEXT", "DUE"]


def test_no_worker_answering_exits_3() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    for args in (("status", "k"), ("list",)):
        done = xwait(*args, "--console", url)
        assert done.returncode == 3
        assert "no xwait worker answered" in done.stderr


def test_bad_usage_exits_2() -> None:
    assert xwait("list", "--state", "sleeping").returncode == 2
    assert xwait("status").returncode == 2
