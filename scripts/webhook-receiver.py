#!/usr/bin/env python3
"""A webhook receiver to try `xwait adapter webhook` with: it prints what it is sent and
answers with the statuses it is told, in turn (the last one repeats).

    scripts/webhook-receiver.py --port 8080 --answers 503,503,404

Standard library only; not for production (it accepts anything on any path).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def handler(answers: list[int]) -> type[BaseHTTPRequestHandler]:
    """Answers each POST with the next of `answers` (the last one repeats), printing it."""
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            with lock:
                status = answers.pop(0) if len(answers) > 1 else answers[0]
            print(f"{status}  {body.get('action')} sendAttempt={body.get('sendAttempt')} "
                  f"key={body.get('correlationKey')} {self.path}", flush=True)
            text = b"ok" if status < 400 else b"mailbox unavailable"
            self.send_response(status)
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--answers", default="200",
                        help="HTTP statuses to answer with, in turn, comma-separated; the last "
                             "one repeats (default 200)")
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port),
                                 handler([int(a) for a in args.answers.split(",")]))
    print(f"listening on http://127.0.0.1:{args.port}, answering {args.answers}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C stops it
        server.serve_forever()


if __name__ == "__main__":
    main()
