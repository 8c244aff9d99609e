"""A GET on a worker's web API (urllib, no Kafka): what `status`, `list` and the key check use.

Any worker answers for the whole cluster: it forwards a key to the worker
that owns it and merges every worker's list (streams.console.api).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

__all__ = ["CHECK_TIMEOUT_S", "HTTP_TIMEOUT_S", "ConsoleUnreachable", "get", "wait_path"]

HTTP_TIMEOUT_S = 30.0
"""A list walks every worker's table; a big one takes seconds."""

CHECK_TIMEOUT_S = 5.0
"""The key check before a reply or command reads one row: a healthy worker answers in
milliseconds, and a hung one must not hold a reply back for long (it is then sent unchecked)."""


class ConsoleUnreachable(Exception):
    """No worker answered at the URL (internal: callers decide what that means to them)."""


def wait_path(key: str) -> str:
    return "/xwait/api/waits/" + urllib.parse.quote(key, safe="")


def get(base: str, path: str, timeout: float = HTTP_TIMEOUT_S,
        token: str | None = None) -> tuple[int, Any]:
    """(HTTP status, decoded JSON body) of a GET; raises ConsoleUnreachable when nothing answers.

    `token` is sent as a Bearer header: a worker with a console token wants one for reads.
    """
    if not base.startswith(("http://", "https://")):
        raise ConsoleUnreachable(f"{base}: expected an http:// or https:// URL")
    request = urllib.request.Request(  # noqa: S310 - http(s) checked above
        base + path, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:  # noqa: S310 - http(s) checked above
            return int(resp.status), json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        try:
            body = json.loads(exc.read())
        except ValueError:
            body = {"error": exc.reason}
        return exc.code, body
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ConsoleUnreachable(f"no xwait worker answered at {base}: {reason}") from exc
