"""POSTing one action: what an answer means, and when to POST it again.

What a receiver's answer means, by HTTP's own semantics: a 2xx took the action; a 4xx
other than 408, 425 and 429 refused this request, and the same request will be refused
again (failed for good, ``permanent``); 408 (Request Timeout), 425 (Too Early), 429 (Too
Many Requests), a 5xx, a timeout or no connection may come out otherwise next time, so
`Sender.deliver` POSTs again, after the wait the answer asks for in ``Retry-After``
(delta-seconds or an HTTP date) or a doubling backoff, each wait cut to the policy's
``max_wait_s``; only when its retries are spent is the failure reported (and the
definition's ``on_send_failure`` sends it again later, as another send attempt).

Every POST of one action carries the same headers (the caller's): the webhook adapter's
``Idempotency-Key`` comes from the record, so it is the same for the retries here, for
xwait's send retries and after a restart.
"""

from __future__ import annotations

import dataclasses
import email.utils
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC

import httpx2

log = logging.getLogger(__name__)

DEFAULT_CONNECTIONS = 8
"""Connections kept: the webhook adapter's POSTs in flight (its concurrency)."""
DEFAULT_RETRIES = 3
"""The adapter's own POSTs again after an answer that may come out otherwise next time:
enough to ride out a blip or a rate limit without spending one of the definition's
``on_send_failure`` retries (each a backoff and lines in the trace), few enough that a
receiver that is down holds its batch for seconds, not minutes."""
DEFAULT_MAX_RETRY_WAIT_S = 30.0
"""The longest wait before one retry, a ``Retry-After`` included: a batch waits for its
slowest action, so an answer asking for an hour must not hold every action behind it for
an hour.  A longer ``Retry-After`` is cut to this."""
FIRST_BACKOFF_S = 1.0
"""The wait before the first retry when the answer names none (doubled for each next one):
long enough for a receiver restarting or shedding load, short beside a batch."""
TRANSIENT_4XX = frozenset({408, 425, 429})
"""The 4xx answers that say "not now" rather than "never" (Request Timeout, Too Early, Too
Many Requests): sent again, like a 5xx."""
ERROR_TEXT = 300
"""Characters of a failing answer's body kept in the error reported (the trace shows it)."""
BODY_READ = 64 * 1024
"""Bytes of an answer's body read at most (the rest is not waited for: the connection is
dropped instead of kept for the next POST)."""


@dataclass(frozen=True)
class RetryPolicy:
    """The adapter's own retries of one action, before it reports a failure.

    ``retries`` POSTs again (0: none, each failure is reported at once), each after
    the wait the answer's ``Retry-After`` names (seconds or an HTTP date), else after
    1, 2, 4 ... seconds; no wait longer than ``max_wait_s``.
    """

    retries: int = DEFAULT_RETRIES
    max_wait_s: float = DEFAULT_MAX_RETRY_WAIT_S

    def wait_before(self, retry: int, retry_after_s: float | None) -> float:
        """Seconds to wait before retry number ``retry`` (1, 2, ...)."""
        wanted = (retry_after_s if retry_after_s is not None
                  else FIRST_BACKOFF_S * 2 ** (retry - 1))
        return max(0.0, min(wanted, self.max_wait_s))


@dataclass(frozen=True)
class Delivery:
    """What an action's POSTs came to (`Sender.post`: one POST; `Sender.deliver`: the last)."""

    delivered: bool
    permanent: bool = False
    error: str | None = None
    http_status: int | None = None
    seconds: float = 0.0
    """To the answer or timeout: of the POST (`Sender.post`), from the first POST
    (`Sender.deliver`)."""
    retry_after_s: float | None = None
    """What a failed answer's ``Retry-After`` asked for, in seconds from when it came."""
    posts: int = 1
    """POSTs made: 1 and the adapter's own retries."""
    stopped: bool = False
    """The adapter stopped while waiting to POST again: nothing to report (the action's
    batch is not committed, and the next run POSTs it again)."""

    @property
    def result(self) -> str:
        return ("stopped" if self.stopped else "delivered" if self.delivered
                else "permanent" if self.permanent else "failed")


def retry_after(value: str | None, now: float) -> float | None:
    """``Retry-After`` as seconds from ``now`` (epoch seconds): delta-seconds or an HTTP
    date (one in the past: 0); None when absent or unreadable (the backoff applies)."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except ValueError:
        return None
    if when.tzinfo is None:  # "-0000": HTTP dates are UTC
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - now)


def is_permanent(status: int) -> bool:
    """A 4xx other than 408, 425 and 429: sending the same request again cannot help."""
    return 400 <= status < 500 and status not in TRANSIENT_4XX


class Sender:
    """POSTs over one pool of keep-alive connections (an ``httpx2.Client``, shared by the
    adapter's threads); `deliver` retries by the `RetryPolicy` until ``stopping`` is set."""

    def __init__(self, timeout_s: float, retry: RetryPolicy | None = None, *,
                 connections: int = DEFAULT_CONNECTIONS,
                 stopping: threading.Event | None = None) -> None:
        self.retry = retry or RetryPolicy()
        self.stopping = stopping or threading.Event()
        # One connection per thread in flight: a POST never waits for the pool.
        self._client = httpx2.Client(
            timeout=timeout_s, follow_redirects=True,
            limits=httpx2.Limits(max_connections=connections,
                                 max_keepalive_connections=connections))

    # Alike with codec/registry.py's client (duplicates lists the pair), deliberately: the
    # context-manager protocol of a class that owns an HTTP client, three one-line methods.
    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Sender:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> Delivery:
        """One POST: 2xx delivered; another 4xx than 408/425/429 failed for good; anything
        else (408, 425, 429, 5xx, a timeout, no connection) failed, worth another try."""
        started = time.monotonic()
        try:
            with self._client.stream("POST", url, content=body, headers={
                    "Content-Type": "application/json", **headers}) as resp:
                text = _head(resp.iter_bytes(), BODY_READ)
                status = resp.status_code
                if resp.is_success:
                    return Delivery(True, http_status=status,
                                    seconds=time.monotonic() - started)
                shown = text[:ERROR_TEXT].decode("utf-8", errors="replace").strip()
                return Delivery(
                    False, permanent=is_permanent(status),
                    error=f"HTTP {status} {resp.reason_phrase}" + (f": {shown}" if shown else ""),
                    http_status=status, seconds=time.monotonic() - started,
                    retry_after_s=retry_after(resp.headers.get("Retry-After"), time.time()))
        except httpx2.TimeoutException:
            return Delivery(False, error=f"POST timed out after {time.monotonic() - started:.1f} s",
                            seconds=time.monotonic() - started)
        except httpx2.HTTPError as exc:  # no connection, a broken answer, redirects in a loop
            return Delivery(False, error=f"POST no answer ({exc or type(exc).__name__}) after "
                                         f"{time.monotonic() - started:.1f} s",
                            seconds=time.monotonic() - started)
        except httpx2.InvalidURL as exc:  # a template filled with what no URL can hold
            return Delivery(False, permanent=True, error=f"POST to an invalid URL: {exc}",
                            seconds=time.monotonic() - started)

    def deliver(self, url: str, body: bytes, headers: Mapping[str, str],
                on_post: Callable[[Delivery], None] | None = None) -> Delivery:
        """POST until delivered, failed for good, or the policy's retries are spent; the
        last POST's `Delivery`, its ``seconds`` and ``posts`` counting every POST."""
        started = time.monotonic()
        posts = 0
        while True:
            delivery = self.post(url, body, headers)
            posts += 1
            if on_post is not None:
                on_post(delivery)
            if delivery.delivered or delivery.permanent or posts > self.retry.retries:
                break
            wait = self.retry.wait_before(posts, delivery.retry_after_s)
            log.info("POST again in %.1f s (retry %d of %d%s) idempotency_key=%s url=%s: %s",
                     wait, posts, self.retry.retries,
                     "" if delivery.retry_after_s is None
                     else f", Retry-After {delivery.retry_after_s:.0f} s",
                     headers.get("Idempotency-Key"), url, delivery.error)
            if self.stopping.wait(wait):
                return dataclasses.replace(delivery, posts=posts, stopped=True,
                                           seconds=time.monotonic() - started)
        error = delivery.error
        if posts > 1 and error is not None:
            error += f" ({posts} POSTs)"
        return dataclasses.replace(delivery, posts=posts, error=error,
                                   seconds=time.monotonic() - started)


def _head(chunks: Iterable[bytes], most: int) -> bytes:
    """The first ``most`` bytes of a body (the rest unread)."""
    taken = b""
    for chunk in chunks:
        taken += chunk
        if len(taken) >= most:
            break
    return taken[:most]


__all__ = ["DEFAULT_MAX_RETRY_WAIT_S", "DEFAULT_RETRIES", "Delivery", "RetryPolicy", "Sender",
           "TRANSIENT_4XX", "is_permanent", "retry_after"]
