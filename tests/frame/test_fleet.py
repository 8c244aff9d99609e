"""The start-up look for workers of an earlier version: a broker that does not answer, and a
member that leaves late."""

from __future__ import annotations

import logging
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest

from streams.config import Settings
from streams.errors import ConfigError
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


class _GroupAdmin:
    """An admin client describing a group whose earlier-version member leaves after
    `_GroupAdmin.leaves_after` descriptions (None: never)."""

    leaves_after: int | None = None
    asked = 0

    def __init__(self, conf: dict[str, Any]) -> None:
        pass

    def describe_consumer_groups(self, groups: list[str], **kwargs: Any) -> dict[str, Any]:
        _GroupAdmin.asked += 1
        old = SimpleNamespace(client_id="faust-0.15.3", host="/127.0.0.1", assignment=(
            SimpleNamespace(topic_partitions=[SimpleNamespace(topic="t.requests")])))
        gone = self.leaves_after is not None and _GroupAdmin.asked > self.leaves_after
        answer: Future[Any] = Future()
        answer.set_result(SimpleNamespace(members=[] if gone else [old]))
        return {g: answer for g in groups}


@pytest.mark.parametrize("leaves_after", [2, None])
def test_an_earlier_worker_is_refused_only_if_still_in_the_group_after_a_session_timeout(
        monkeypatch: pytest.MonkeyPatch, leaves_after: int | None) -> None:
    """A killed worker of the earlier release stays a member until its session times out:
    a fleet stopped and replaced at once was refused for it (a busy CI run)."""
    monkeypatch.setattr(fleet, "AdminClient", _GroupAdmin)
    monkeypatch.setattr(fleet, "LOOK_AGAIN_S", 0.01)
    _GroupAdmin.leaves_after, _GroupAdmin.asked = leaves_after, 0
    settings = Settings(bootstrap="127.0.0.1:9", topic_prefix="t", app_id="t-processor",
                        session_timeout=0.5)
    if leaves_after is None:
        with pytest.raises(ConfigError, match="faust-0.15.3 .* holds t.requests"):
            fleet.check(settings, "t-processor-assignment")
        assert _GroupAdmin.asked > 2  # looked again until the session timeout
    else:
        fleet.check(settings, "t-processor-assignment")  # it left: the start goes on
        assert _GroupAdmin.asked == leaves_after + 1
