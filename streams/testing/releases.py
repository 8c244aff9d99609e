"""An earlier release of xwait, installed beside this checkout, to upgrade from.

`install_release` exports a commit of this repository (``git archive``, so
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
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from streams.config import REPO_ROOT

RELEASES = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "xwait" / "releases"
LOCK = REPO_ROOT / "requirements.lock"
# The previous release (CHANGELOG.md: 0.1.0 = main at this commit, the worker on
# faust's tables); the one an upgrade test starts from.
PREVIOUS = ("0.1.0", "21e3c02a273bd15f8c694a31e2cdf6fbab69c4d3")


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


def _run(args: list[str], what: str, cwd: Path | None = None, timeout: float = 900
         ) -> subprocess.CompletedProcess[bytes]:
    done = subprocess.run(args, cwd=cwd, capture_output=True, timeout=timeout,  # noqa: S603
                          check=False)
    if done.returncode != 0:
        raise ReleaseUnavailable(f"{what} failed: {done.stderr.decode(errors='replace')[-2000:]}")
    return done


def install_release(version: str, commit: str, home: Path = RELEASES) -> Release:
    """The release `version` at `commit`, installed in a virtualenv of its own (cached)."""
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


__all__ = ["PREVIOUS", "RELEASES", "Release", "ReleaseUnavailable", "install_release"]
