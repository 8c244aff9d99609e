"""An earlier release of xwait, installed beside this checkout, to upgrade from.

`install_release` exports a commit of this repository (``git archive``, so
the checkout's own worktree list is left alone) into a folder of its own and
installs it in a virtualenv of its own, the way a user installed that
release: the package built from its sources (a wheel), its dependencies
from this checkout's ``requirements.lock`` (0.1.0 had no lock of its own;
its pyproject only sets lower bounds, which the lock meets - `pip check`
says so after the install).  The result is kept under ``.xwait/releases/``
and reused; a half-made one (no stamp) is made again.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from streams.config import REPO_ROOT

RELEASES = REPO_ROOT / ".xwait" / "releases"
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
    release = Release(version, commit, home / f"{version}-{commit[:7]}")
    stamp = release.home / ".installed"
    if stamp.exists() and release.xwait.exists():
        return release
    shutil.rmtree(release.home, ignore_errors=True)
    release.source.mkdir(parents=True)
    archive = _run(["git", "archive", "--format=tar", commit], f"git archive {commit}",  # noqa: S607
                   cwd=REPO_ROOT)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(release.source, filter="tar")
    venv = release.home / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], "making the virtualenv")
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
           "--disable-pip-version-check"]
    _run([*pip, "-r", str(REPO_ROOT / "requirements.lock")], "installing the dependencies")
    _run([*pip, "--no-deps", str(release.source)], f"installing xwait {version}")
    _run([str(venv / "bin" / "python"), "-m", "pip", "check"], "pip check")
    stamp.write_text(f"{version} {commit}\n")
    return release


__all__ = ["PREVIOUS", "RELEASES", "Release", "ReleaseUnavailable", "install_release"]
