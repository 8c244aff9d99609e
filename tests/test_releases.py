"""A release is named by its version, and found in the history from the CHANGELOG.

The upgrade test and bench/upgrade_bench.py install "0.1.0", not a tag: tags
need not travel with a clone (RELEASING.md).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from streams.testing.releases import PREVIOUS, ReleaseUnavailable, release_commit

REPO = Path(__file__).resolve().parent.parent


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com",  # noqa: S607
                           *args], cwd=repo, capture_output=True, text=True,
                          check=True).stdout.strip()


def _commit(repo: Path, version: str, releases: list[str]) -> str:
    (repo / "pyproject.toml").write_text(f'[project]\nname = "x"\nversion = "{version}"\n')
    (repo / "CHANGELOG.md").write_text("# Changelog\n\n## Unreleased\n\n" + "".join(
        f"## {r}\n\nwhat changed\n\n" for r in releases))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "--allow-empty", "-m", f"at {version}")
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture
def history(tmp_path: Path) -> tuple[Path, list[str]]:
    """0.1.0 twice, then 0.2.0 released and worked on, then 0.3.0 begun."""
    _git(tmp_path, "init", "-q")
    c1 = _commit(tmp_path, "0.1.0", [])
    c2 = _commit(tmp_path, "0.1.0", ["0.1.0 — 2026-01-01"])
    c3 = _commit(tmp_path, "0.2.0", ["0.2.0 — 2026-02-01", "0.1.0 — 2026-01-01"])
    c4 = _commit(tmp_path, "0.2.0", ["0.2.0 — 2026-02-01", "0.1.0 — 2026-01-01"])
    c5 = _commit(tmp_path, "0.3.0", ["0.3.0 — 2026-03-01", "0.2.0 — 2026-02-01",
                                     "0.1.0 — 2026-01-01"])
    return tmp_path, [c1, c2, c3, c4, c5]


def test_a_release_is_the_last_commit_before_its_version_moved_on(
        history: tuple[Path, list[str]]) -> None:
    repo, commits = history
    assert release_commit("0.1.0", repo) == commits[1]
    assert release_commit("0.2.0", repo) == commits[3]  # work merged after the bump counts
    assert release_commit("0.3.0", repo) == commits[4]  # the current version: HEAD


def test_the_commit_a_changelog_section_names_wins(history: tuple[Path, list[str]]) -> None:
    repo, commits = history
    text = (repo / "CHANGELOG.md").read_text().replace(
        "## 0.1.0 — 2026-01-01\n\nwhat changed", f"## 0.1.0 — 2026-01-01\n\nmain at commit "
                                                  f"{commits[0][:7]}")
    (repo / "CHANGELOG.md").write_text(text)
    assert release_commit("0.1.0", repo) == commits[0]


def test_a_version_the_changelog_does_not_release_is_refused(
        history: tuple[Path, list[str]]) -> None:
    repo, _ = history
    with pytest.raises(ReleaseUnavailable, match="no release 0.9.0"):
        release_commit("0.9.0", repo)


def test_this_repositorys_previous_release_is_found_without_a_tag() -> None:
    try:
        commit = release_commit(PREVIOUS)
    except ReleaseUnavailable as exc:  # a shallow clone
        pytest.skip(str(exc))
    assert commit.startswith("21e3c02")  # CHANGELOG.md: "0.1.0 ... (commit 21e3c02)"
