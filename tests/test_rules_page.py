"""docs/rules.md and the tests agree: each rule names the modules that prove it, and
exactly those carry its marker (`pytest -m rule7` runs what proves rule 7)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "rules.md"


def _page() -> dict[int, set[str]]:
    """Rule number -> the test modules the page names for it."""
    rules: dict[int, set[str]] = {}
    for block in re.split(r"\n## ", PAGE.read_text())[1:]:
        number = int(block.split(".", 1)[0])
        _, tests = block.split("- tests:", 1)
        rules[number] = set(re.findall(r"`(tests/[^`]+\.py)`", tests))
    return rules


def _marked() -> dict[int, set[str]]:
    """Rule number -> the test modules whose `pytestmark` carries `pytest.mark.ruleN`."""
    rules: dict[int, set[str]] = {}
    for path in REPO.glob("tests/**/test_*.py"):
        for node in ast.parse(path.read_text()).body:
            if not (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                    and node.targets[0].id == "pytestmark"):
                continue
            for mark in ast.walk(node.value):
                if isinstance(mark, ast.Attribute) and re.fullmatch(r"rule\d+", mark.attr):
                    rules.setdefault(int(mark.attr[4:]), set()).add(
                        str(path.relative_to(REPO)))
    return rules


def test_every_rule_names_test_modules_that_exist() -> None:
    page = _page()
    assert sorted(page) == list(range(1, 14))
    for number, modules in page.items():
        assert modules, f"rule {number} names no test"
        for module in modules:
            assert (REPO / module).is_file(), f"rule {number}: {module} does not exist"


def test_the_modules_a_rule_names_are_exactly_those_marked_with_it() -> None:
    assert _marked() == _page()


def test_every_module_the_page_cites_as_keeping_a_rule_exists() -> None:
    core = REPO / "streams" / "core" / "decide"
    for module in set(re.findall(r"`(\w+\.py)`", PAGE.read_text())):
        if module.startswith("test_"):
            continue
        found = list(core.glob(module)) + list(REPO.glob(f"streams/**/{module}"))
        assert found, f"docs/rules.md cites {module}, which is nowhere under streams/"
