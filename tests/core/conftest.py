"""One suite, both implementations of the rules (house style 13).

Every test module here that decides - its own `decide` or `catch_up`, or the
`Run` driver of `core_harness` - runs twice: against the Python rules
(`streams.core.rules`, the reference) and against the native ones
(`streams.core.native`, the Rust crate in native/), its test ids ending in
``[python]`` and ``[native]``.  The native run puts the slot through the
native slot codec at every step and fails where the native rules decline
what the Python rules decide (`NativeDeclined`): a gap between the two is a
failing test, never a silent fallback.  Without the extension (not built,
or ``XWAIT_PURE_PYTHON=1``) the native runs are skipped, each saying why.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from types import ModuleType

import pytest

from streams.core import native
from tests.core import core_harness

IMPLEMENTATIONS = ("python", "native")


def _decides(module: ModuleType) -> bool:
    return any(hasattr(module, name) for name in ("decide", "catch_up", "Run"))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "rules" in metafunc.fixturenames and _decides(metafunc.module):
        metafunc.parametrize("rules", IMPLEMENTATIONS, indirect=True, scope="module")


@pytest.fixture(scope="module", autouse=True)
def rules(request: pytest.FixtureRequest) -> Iterator[str]:
    """Which implementation decides in this module's tests ("python" or "native")."""
    which: str = getattr(request, "param", "python")
    if which == "python":
        yield which
        return
    if native.load(pure_python=os.environ.get("XWAIT_PURE_PYTHON") == "1") is None:
        pytest.skip(f"the native rules are not used here: {native.unavailable}")
    module = request.module
    with pytest.MonkeyPatch.context() as patch:
        for target in (module, core_harness):
            if hasattr(target, "decide"):
                patch.setattr(target, "decide", native.decide)
            if hasattr(target, "catch_up"):
                patch.setattr(target, "catch_up", native.catch_up)
        yield which
