"""The faust-streaming and aiokafka releases this worker was checked with.

The worker uses only faust's public API, but it relies on behaviours a
release could change: that the assignor gives standbys for every
co-partitioned topic (not only tables' changelogs), that it reports each
worker's partitions of non-table topics (`external_topics_metadata`), that a
rebalance revokes before it assigns, that `App.on_stop` runs before the
consumer stops, and that aiokafka's `end_offsets` (faust's `highwaters`)
refreshes metadata that names a former leader, which its position reset
does not (`app.LeaderCheck`).  `tests/frame/test_faust_canary.py` checks
each of them; a worker refuses to start on a release they were not run
against, rather than lose a guarantee silently.  To allow a new release: run those tests
with it installed, then add it here and to requirements.lock.
"""

from __future__ import annotations

from importlib import metadata

from streams.errors import ConfigError

CHECKED: dict[str, frozenset[str]] = {
    "faust-streaming": frozenset({"0.15.3"}),
    "aiokafka": frozenset({"0.14.0"}),
}


def check(installed: dict[str, str] | None = None) -> None:
    """Raise `ConfigError` (one line) if an installed release was not checked."""
    for package, versions in CHECKED.items():
        version = (installed or {}).get(package) or _version(package)
        if version not in versions:
            raise ConfigError(
                f"Expected {package} {' or '.join(sorted(versions))} (the release xwait's "
                f"canary tests were run against), but {version or 'none'} is installed: "
                f"install from requirements.lock (`make venv`), or run "
                f"tests/frame/test_faust_canary.py against it and add it to "
                f"streams/frame/versions.py")


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


__all__ = ["CHECKED", "check"]
