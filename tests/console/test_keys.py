"""Every key the input takes is served over HTTP, up to the longest (MAX_KEY_BYTES), and a
longer one is refused at every door: the input (invalid_key), the SDK, the CLI, the API."""

from __future__ import annotations

import json
import urllib.parse
import uuid
from pathlib import Path

import pytest

from streams.client import InvalidRequest, XwaitClient
from streams.core.keys import MAX_KEY_BYTES
from tests.console.conftest import Cluster, eventually, http
from tests.console.test_cli import xwait
from tests.e2e.harness import Watcher

pytestmark = pytest.mark.kafka

FILLER = "é/ %?#&=+."
"""Characters a URL must percent-encode (é: two bytes, each %XX): the longest path a key
of MAX_KEY_BYTES bytes can make."""


def worst_key(size: int = MAX_KEY_BYTES) -> str:
    """A key of exactly `size` UTF-8 bytes, nearly every byte percent-encoded in a URL."""
    key = uuid.uuid4().hex[:8]
    i = 0
    while len(key.encode()) + len(FILLER[i % len(FILLER)].encode()) <= size:
        key += FILLER[i % len(FILLER)]
        i += 1
    return key + "/" * (size - len(key.encode()))


def _q(key: str) -> str:
    return urllib.parse.quote(key, safe="")


def _log_size(cluster: Cluster) -> dict[Path, int]:
    return {w.log_path: w.log_path.stat().st_size for w in cluster.workers}


def _new_log(sizes: dict[Path, int]) -> str:
    text = ""
    for path, size in sizes.items():
        with open(path, "rb") as f:
            f.seek(size)
            text += f.read().decode(errors="replace")
    return text


def test_a_key_of_the_longest_length_is_read_listed_and_commanded_over_http(
        cluster: Cluster) -> None:
    key = worst_key()
    assert len(key.encode()) == MAX_KEY_BYTES and "/" in key
    logs = _log_size(cluster)
    cluster.start(key, tenant="acme")
    for worker in cluster.workers:  # one answers from its table, the other forwards
        _, body = eventually(
            lambda w=worker: http("GET", f"{w.url}/xwait/api/waits/{_q(key)}"),
            lambda r: r[0] == 200 and r[1]["state"] == "parked", 60, "the wait parked")
        assert body["key"] == key
    status, answer = http("POST", f"{cluster.w2.url}/xwait/api/waits/{_q(key)}/suspend",
                          {"reason": "long keys too", "operator": "olga"})
    assert status == 202, answer
    eventually(lambda: http("GET", f"{cluster.w1.url}/xwait/api/waits/{_q(key)}"),
               lambda r: r[0] == 200 and r[1]["state"] == "suspended", 60, "suspended")

    # A list can carry the key twice (the filter and the cursor): the longest request line.
    status, page = http("GET", f"{cluster.w1.url}/xwait/api/waits?key={_q(key)}&limit=1")
    assert status == 200 and [w["key"] for w in page["waits"]] == [key]
    status, rest = http("GET", f"{cluster.w1.url}/xwait/api/waits?key={_q(key)}&limit=1"
                               f"&after={_q(page['next'])}")
    assert status == 200 and rest["waits"] == []

    shown = xwait("status", key, "--console", cluster.w2.url, "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["key"] == key
    new = _new_log(logs)
    assert "Traceback" not in new and "Got more than" not in new, new[-2000:]


def test_a_key_one_byte_longer_is_refused_everywhere_naming_its_length(
        cluster: Cluster) -> None:
    key = worst_key(MAX_KEY_BYTES + 1)
    too_long = f"at most {MAX_KEY_BYTES} bytes"
    # The SDK and the CLI: before anything is sent, or any worker asked.
    with XwaitClient(cluster.settings) as xw, pytest.raises(InvalidRequest, match=too_long):
        xw.start_wait("slow-approval", correlation_key=key)
    done = xwait("status", key, "--console", cluster.w1.url)
    assert done.returncode == 2 and too_long in done.stderr, done.stderr
    # The API: a clean 400, for a read and for a command.
    status, body = http("GET", f"{cluster.w1.url}/xwait/api/waits/{_q(key)}")
    assert status == 400 and too_long in body["error"]
    status, body = http("POST", f"{cluster.w1.url}/xwait/api/waits/{_q(key)}/cancel",
                        {"reason": "x", "operator": "o"})
    assert status == 400 and too_long in body["error"]
    # The input: whatever wrote it past the SDK, the request is rejected invalid_key.
    watcher = Watcher(cluster.settings)
    try:
        cluster.start(key)
        seen = watcher.until(lambda s: bool(s.for_key("rejected", key)), 60, "the rejection")
        [rejected] = seen.for_key("rejected", key)
    finally:
        watcher.close()
    assert rejected["reason"] == "invalid_key"
    assert f"has {MAX_KEY_BYTES + 1} bytes" in rejected["detail"]
