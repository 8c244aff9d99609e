"""SDK tests run against the real broker, each with its own topic prefix.

Helpers are fixtures (not a sibling module) so that mypy resolves them the same
way pytest does.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import Message

from streams.cli import main
from streams.config import Settings
from tests import records
from tests.records import first_records


def _create_topics(settings: Settings) -> None:
    """The contract's topics under the test's prefix, through the CLI a user runs."""
    args = ["topics", "create", "--bootstrap", settings.bootstrap, "--prefix",
            settings.topic_prefix, "--partitions", str(settings.partitions)]
    assert main(args) == 0


@pytest.fixture
def topics(settings: Settings, monkeypatch: pytest.MonkeyPatch,
           capsys: pytest.CaptureFixture[str]) -> Settings:
    """``settings`` whose contract topics exist (the changelog is named after XWAIT_APP_ID)."""
    monkeypatch.setenv("XWAIT_APP_ID", settings.app_id)
    _create_topics(settings)
    capsys.readouterr()
    return settings


@pytest.fixture
def end_offsets() -> Callable[[Settings, str], list[int]]:
    return records.end_offsets


@pytest.fixture
def read_raw() -> Callable[[Settings, str, int], list[Message]]:
    return first_records
