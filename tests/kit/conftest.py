"""The test kit (streams.testing.kit) on the suite's broker, running the shipped definitions.

The `xwait_kit` fixture comes from the `xwait` pytest plugin (the `pytest11` entry point);
a project using xwait overrides `xwait_definitions` in its own conftest.py as below, and
these tests get their broker from the suite's session fixture (tests/conftest.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

TOPOLOGY = Path(__file__).resolve().parents[2] / "topology"


@pytest.fixture(scope="session")
def xwait_definitions() -> Path:
    return TOPOLOGY / "waits"  # the folder of your wait definitions


@pytest.fixture(scope="session")
def xwait_bootstrap(kafka_bootstrap: str) -> str:
    """The suite's broker (tests/conftest.py starts one when none answers)."""
    return kafka_bootstrap
