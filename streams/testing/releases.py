"""An earlier release of xwait, installed beside this checkout, to upgrade from.

A release is named by its version; `release_commit` finds its commit in this
repository's history from CHANGELOG.md and pyproject.toml, never from a git
tag (tags need not travel with a clone; RELEASING.md).

`install_release` exports that commit of this repository (``git archive``, so
the checkout's own worktree list is left alone) into a folder of its own and
installs it in a virtualenv of its own, the way a user installed that
release: the package built from its sources (a wheel), its dependencies
from this checkout's ``requirements.lock`` (0.1.0 had no lock of its own;
its pyproject only sets lower bounds, which the lock meets - `pip check`
says so after the install).  uv installs it where the checkout's virtualenv
has uv (`make venv` puts it there), pip otherwise.

The result is kept in the user's cache (``~/.cache/xwait/releases/``, or
under ``$XDG_CACHE_HOME``), named by the release, its commit and the lock's
hash, and reused by every clone: a fresh clone's test run installed it
again each time, three minutes of a busy CI machine.  A half-made one (no
stamp) is made again; two runs at once wait for each other.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

from streams.config import REPO_ROOT

RELEASES = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "xwait" / "releases"
LOCK = REPO_ROOT / "requirements.lock"
# The release an upgrade test starts from: 0.1.0, the worker on faust's tables,
# whose rows and consumer group 0.2.0 changed (CHANGELOG.md, 0.2.0: Row format).
PREVIOUS = "0.1.0"


class ReleaseUnavailable(RuntimeError):
    """The commit is not in this checkout (a shallow clone), or it could not be installed."""


@dataclass(frozen=True)
class Release:
    version: str
    commit: str
    home: Path

    @property
    def source(self) -> Path:
        return self.home / "src"

    @property
    def xwait(self) -> Path:
        return self.home / "venv" / "bin" / "xwait"

    @property
    def topology(self) -> Path:
        """The release's own example topology (its topics.yaml)."""
        return self.source / "topology"


def release_commit(version: str, repo: Path = REPO_ROOT) -> str:
    """The full hash of the commit that is release `version` of this repository.

    The release's CHANGELOG section (`## VERSION — DATE`) must exist.  The
    commit it names ("commit 21e3c02": 0.1.0 was named a release after the fact,
    its version having been in pyproject.toml since the first commit) wins;
    otherwise the release is the last commit whose pyproject.toml carries the
    version, before a later commit moved it on (HEAD while it is the current one).
    """
    changelog = (repo / "CHANGELOG.md").read_text()
    section = re.search(rf"^## {re.escape(version)} — .*?(?=^## |\Z)", changelog, re.M | re.S)
    if section is None:
        raise ReleaseUnavailable(f"CHANGELOG.md has no release {version}")
    named = re.search(r"\bcommit ([0-9a-f]{7,40})\b", section.group(0))
    if named is not None:
        return _git(repo, "rev-parse", "--verify", f"{named.group(1)}^{{commit}}")
    moves = _git(repo, "log", "--first-parent", "--format=%H", "-G", "^version = ",
                 "--", "pyproject.toml").split()
    for commit in moves:  # newest first
        if _version_at(repo, commit) != version and _version_at(repo, f"{commit}^") == version:
            return _git(repo, "rev-parse", "--verify", f"{commit}^")
    if moves and _version_at(repo, moves[0]) == version:
        return _git(repo, "rev-parse", "--verify", "HEAD")
    raise ReleaseUnavailable(f"no commit of this history carries version {version}")


def _version_at(repo: Path, commit: str) -> str | None:
    try:
        text = _git(repo, "show", f"{commit}:pyproject.toml")
    except ReleaseUnavailable:
        return None
    return str(tomllib.loads(text)["project"]["version"])


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True,  # noqa: S603, S607
                          text=True, timeout=60, check=False)
    if done.returncode != 0:
        raise ReleaseUnavailable(f"git {args[0]} failed (a shallow clone?): "
                                 f"{done.stderr.strip()[-500:]}")
    return done.stdout.strip()


def _run(args: list[str], what: str, cwd: Path | None = None, timeout: float = 900
         ) -> subprocess.CompletedProcess[bytes]:
    done = subprocess.run(args, cwd=cwd, capture_output=True, timeout=timeout,  # noqa: S603
                          check=False)
    if done.returncode != 0:
        raise ReleaseUnavailable(f"{what} failed: {done.stderr.decode(errors='replace')[-2000:]}")
    return done


def install_release(version: str, commit: str | None = None, home: Path = RELEASES
                    ) -> Release:
    """The release `version` (at `commit`, by default `release_commit(version)`), installed
    in a virtualenv of its own (cached)."""
    commit = commit or release_commit(version)
    locked = hashlib.sha256(LOCK.read_bytes()).hexdigest()[:12]
    release = Release(version, commit, home / f"{version}-{commit[:7]}-{locked}")
    stamp = release.home / ".installed"
    if stamp.exists() and release.xwait.exists():
        return release
    home.mkdir(parents=True, exist_ok=True)
    with open(home / f"{release.home.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another run installing it: wait, then reuse
        if not (stamp.exists() and release.xwait.exists()):
            _install(release)
            stamp.write_text(f"{version} {commit} {locked}\n")
    return release


def _install(release: Release) -> None:
    shutil.rmtree(release.home, ignore_errors=True)
    release.source.mkdir(parents=True)
    archive = _run(["git", "archive", "--format=tar", release.commit],  # noqa: S607
                   f"git archive {release.commit}", cwd=REPO_ROOT)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(release.source, filter="tar")
    venv = release.home / "venv"
    python = str(venv / "bin" / "python")
    uv = Path(sys.executable).with_name("uv")
    if uv.exists():
        _run([str(uv), "venv", "--quiet", "--python", sys.executable, str(venv)],
             "making the virtualenv")
        install = [str(uv), "pip", "install", "--quiet", "--python", python]
        check = [str(uv), "pip", "check", "--python", python]
    else:
        _run([sys.executable, "-m", "venv", str(venv)], "making the virtualenv")
        install = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        check = [python, "-m", "pip", "check"]
    _run([*install, "--require-hashes", "-r", str(LOCK)], "installing the dependencies")
    _run([*install, "--no-deps", str(release.source)], f"installing xwait {release.version}")
    _run(check, "checking the dependencies")


__all__ = ["PREVIOUS", "RELEASES", "Release", "ReleaseUnavailable", "install_release",
           "release_commit"]
