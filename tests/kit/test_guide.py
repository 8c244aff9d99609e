"""The testing guide's worked example is the example suite's code, character for character:
every Python block of docs/guides/testing.md is found in tests/kit/ (the suite `make test`
runs, and its conftest.py), so the guide's example runs and passes."""

from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
GUIDE = HERE.parent.parent / "docs" / "guides" / "testing.md"
SOURCES = [HERE / "test_expense_approval.py", HERE / "conftest.py"]


def test_every_python_block_of_the_testing_guide_is_code_of_the_example_suite() -> None:
    blocks = re.findall(r"^```python\n(.*?)^```$", GUIDE.read_text(), re.S | re.M)
    assert len(blocks) >= 6, "the guide shows the conftest, the imports and the tests"
    code = "\n".join(source.read_text() for source in SOURCES)
    assert [block for block in blocks if block not in code] == []


def test_the_guide_shows_every_test_of_the_example_suite() -> None:
    tests = re.findall(r"^def (test_\w+)\(", SOURCES[0].read_text(), re.M)
    shown = re.findall(r"^def (test_\w+)\(", GUIDE.read_text(), re.M)
    assert tests and shown == tests
