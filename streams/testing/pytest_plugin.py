"""The test kit's pytest fixtures (registered as the ``xwait`` plugin: the ``pytest11`` entry
point in pyproject.toml; ``-p no:xwait`` turns it off).

``xwait_kit`` is what a test asks for: a `streams.testing.kit.Kit` on the
session's worker, with a clock of its own that starts where the previous
test's stopped.  Three session fixtures say what it runs, each overridable
in a ``conftest.py``:

* ``xwait_definitions``: the folder of wait definitions under test (default:
  ``$XWAIT_TOPOLOGY/waits``, else the examples shipped with xwait);
* ``xwait_bootstrap``: the broker (default: ``XWAIT_BOOTSTRAP``, else
  127.0.0.1:9092; the session fails at once, saying so, when none answers);
* ``xwait_kit_options``: keyword arguments of `KitSession` (``partitions``,
  ``guarantee``, ``timer_tick``).

Nothing is imported or started until a test asks for ``xwait_kit``: the
plugin costs other test suites nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from streams.testing.kit import Kit, KitSession

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


@pytest.fixture(scope="session")
def xwait_definitions() -> Path:
    """The folder of wait definitions the kit's worker runs (override it in conftest.py)."""
    topology = os.environ.get("XWAIT_TOPOLOGY")
    if topology:
        return Path(topology) / "waits"
    from streams.config import PACKAGED_TOPOLOGY

    return PACKAGED_TOPOLOGY / "waits"


@pytest.fixture(scope="session")
def xwait_bootstrap() -> str:
    """The Kafka broker the kit uses: XWAIT_BOOTSTRAP, else 127.0.0.1:9092."""
    bootstrap = os.environ.get("XWAIT_BOOTSTRAP") or DEFAULT_BOOTSTRAP
    from confluent_kafka.admin import AdminClient

    from streams.config import LIBRDKAFKA_LOGGER  # librdkafka's retries: not on stderr

    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "socket.timeout.ms": 3000,
                            "logger": LIBRDKAFKA_LOGGER}
    admin = AdminClient(conf)
    try:
        admin.list_topics(timeout=5)
    except Exception as exc:  # noqa: BLE001 - any failure means: no broker there
        pytest.fail(f"the xwait test kit needs a Kafka broker, and none answers at {bootstrap} "
                    f"({exc}): start one (`scripts/kafka start` in a checkout of xwait, or "
                    "`docker compose up -d kafka-1 kafka-2 kafka-3`) or set XWAIT_BOOTSTRAP",
                    pytrace=False)
    return bootstrap


@pytest.fixture(scope="session")
def xwait_kit_options() -> dict[str, Any]:
    """Keyword arguments for the session's `KitSession` (override it in conftest.py)."""
    return {}


@pytest.fixture(scope="session")
def xwait_kit_session(xwait_bootstrap: str, xwait_definitions: Path,
                      xwait_kit_options: dict[str, Any],
                      tmp_path_factory: pytest.TempPathFactory) -> Iterator[KitSession]:
    """One worker, its topics and its clock for the session (started on first use)."""
    from streams.testing.kit import KitSession

    session = KitSession(xwait_bootstrap, xwait_definitions,
                         tmp_path_factory.mktemp("xwait-kit"), **xwait_kit_options)
    try:
        session.start()
        yield session
    finally:
        session.close()


@pytest.fixture
def xwait_kit(xwait_kit_session: KitSession) -> Kit:
    """A test's kit: start waits, reply, ``advance("P3D")``, read actions and outcomes."""
    return xwait_kit_session.new_test()
