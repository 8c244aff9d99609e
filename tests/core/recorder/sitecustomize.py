"""Records the decisions of every Python process started with this folder on PYTHONPATH.

Used by ``scripts/record_transitions.py`` only, to record the corpus from the
end-to-end scenarios: their workers are ``xwait worker`` subprocesses, which
import this module at start (Python imports ``sitecustomize`` from its path),
and each decision their record handler takes is recorded.  The script also
sets ``XWAIT_PURE_PYTHON=1``: the native record path calls no Python ``decide``.

Nothing is imported here: `streams.processor.records` is wrapped when it is
first imported (pytest must import `streams` itself, to rewrite its plugin's
asserts).  Without ``XWAIT_RECORD_TRANSITIONS`` set this does nothing.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from types import ModuleType

_FOLDER = os.environ.get("XWAIT_RECORD_TRANSITIONS")
_TARGET = "streams.processor.records"


class _Wrap(importlib.abc.MetaPathFinder):
    """Finds `streams.processor.records` as usual, and records its `decide` once run."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != _TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run(module)
            from tests.core import transitions

            setattr(module, "decide", transitions.recording_decide(  # noqa: B010
                getattr(module, "decide"), transitions.Recorder(str(_FOLDER), "e2e")))  # noqa: B009

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


if _FOLDER:
    sys.meta_path.insert(0, _Wrap())
