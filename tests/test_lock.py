"""The lock files pin every dependency pyproject.toml declares, at a version it allows.

`make venv` installs requirements-dev.lock, and the Dockerfile
requirements.lock: a dependency added to pyproject.toml without `make lock`
would silently be missing from both.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]


def _pins(lock: str) -> dict[str, str]:
    text = (REPO / lock).read_text()
    return {canonicalize_name(name): version
            for name, version in re.findall(r"^([A-Za-z0-9_.\-]+)==([^\s;\\]+)", text, re.M)}


def _declared(extra: str | None) -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names = project["dependencies"] + (project["optional-dependencies"][extra] if extra else [])
    return [Requirement(r) for r in names]


def test_the_runtime_lock_pins_every_dependency_at_a_version_pyproject_allows() -> None:
    pins = _pins("requirements.lock")
    for req in _declared(None):
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is not in requirements.lock: run `make lock`"
        assert req.specifier.contains(pins[name]), f"{req.name}=={pins[name]} vs {req}"


def test_the_dev_lock_pins_the_dev_tools_and_the_runtime_at_the_same_versions() -> None:
    runtime, dev = _pins("requirements.lock"), _pins("requirements-dev.lock")
    for req in _declared("dev"):
        name = canonicalize_name(req.name)
        assert name in dev, f"{req.name} is not in requirements-dev.lock: run `make lock`"
        assert req.specifier.contains(dev[name]), f"{req.name}=={dev[name]} vs {req}"
    assert {n: v for n, v in dev.items() if n in runtime} == runtime


def test_the_releases_the_worker_accepts_are_the_locked_ones() -> None:
    from streams.frame.versions import CHECKED

    pins = _pins("requirements.lock")
    for package, versions in CHECKED.items():
        assert pins[canonicalize_name(package)] in versions
