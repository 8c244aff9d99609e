"""Releases: the package's version, `xwait --version`, and a CHANGELOG that says what changed."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHANGELOG = (REPO / "CHANGELOG.md").read_text()
RELEASE = re.compile(r"^## (\d+\.\d+\.\d+) — (\d{4}-\d{2}-\d{2})$", re.M)


def _sections() -> dict[str, str]:
    parts = re.split(r"^## ", CHANGELOG, flags=re.M)[1:]
    return {part.splitlines()[0].split(" — ")[0].strip(): part for part in parts}


def test_the_changelog_opens_with_unreleased_then_releases_newest_first() -> None:
    names = list(_sections())
    assert names[0] == "Unreleased"
    versions = [tuple(int(n) for n in v.split(".")) for v in names[1:]]
    assert versions and versions == sorted(versions, reverse=True)
    assert len(RELEASE.findall(CHANGELOG)) == len(versions), "every release has its date"


def test_every_release_says_what_it_changes_in_the_contract_and_the_row_format() -> None:
    for name, body in _sections().items():
        for heading in ("### Contract", "### Row format", "### Upgrading"):
            assert heading in body, f"{name} lacks {heading}"


def test_the_package_version_is_the_newest_release_or_past_it() -> None:
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    newest = RELEASE.findall(CHANGELOG)[0][0]
    assert version == newest, "bump pyproject.toml and the CHANGELOG together"
    assert metadata.version("xwait") == version, "reinstall: `make venv`"
    shown = subprocess.run([sys.executable, "-m", "streams.cli", "--version"],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert shown == f"xwait {version}"


def test_the_changelog_names_the_row_format_versions_the_code_writes() -> None:
    from streams.core.state_codec import STATE_VERSION
    from streams.processor.envelope import MAGIC
    from streams.processor.positions import _MAGIC as POSITIONS

    # The newest section that says what the rows are: Unreleased once a change of
    # the row format is merged, else the newest release.
    formats = [body.split("### Row format", 1)[1].split("###", 1)[0]
               for body in _sections().values()]
    newest = next(f for f in formats if "`XR` version" in f)
    assert f"`XR` version {MAGIC[2]}" in newest
    assert f"slot `v` {STATE_VERSION}" in newest
    assert f"`XP` version {POSITIONS[2]}" in newest


def test_releasing_md_documents_how_a_release_is_made_without_depending_on_a_tag() -> None:
    steps = (REPO / "RELEASING.md").read_text()
    assert "CHANGELOG.md" in steps and "make dist" in steps and "release_commit" in steps
    assert "nothing reads it" in steps  # a tag is optional: the CHANGELOG names the commit
