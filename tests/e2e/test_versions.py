"""Rule 13 on the broker: an edited definition leaves parked waits on their version, a fresh
worker without the old file still decides them, `xwait definitions` counts waits by version,
removal is refused while waits follow it, and only `xwait migrate` moves a wait."""

from __future__ import annotations

import json
import shutil
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from streams.cli import main
from streams.client import XwaitClient
from streams.config import Settings
from tests.e2e.conftest import new_e2e
from tests.e2e.harness import Watcher, WorkerProcess
from tests.waiting import until

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.rule13]

# Version 1 takes replies on the portal; version 2 only by email (a portal reply goes to
# review), so which version decided a reply shows in the outcome.
V1 = """
variant: single-channel
channels: [portal]
deadline: PT5M
response_schema: {type: object, required: [decision]}
"""
V2 = V1.replace("channels: [portal]", "channels: [email]")
APPROVED = {"decision": "approved"}


@pytest.fixture(scope="module")
def e2e(kafka_bootstrap: str, e2e_folder: Path) -> Settings:
    s = new_e2e(kafka_bootstrap, e2e_folder, tag="ver")
    (s.topology / "waits" / "versioned.yaml").write_text(V1)
    return s


def _cli(settings: Settings, *args: str, console: str | None = None) -> list[str]:
    extra = ["--console", console] if console is not None else []
    return [*args, "--bootstrap", settings.bootstrap, "--prefix", settings.topic_prefix,
            "--topology", str(settings.topology), *extra]


def _topology(e2e: Settings, folder: Path, text: str | None) -> Settings:
    """The test topology with `versioned.yaml` as `text` (None: without it)."""
    shutil.copytree(e2e.topology, folder)
    target = folder / "waits" / "versioned.yaml"
    if text is None:
        target.unlink()
    else:
        target.write_text(text)
    return e2e.with_overrides(topology=folder)


def _definitions(capsys: pytest.CaptureFixture[str], settings: Settings,
                 console: str) -> dict[str, Any]:
    assert main(_cli(settings, "definitions", "--json", console=console)) == 0
    found: dict[str, Any] = json.loads(capsys.readouterr().out)
    return found


def _status(settings: Settings, key: str, console: str,
            capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["status", key, "--json", "--console", console]) == 0
    found: dict[str, Any] = json.loads(capsys.readouterr().out)
    return found


def _state_after(settings: Settings, key: str, console: str, was: str,
                 capsys: pytest.CaptureFixture[str]) -> str:
    """The wait's state once it is no longer `was` (a reply decided in a later batch than
    the one the test watched: busy round 19 read it still parked)."""
    return str(until(lambda: (state := _status(settings, key, console, capsys)["state"])
                     != was and state, f"{key} to be no longer {was}"))


def test_an_edit_leaves_parked_waits_on_their_version_until_an_operator_migrates_them(
    e2e: Settings, e2e_folder: Path, watcher: Watcher, capsys: pytest.CaptureFixture[str],
) -> None:
    first = WorkerProcess(e2e, e2e_folder, "v1").start()
    with XwaitClient(e2e, check_keys=False) as xw:
        old = [xw.start_wait("versioned") for _ in range(3)]
    for key in old:
        watcher.parked(key)
    v1 = _definitions(capsys, e2e, first.url)
    (row,) = [v for v in v1["inUse"]["versions"] if v["definition"] == "versioned"]
    assert row["following"] == 3 and len(row["newestOn"]) == 1
    version1 = row["version"]
    first.stop()

    # The definition is edited; the worker restarts on it (an empty disk: it restores).
    edited = _topology(e2e, e2e_folder / "topology-v2", V2)
    second = WorkerProcess(edited, e2e_folder, "v2").start()
    with XwaitClient(edited, check_keys=False) as xw:
        new = xw.start_wait("versioned")
        watcher.parked(new)
        xw.reply(old[0], APPROVED, channel="portal")  # version 1's channel
        xw.reply(new, APPROVED, channel="portal")     # not version 2's: review
    assert watcher.outcome(old[0])["reason"] == "reply_valid"
    assert watcher.outcome(old[0])["definitionVersion"] == version1
    assert _state_after(edited, new, second.url, "parked", capsys) == "in_review"

    shown = _definitions(capsys, edited, second.url)
    mine = {v["version"]: v for v in shown["inUse"]["versions"]
            if v["definition"] == "versioned"}
    version2 = next(d["version"] for d in shown["definitions"] if d["name"] == "versioned")
    assert version2 != version1
    assert mine[version1]["following"] == 2 and not mine[version1]["newestOn"]
    assert mine[version2]["following"] == 1 and mine[version2]["newestOn"]

    # Only an operator moves a wait; the move is in its trace, and version 2 decides now.
    assert main(_cli(edited, "migrate", old[1], "--reason", "email only now",
                     "--operator", "olga", "--force")) == 0
    capsys.readouterr()
    with XwaitClient(edited, check_keys=False) as xw:
        xw.reply(old[1], APPROVED, channel="email")
    outcome = watcher.outcome(old[1])
    assert (outcome["reason"], outcome["definitionVersion"]) == ("reply_valid", version2)
    migrated = [t for t in outcome["trace"] if t["event"] == "migrated"]
    assert migrated and migrated[0]["detail"] == (
        f"definition versioned version {version1} -> {version2}: email only now (by olga)")

    # Removing the definition is refused while waits still follow it, with the count.
    assert main(_cli(edited, "definitions", "remove", "versioned",
                     console=second.url)) == 1
    err = capsys.readouterr().err
    assert "2 waits not yet done still follow 'versioned'" in err
    assert f"version {version1}: 1" in err and f"version {version2}: 1" in err
    second.stop()

    # A fresh worker whose files no longer have the definition at all still decides the
    # wait parked on version 1: the version comes from <prefix>.definitions.
    gone = _topology(e2e, e2e_folder / "topology-gone", None)
    third = WorkerProcess(gone, e2e_folder, "gone").start()
    with XwaitClient(gone, check_keys=False) as xw:
        xw.reply(old[2], APPROVED, channel="portal")
        xw.cancel(new, "done testing", operator="olga")
    assert watcher.outcome(old[2])["reason"] == "reply_valid"
    assert watcher.outcome(new)["outcome"] == "CANCELLED"

    # No wait follows it now, and no worker loads it: it can be removed.
    assert main(_cli(gone, "definitions", "remove", "versioned", "--json",
                     console=third.url)) == 0
    removed = json.loads(capsys.readouterr().out)
    assert sorted(removed["versions"]) == sorted([version1, version2])

    # Its waits have all ended (kept until their retention): the removed definition
    # leaves the listing.  The other definitions, read back from the store by this
    # restarted worker, are still the newest of its files.
    deadline = time.monotonic() + 30
    while True:
        listed = _definitions(capsys, gone, third.url)
        names = {v["definition"] for v in listed["inUse"]["versions"]}
        if "versioned" not in names:
            break
        assert time.monotonic() < deadline, f"'versioned' still listed: {listed['inUse']}"
        time.sleep(0.3)
    files = {d["name"]: d["version"] for d in listed["definitions"]}
    newest = {v["definition"]: v["version"] for v in listed["inUse"]["versions"]
              if v["newestOn"] == [third.url]}
    assert newest == files
    assert main(_cli(gone, "definitions", console=third.url)) == 0
    text = capsys.readouterr().out.split("VERSIONS IN USE", 1)[1]
    assert "versioned" not in text
    rows = [line for line in text.splitlines()[2:] if line.strip()]
    assert rows and all(line.endswith("1 of 1 workers") for line in rows), rows
    third.stop()


def test_two_workers_started_with_different_files_each_keep_both_versions(
    e2e: Settings, e2e_folder: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    one = _topology(e2e, e2e_folder / "topology-one", V1.replace("PT5M", "PT6M"))
    two = _topology(e2e, e2e_folder / "topology-two", V2.replace("PT5M", "PT6M"))
    a = WorkerProcess(one, e2e_folder, "a").start()
    b = WorkerProcess(two, e2e_folder, "b")
    try:
        b.start()  # inside: a worker b that never got going must not leave a running
        # A rebalance of two members: at load 90 (two suites beside two CPU hogs) b still
        # owned nothing after 60 s, and the test is not about how long that takes.
        b.wait_until(lambda s: bool(s["ownedPartitions"]), 180, "owns no partition")
        shown = _definitions(capsys, one, a.url)
        newest = {w["worker"]: w["newest"]["versioned"] for w in shown["inUse"]["workers"]}
        assert len(newest) == 2 and len(set(newest.values())) == 2  # they disagree, openly
        versions = {v["version"] for v in shown["inUse"]["versions"]
                    if v["definition"] == "versioned" and v["newestOn"]}
        assert versions == set(newest.values())
        # ... and each keeps the other's: a wait of either is decided by both.
        for worker in (a, b):
            with urllib.request.urlopen(  # noqa: S310 - loopback test worker
                    f"{worker.url}/xwait/api/versions?local=1", timeout=5) as resp:
                local = json.loads(resp.read())
            kept = {v["version"] for v in local["versions"] if v["definition"] == "versioned"}
            assert set(newest.values()) <= kept
    finally:
        b.stop()
        a.stop()
