"""Reads behind auth, probed from outside as an attacker who reaches the port would."""

from __future__ import annotations

import socket
import time
from urllib.parse import urlsplit

import pytest

from tests.console.conftest import READ_TOKEN, TOKEN, Cluster, http, http_full, new_key

pytestmark = pytest.mark.kafka


@pytest.mark.parametrize("path", ["/xwait/api/waits?limit=1000", "/xwait/api/review",
                                  "/xwait/api/waits/{key}"])
def test_reads_without_the_token_answer_401_and_reveal_nothing(cluster: Cluster,
                                                               path: str) -> None:
    key = new_key()
    cluster.start(key, tenant="secret-tenant", payload='{"card": "4111"}')
    cluster.wait_state(key, "parked")
    url = cluster.w1.url + path.format(key=key)
    for token in (None, "wrong"):
        status, headers, body = http_full("GET", url, token=token)
        assert status == 401
        assert headers["WWW-Authenticate"] == "Bearer"
        assert key not in str(body) and "secret-tenant" not in str(body)
    status, body = http("GET", url, token=READ_TOKEN)
    assert status == 200


def test_the_read_token_reads_but_cannot_command(cluster: Cluster) -> None:
    key = new_key()
    cluster.start(key)
    assert cluster.wait_state(key, "parked")["key"] == key
    status, body = http("POST", f"{cluster.w1.url}/xwait/api/waits/{key}/cancel",
                        {"reason": "x", "operator": "mallory"}, token=READ_TOKEN)
    assert status == 401
    assert "command" in body["error"] and "XWAIT_CONSOLE_TOKEN" in body["error"]
    assert cluster.status(key)[1]["state"] == "parked"


def test_faust_table_views_are_off(cluster: Cluster) -> None:
    key = new_key()
    cluster.start(key)
    cluster.wait_state(key, "parked")
    for w in cluster.workers:
        for path in (f"/table/waits/{key}/", "/table/", "/table/waits/"):
            status, _, body = http_full("GET", w.url + path, token=None)
            assert status == 404, path
            assert key not in str(body)


@pytest.mark.parametrize("path", ["/xwait/console", "/xwait/api/waits", "/metrics",
                                  "/xwait/api/waits/nope", "/no/such/page"])
def test_every_response_carries_a_content_security_policy_and_no_framing(
        cluster: Cluster, path: str) -> None:
    _, headers, _ = http_full("GET", cluster.w1.url + path, token=None)
    assert headers["X-Frame-Options"] == "DENY"
    csp = headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    if path == "/xwait/console":
        assert "script-src 'sha256-" in csp
    else:
        assert csp.startswith("default-src 'none'")


@pytest.mark.parametrize("quoted", ["a%00b"])
def test_keys_with_a_nul_are_refused_400(cluster: Cluster, quoted: str) -> None:
    status, body = http("GET", f"{cluster.w1.url}/xwait/api/waits/{quoted}")
    assert status == 400
    assert "NUL" in body["error"]
    status, body = http("POST", f"{cluster.w1.url}/xwait/api/waits/{quoted}/cancel",
                        {"reason": "x", "operator": "o"})
    assert status == 400
    status, _ = http("GET", f"{cluster.w1.url}/xwait/api/waits?key={quoted}")
    assert status == 400


@pytest.mark.parametrize("quoted", ["a%2Fb", "..%2F..%2Ftable"])
def test_a_key_with_a_slash_is_a_key_like_any_other(cluster: Cluster, quoted: str) -> None:
    """The input takes keys with '/', so the API serves them (as %2F): never a path."""
    status, body = http("GET", f"{cluster.w1.url}/xwait/api/waits/{quoted}")
    assert status == 404, body  # no wait has it
    assert "'" + quoted.replace("%2F", "/") + "'" in body["error"]
    status, _ = http("GET", f"{cluster.w1.url}/xwait/api/waits?key={quoted}")
    assert status == 200


def test_a_command_is_refused_before_its_body_is_read(cluster: Cluster) -> None:
    """Headers promise 50 MB that never come: the 401 must not wait for them."""
    url = urlsplit(cluster.w1.url)
    with socket.create_connection((url.hostname, url.port), timeout=10) as sock:
        sock.sendall(b"POST /xwait/api/waits/" + new_key().encode() + b"/cancel HTTP/1.1\r\n"
                     b"Host: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 50000000\r\n\r\n{")
        started = time.monotonic()
        answer = sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
    assert time.monotonic() - started < 5


def test_with_the_command_token_reads_and_commands_work(cluster: Cluster) -> None:
    key = new_key()
    cluster.start(key)
    cluster.wait_state(key, "parked")
    status, _ = http("POST", f"{cluster.w1.url}/xwait/api/waits/{key}/suspend",
                     {"reason": "audit", "operator": "ann"}, token=TOKEN)
    assert status == 202
    assert cluster.wait_state(key, "suspended")["suspension"]["operator"] == "ann"
