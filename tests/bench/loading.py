"""Benchmarks are scripts under bench/, not a package: the tests load them by path.

A bench imports only from `streams` (its shared pieces are `streams.testing.harness`),
so nothing is put on `sys.path` for it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def load_bench(name: str) -> ModuleType:
    """bench/<name>.py as module `name`."""
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses of the script look their module up here
    spec.loader.exec_module(module)
    return module
