"""The start-up look for workers of an earlier version, when the broker does not answer."""

from __future__ import annotations

import logging
from concurrent.futures import Future
from typing import Any

import pytest

from streams.config import Settings
from streams.frame import fleet


class _SilentAdmin:
    """An admin client whose group description never comes back in time."""

    def __init__(self, conf: dict[str, Any]) -> None:
        self.asked: list[dict[str, Any]] = []

    def describe_consumer_groups(self, groups: list[str], **kwargs: Any) -> dict[str, Any]:
        self.asked.append(kwargs)
        return {g: Future() for g in groups}  # never resolved


def test_a_group_not_described_in_time_lets_the_worker_start_and_says_so(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """At load 23 a worker's start waited 10 s for the description and died with a bare
    TimeoutError traceback; it starts instead, and looks again after the next rebalance."""
    monkeypatch.setattr(fleet, "AdminClient", _SilentAdmin)
    monkeypatch.setattr(fleet, "DESCRIBE_TIMEOUT_S", 0.05)
    settings = Settings(bootstrap="127.0.0.1:9", topic_prefix="t", app_id="t-processor")
    with caplog.at_level(logging.WARNING, logger=fleet.__name__):
        fleet.check(settings, "t-processor-assignment")
    assert "not described within" in caplog.text
    assert "until the next rebalance" in caplog.text
