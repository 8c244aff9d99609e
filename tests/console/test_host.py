"""The console depends on the small interface a worker offers, not on the worker's module."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import streams.console

CONSOLE = Path(streams.console.__file__).parent


def test_no_console_module_imports_the_processors_app_not_even_for_types() -> None:
    offenders = []
    for path in sorted(CONSOLE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "streams.processor.worker":
                offenders.append(path.name)
            if isinstance(node, ast.Import) and any(
                    a.name.startswith("streams.processor.worker") for a in node.names):
                offenders.append(path.name)
    assert offenders == []


def test_importing_the_console_does_not_load_the_worker() -> None:
    code = "import sys, streams.console; print('streams.processor.worker' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, cwd=CONSOLE.parent.parent)
    assert result.stdout.strip() == "False"
