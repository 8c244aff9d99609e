"""`xwait definitions`: list and validate topology/waits."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from streams.cli import main
from streams.config import REPO_ROOT


def test_definitions_lists_every_shipped_definition_with_variant_channels_and_deadline(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["definitions"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["NAME", "VERSION", "VARIANT", "CHANNELS", "DEADLINE"]
    files = lines[1:lines.index("")]
    rows = {line.split()[0]: line.split(None, 4) for line in files}
    version = rows["expense-approval"].pop(1)
    assert len(version) == 12
    assert rows["expense-approval"] == ["expense-approval", "single-channel", "portal", "P3D"]
    assert rows["vendor-quote"][3:] == ["email,webhook,portal", "P2D"]
    assert rows["probe"][3:] == ["(any)", "PT2H"]
    assert rows["two-stage-approval"][4] == "manager P2D, finance P1D"
    # No worker answers here: the versions in use are not known, and it says so.
    assert lines[-1].startswith("versions in use: unknown (no xwait worker answered")


def test_definitions_json_gives_stages_reminders_and_escalation(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["definitions", "--json"]) == 0
    found = {d["name"]: d for d in json.loads(capsys.readouterr().out)["definitions"]}
    expense = found["expense-approval"]
    assert expense["variant"] == "single-channel" and expense["deadline"] == "P3D"
    assert expense["stages"][0]["reminder"] == {"every": "P1D", "limit": 2}
    assert expense["stages"][0]["escalation"] == [{"target": "director", "deadline": "PT12H"}]
    assert expense["earlyReplyTtl"] == "PT10M" and expense["retention"] == "P7D"
    assert expense["source"].endswith("expense-approval.yaml")
    assert found["first-valid"]["parties"] == ["carrier-a", "carrier-b", "carrier-c"]
    assert found["probe"]["poll"] == "PT5M"
    assert found["two-stage-approval"]["deadline"] is None
    assert [s["deadline"] for s in found["two-stage-approval"]["stages"]] == ["P2D", "P1D"]


def test_a_broken_definition_fails_with_exit_1_naming_file_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    waits = tmp_path / "waits"
    waits.mkdir()
    shutil.copy(REPO_ROOT / "topology" / "waits" / "probe.yaml", waits)
    (waits / "late.yaml").write_text("variant: single-channel\ndeadline: three days\n")
    assert main(["definitions", "--topology", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert str(waits / "late.yaml") in err and "field 'deadline'" in err


def test_an_empty_definition_folder_fails_with_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "waits").mkdir()
    assert main(["definitions", "--topology", str(tmp_path), "--json"]) == 1
    assert "no wait definitions" in capsys.readouterr().err
