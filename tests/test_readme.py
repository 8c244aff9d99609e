"""The README is read in five minutes and stays true: short, no dated runs or commit
hashes (those live in docs/speed.md and docs/guarantees.md), links that resolve,
the two commands CI runs, and an SDK example that names the SDK's own methods.

What the README used to list (every setting, field and reason) is now generated
from the code into docs/reference/ and checked by tests/test_reference.py.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text()


def test_the_readme_is_at_most_200_lines() -> None:
    assert len(README.splitlines()) <= 200  # it was 1,971 before 0.2.0


def test_the_readme_carries_no_dated_runs_and_no_commit_hashes() -> None:
    assert re.findall(r"\b20\d\d-\d\d-\d\d\b", README) == []
    assert re.findall(r"\b\d\d:\d\d UTC\b", README) == []
    assert re.findall(r"\bcommit [0-9a-f]{7,40}\b|\([0-9a-f]{7}\)", README) == []


def test_every_relative_link_of_the_readme_resolves() -> None:
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    local = [link for link in links if not link.startswith(("http://", "https://"))]
    assert len(local) > 15, "the README points into the docs"
    assert [link for link in local if not (REPO / link).exists()] == []


def test_the_two_commands_are_make_targets_and_ci_runs_the_test_command() -> None:
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^demo:", makefile, re.M) and re.search(r"^test:", makefile, re.M)
    assert "make demo" in README and "make test" in README
    ci = [line for line in (REPO / ".ci" / "run").read_text().splitlines()
          if line and not line.startswith(("#", "set ", "cd "))]
    assert ci == ["make test"]


def test_make_test_builds_the_documentation_site_first() -> None:
    makefile = (REPO / "Makefile").read_text()
    [prerequisites] = re.findall(r"^test: (.*)$", makefile, re.M)
    assert "docs" in prerequisites.split()
    [docs] = re.findall(r"^docs: .*\n\t(.*)$", makefile, re.M)
    assert "build --strict" in docs and "--quiet" not in docs  # --quiet hides what fails it


def test_the_sdk_example_calls_methods_the_client_has_with_their_keywords() -> None:
    import inspect

    from streams.client import XwaitClient

    [example] = re.findall(r"```python\n(.*?)```", README, re.S)
    calls = [node for node in ast.walk(ast.parse(example)) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Attribute)
             and isinstance(node.func.value, ast.Name) and node.func.value.id == "xw"]
    assert {c.func.attr for c in calls} >= {"start_wait", "reply", "result"}  # type: ignore[attr-defined]
    for call in calls:
        method = getattr(XwaitClient, call.func.attr)  # type: ignore[attr-defined]
        parameters = inspect.signature(method).parameters
        assert {k.arg for k in call.keywords} <= set(parameters), call.func.attr  # type: ignore[attr-defined]
