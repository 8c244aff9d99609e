"""A real local HTTP server that answers webhooks as told: to test what an adapter does
when the receiving end fails on purpose."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Answer:
    """A status with headers (``Retry-After``); a status of 0 answers nothing for the
    script's ``hang_s`` seconds (a timeout)."""

    status: int
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass
class Hit:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    status: int
    at: float = 0.0
    """When it came (time.monotonic())."""


@dataclass
class Script:
    """What the server answers: per path prefix, a list of answers (a status, or an
    `Answer`) used in turn (the last one repeats)."""

    answers: dict[str, list[int | Answer]] = field(default_factory=dict)
    hang_s: float = 3.0
    hits: list[Hit] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_answer(self, path: str) -> Answer:
        with self.lock:
            prefix = max((p for p in self.answers if path.startswith(p)), key=len, default=None)
            if prefix is None:
                return Answer(200)
            answers = self.answers[prefix]
            given = answers.pop(0) if len(answers) > 1 else answers[0]
            return given if isinstance(given, Answer) else Answer(given)

    def for_key(self, key: str) -> list[Hit]:
        with self.lock:
            return [h for h in self.hits if h.body.get("correlationKey", "").split("~")[0] == key]


@contextmanager
def webhook_server(script: Script) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as a real receiver

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            answer = script.next_answer(self.path)
            with script.lock:
                script.hits.append(Hit(self.path, dict(self.headers.items()), body,
                                       answer.status, time.monotonic()))
            status = answer.status
            if status == 0:
                time.sleep(script.hang_s)
                status = 200  # too late: the adapter gave up already
            text = b"mailbox unavailable" if status >= 400 else b"ok"
            self.send_response(status)
            for name, value in answer.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    # A short poll: shutdown() waits for it (the default half second, per test).
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
