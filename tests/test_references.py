"""Words that stay true: no reference in the tree points at nothing.

Beside tests/test_rules_page.py (the rules page and the tests agree), this
reads every tracked text file and fails on

* a `streams.x.y` dotted name, in a docstring or comment (or anywhere in a
  page), that does not import (a module, or an attribute of one);
* a repository path (under streams/, docs/, tests/, bench/, scripts/,
  deploy/, topology/, schemas/, .ci/) that names no file or folder;
* DESIGN.md, or a "DESIGN rule": a design document that is not in the
  repository (the rules are docs/rules.md's: "rule N (docs/rules.md)");
* an absolute path of a developer's machine.

The changelog and the measurement logs name what was, as it was (a module
since renamed, a file since removed): they are read for the last two only.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import io
import re
import subprocess
import tokenize
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SELF = "tests/test_references.py"
HISTORY = {"CHANGELOG.md", "docs/speed.md", "docs/guarantees.md", "bench/README.md"}
TEXT = {".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".cfg", ".json", ".html", ".js",
        ".css", ".sh", ".ini", ""}
# Files that name paths inside a container image, not on a machine.
CONTAINER = {"Dockerfile", "docker-compose.yml"}
# Output folders the benchmarks and tests write (ignored by git): named, never tracked.
OUTPUTS = ("bench/results/", "streams/_native")  # the native extension: built, not tracked

# Spots in modules the lead's branch is changing (the zombie-worker fix); each
# entry is (path, the text found) and is removed when that branch lands.
ALLOWED: set[tuple[str, str]] = set()

DOTTED = re.compile(r"(?<![\w./-])streams(?:\.[A-Za-z_]\w*)+")
PATH = re.compile(r"(?<![\w./~-])((?:streams|docs|tests|bench|scripts|deploy|topology|schemas|"
                  r"\.ci)/[\w./-]*[\w/])")
MACHINE = re.compile(r"(?<![\w.~-])/(?:work|root|Users|home)/\w")


@cache
def _tracked() -> dict[str, str]:
    """Path -> text of every tracked text file (symlinks and lock files left out)."""
    try:
        names = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True,  # noqa: S607
                               check=True, text=True).stdout.split("\0")
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    files = {}
    for name in filter(None, names):
        if name == SELF:
            continue  # it holds what it looks for
        path = REPO / name
        if path.is_symlink() or not path.is_file() or path.suffix not in TEXT \
                or name.startswith("requirements"):
            continue
        try:
            files[name] = path.read_text()
        except UnicodeDecodeError:
            continue
    return files


def _prose(name: str, text: str) -> str:
    """What a person reads: a Python file's comments and string literals standing alone
    (docstrings); any other file whole."""
    if not name.endswith(".py") and not text.startswith("#!/usr/bin/env python"):
        return text
    try:
        tree = ast.parse(text)
        comments = [t.string for t in tokenize.generate_tokens(io.StringIO(text).readline)
                    if t.type == tokenize.COMMENT]
    except (SyntaxError, tokenize.TokenError):
        return text
    strings = [n.value.value for n in ast.walk(tree) if isinstance(n, ast.Expr)
               and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)]
    return "\n".join(comments + strings)


def _imports(name: str) -> bool:
    """Whether `name` is a module, or an attribute of one.  A module is found, not
    imported: importing `streams.app` builds the worker and exits without a broker."""
    try:
        if importlib.util.find_spec(name) is not None:
            return True
    except ImportError:  # a parent that is no package, or absent
        pass
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for attribute in parts[i:]:
                found = getattr(found, attribute)
        except AttributeError:
            return False
        return True
    return False


def _findings(kind: str) -> list[tuple[str, str]]:
    found = []
    for name, text in sorted(_tracked().items()):
        if kind == "design":
            found += [(name, m) for m in re.findall(r"DESIGN\.md|DESIGN rule", text)]
        elif kind == "machine" and name not in CONTAINER:
            found += [(name, text[m.start():].split()[0]) for m in MACHINE.finditer(text)]
        elif kind == "dotted" and name not in HISTORY:
            found += [(name, m) for m in sorted(set(DOTTED.findall(_prose(name, text))))
                      if not _imports(m)]
        elif kind == "path" and name not in HISTORY:
            for match in sorted(set(PATH.findall(_prose(name, text)))):
                path = re.sub(r":\d+$", "", match).rstrip(".")
                if any(c in path for c in "<{*$") or path.startswith(OUTPUTS):
                    continue  # a pattern, a placeholder or an output, not a file
                if not (REPO / path).exists():
                    found.append((name, path))
    return [(name, what) for name, what in found
            if not any(name == a and what.startswith(b) for a, b in ALLOWED)]


def test_nothing_cites_a_design_document_the_repository_does_not_have() -> None:
    assert _findings("design") == []  # say "rule N (docs/rules.md)"


def test_no_absolute_path_of_a_developers_machine_is_in_the_tree() -> None:
    assert _findings("machine") == []


def test_every_dotted_streams_name_in_prose_imports() -> None:
    assert _findings("dotted") == []


def test_every_repository_path_named_exists() -> None:
    assert _findings("path") == []


def test_the_checks_find_what_they_look_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each check fails on a made-up file holding what it must catch."""
    text = ('"""See `streams.processor.streamtime` and streams/processor/gone.py;\n'
            'DESIGN rule 2 of DESIGN.md, notes in /work/notes."""\n')
    monkeypatch.setattr("tests.test_references._tracked", lambda: {"streams/x.py": text})
    assert _findings("dotted") == [("streams/x.py", "streams.processor.streamtime")]
    assert _findings("path") == [("streams/x.py", "streams/processor/gone.py")]
    assert _findings("design") == [("streams/x.py", "DESIGN rule"),
                                   ("streams/x.py", "DESIGN.md")]
    assert _findings("machine") == [("streams/x.py", "/work/notes.\"\"\"")]


def test_the_allowed_spots_are_still_there_to_fix() -> None:
    """An entry of ALLOWED whose text is gone must go too."""
    texts = _tracked()
    assert [(a, b) for a, b in ALLOWED if b not in texts.get(a, "")] == []
