#!/usr/bin/env python3
"""A webhook receiver for `xwait adapter webhook` that does each action's work once.

The adapter delivers at least once: an action is POSTed again when its answer
did not come back in time (the work may have been done), when xwait sends it
again after a reported failure (`sendAttempt` 2, 3, ...), and when the adapter
restarts before committing.  Every POST of one action carries the same
`Idempotency-Key` header (the action's `idempotencyKey`); `X-Xwait-Action-Id`
names the send attempt.  So the receiver records the key in the same
transaction as the work, and a key it has seen is a repeat: answered 200
again (anything but a 2xx would make the adapter try once more) with nothing
done.

    python3 docs/examples/webhook_receiver.py --port 8080 --db receiver.sqlite
    .venv/bin/xwait adapter webhook --url 'http://127.0.0.1:8080/notify/{definition}/{action}'

The "work" here is a row in the `notifications` table (print it with `sqlite3
receiver.sqlite 'select * from notifications'`); put yours in `do_the_work`,
inside the transaction, or make it idempotent by the key itself (an email
provider's own idempotency key, an upsert).  SQLite keeps the keys across a
restart of the receiver; the standard library only, not hardened for
production (no TLS, no authentication, no retention of old keys).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from contextlib import closing
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SCHEMA = """
create table if not exists seen (
    idempotency_key text primary key,
    first_action_id text not null,
    received_at text not null default (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
create table if not exists notifications (
    idempotency_key text primary key references seen (idempotency_key),
    wait_key text not null,
    action text not null,
    payload text
);
"""


def do_the_work(db: sqlite3.Connection, key: str, action: dict[str, Any]) -> None:
    """What the action asks for (send the email, open the ticket...): here, a row."""
    db.execute("insert into notifications values (?, ?, ?, ?)",
               (key, action["correlationKey"], action["action"], json.dumps(action["payload"])))


def receive(db_path: Path, key: str, attempt_id: str, action: dict[str, Any]) -> bool:
    """Do the action's work unless its key was seen; whether it was done now.

    The key's row and the work commit together: a crash between them leaves
    neither, so the repeat that follows does the work once.
    """
    # One transaction, committed when the block ends (rolled back if it raises).
    with closing(sqlite3.connect(db_path, timeout=30)) as db, db:
        taken = db.execute("insert into seen (idempotency_key, first_action_id) values (?, ?) "
                           "on conflict do nothing", (key, attempt_id)).rowcount == 1
        if taken:
            do_the_work(db, key, action)
    return taken


def serve(port: int, db_path: Path, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    with closing(sqlite3.connect(db_path)) as db:
        db.executescript(SCHEMA)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            action = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            attempt_id = self.headers.get("X-Xwait-Action-Id") or action["actionId"]
            # Actions written before idempotencyKey existed: the action id stands in.
            key = self.headers.get("Idempotency-Key") or attempt_id
            done = receive(db_path, key, attempt_id, action)
            print(f"{'done' if done else 'repeat, dropped'}  {action['action']} "
                  f"key={key} attempt={attempt_id} sendAttempt={action.get('sendAttempt')}",
                  flush=True)
            text = b"ok" if done else b"already done"
            self.send_response(200)
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    return ThreadingHTTPServer((host, port), Handler)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--db", type=Path, default=Path("receiver.sqlite"),
                        help="where the keys seen and the work done are kept")
    args = parser.parse_args()
    server = serve(args.port, args.db)
    print(f"listening on http://127.0.0.1:{args.port}, keys in {args.db}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
