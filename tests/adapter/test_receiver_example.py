"""The receiver example in the docs (docs/examples/webhook_receiver.py), run as a user
runs it: it does an action's work once however often the action is POSTed, because every
POST of one action carries the same Idempotency-Key."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager
from pathlib import Path

import pytest

from streams.adapter.sending import RetryPolicy, Sender
from streams.adapter.webhook import body_of
from streams.client import Action
from streams.client.records import ActionKind
from streams.testing.workers import free_port

pytestmark = [pytest.mark.rule12]

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "webhook_receiver.py"
BODY = body_of(Action(  # what the adapter POSTs
    action_id="a-2", correlation_key="k1", definition="expense-approval", tenant=None,
    action=ActionKind.SEND_REQUEST, party=None, level=0, attempt=1,
    payload={"to": "sam@example.com"}, at=5, send_attempt=2, idempotency_key="a-1"))


@contextmanager
def receiver(db: Path) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(EXAMPLE), "--port", str(port),  # noqa: S603
                             "--db", str(db)], stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, "the receiver exited"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the receiver never listened"
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/notify"
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def _post(sender: Sender, url: str, key: str, attempt: str) -> bool:
    return sender.post(url, BODY, {"Idempotency-Key": key, "X-Xwait-Action-Id": attempt}
                       ).delivered


TO = '{"to": "sam@example.com"}'


def _work(db: Path) -> list[tuple[str, str, str]]:
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute("select idempotency_key, action, payload from notifications "
                            "order by idempotency_key").fetchall()


def test_the_example_receiver_does_an_action_s_work_once_across_repeats_and_a_restart(
        tmp_path: Path) -> None:
    db = tmp_path / "receiver.sqlite"
    with Sender(5.0, RetryPolicy(retries=0)) as sender:
        with receiver(db) as url:
            # The adapter's retry, xwait's send retry: another attempt id, the same key.
            assert _post(sender, url, "key-1", "a-1") and _post(sender, url, "key-1", "a-2")
            # Eight at once (a timeout's retry racing the late original): still once.
            with ThreadPoolExecutor(8) as pool:
                assert all(pool.map(lambda _: _post(sender, url, "key-1", "a-3"), range(8)))
            assert _post(sender, url, "key-2", "b-1")  # another action: its own work
            assert _work(db) == [("key-1", "SEND_REQUEST", TO), ("key-2", "SEND_REQUEST", TO)]
        with receiver(db) as url:  # restarted: the keys it saw are kept
            assert _post(sender, url, "key-1", "a-1")
    assert _work(db) == [("key-1", "SEND_REQUEST", TO), ("key-2", "SEND_REQUEST", TO)]
