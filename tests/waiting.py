"""Waiting for a condition in a test, never for a fixed time: the suite runs on busy
machines, where a fixed sleep is either too short or wasted."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def until(check: Callable[[], T | None], what: str, timeout: float = 60, every: float = 0.2
          ) -> T:
    """`check()`'s first true value, as soon as it has one; fail, naming `what`, after
    `timeout` seconds.  (A check that answers None until it has its value types as that
    value.)"""
    deadline = time.monotonic() + timeout
    while not (got := check()):
        assert time.monotonic() < deadline, f"timed out after {timeout:g} s waiting for {what}"
        time.sleep(every)
    return got
