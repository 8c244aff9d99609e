"""One suite, both implementations of the rules (house style 13).

Every test module here that decides - its own `decide` or `catch_up`, or the
shared drivers `core_harness.Run` and `programs.Program` - runs twice: against
the Python rules (`streams.core.rules`, the reference) and against the native
ones (`streams.core.native`, the Rust crate in native/), its test ids ending in
``[python]`` and ``[native]``.  The native run puts the slot through the
native slot codec at every step and fails where the native rules decline
what the Python rules decide (`NativeDeclined`): a gap between the two is a
failing test, never a silent fallback.  Without the extension (not built,
or ``XWAIT_PURE_PYTHON=1``) the native runs are skipped, each saying why.

The swap replaces the name ``decide`` (``catch_up``) in each module, which is why
the modules here import those two by name and the rest of the core as a module
(``from streams import core``, then ``core.TimerKind``).

With ``XWAIT_RECORD_TRANSITIONS`` set to a folder, the Python runs record
every decision they make there (`tests.core.transitions`, for the corpus).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from types import ModuleType

import pytest

from streams.core import native
from streams.core.rules import catch_up as python_catch_up
from streams.core.rules import decide as python_decide
from tests.core import transitions

IMPLEMENTATIONS = ("python", "native")


def _decides(module: ModuleType) -> bool:
    return any(hasattr(module, name) for name in ("decide", "catch_up", "Run", "Program"))


def _deciding_modules(module: ModuleType) -> list[ModuleType]:
    """The test module and every module of tests.core it may decide through."""
    found = [m for name, m in sorted(sys.modules.items())
             if name.startswith("tests.core.") and m is not None]
    return [module, *(m for m in found if m is not module)]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "rules" in metafunc.fixturenames and _decides(metafunc.module):
        metafunc.parametrize("rules", IMPLEMENTATIONS, indirect=True, scope="module")


@pytest.fixture(scope="module", autouse=True)
def rules(request: pytest.FixtureRequest) -> Iterator[str]:
    """Which implementation decides in this module's tests ("python" or "native")."""
    which: str = getattr(request, "param", "python")
    if which == "python":
        folder = os.environ.get(transitions.RECORD_ENV)
        if not folder:
            yield which
            return
        recorder = transitions.Recorder(folder, f"core:{request.module.__name__}")
        replacements = (transitions.recording_decide(python_decide, recorder),
                        transitions.recording_catch_up(python_catch_up, recorder))
    else:
        if native.load(pure_python=os.environ.get("XWAIT_PURE_PYTHON") == "1") is None:
            pytest.skip(f"the native rules are not used here: {native.unavailable}")
        replacements = (native.decide, native.catch_up)
    with pytest.MonkeyPatch.context() as patch:
        for target in _deciding_modules(request.module):
            if getattr(target, "decide", None) is python_decide:
                patch.setattr(target, "decide", replacements[0])
            if getattr(target, "catch_up", None) is python_catch_up:
                patch.setattr(target, "catch_up", replacements[1])
        yield which
