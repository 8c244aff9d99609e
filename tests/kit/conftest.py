"""The test kit (streams.testing.kit) on the suite's broker, running the shipped definitions.

The `xwait_kit` fixture comes from the `xwait` pytest plugin (the `pytest11` entry point);
a project using xwait overrides `xwait_definitions` in its own conftest.py as below, and
these tests get their broker from the suite's session fixture (tests/conftest.py).  They
run the kit's harder case, one worker for all of them: outputs in transactions
(exactly_once), waits spread over three partitions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streams.config import Guarantee

TOPOLOGY = Path(__file__).resolve().parents[2] / "topology"


@pytest.fixture(scope="session")
def xwait_definitions() -> Path:
    return TOPOLOGY / "waits"  # the folder of your wait definitions


@pytest.fixture(scope="session")
def xwait_kit_options() -> dict[str, Any]:  # optional; default: at_least_once, 1 partition
    return {"guarantee": Guarantee.EXACTLY_ONCE, "partitions": 3}


@pytest.fixture(scope="session")
def xwait_bootstrap(kafka_bootstrap: str) -> str:
    """The suite's broker (tests/conftest.py starts one when none answers)."""
    return kafka_bootstrap
