"""`xwait definitions export NAME --bpmn` and `definitions import FILE.bpmn`, as users run them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from streams.cli import main
from streams.config import REPO_ROOT
from streams.definitions import load_definition

WAITS = REPO_ROOT / "topology" / "waits"


def test_export_then_import_gives_back_the_definition_a_worker_loads(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bpmn, back = tmp_path / "expense.bpmn", tmp_path / "expense.yaml"
    assert main(["definitions", "export", "expense-approval", "--bpmn", "-o", str(bpmn)]) == 0
    assert "wrote" in capsys.readouterr().err
    text = bpmn.read_text()
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>')
    assert "bpmndi:BPMNDiagram" in text and 'id="sla_deadline"' in text
    assert main(["definitions", "import", str(bpmn), "-o", str(back)]) == 0
    original = load_definition(WAITS / "expense-approval.yaml")
    assert replace(load_definition(back), source="") == replace(original, source="")


def test_export_takes_a_yaml_path_and_prints_to_stdout(
        capsys: pytest.CaptureFixture[str]) -> None:
    path = REPO_ROOT / "tests" / "e2e" / "waits" / "fast-probe.yaml"
    assert main(["definitions", "export", str(path), "--bpmn"]) == 0
    out = capsys.readouterr().out
    assert 'id="poll_timer"' in out and 'xwait:deadline="PT6S"' in out


def test_export_without_bpmn_writes_the_yaml_with_every_default_spelled_out(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["definitions", "export", "first-valid"]) == 0
    out = capsys.readouterr().out
    assert "invalid_reply: review" in out and "retention: P7D" in out
    assert "parties: [carrier-a, carrier-b, carrier-c]" in out


def test_export_of_an_unknown_name_is_a_usage_error(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["definitions", "export", "no-such-wait", "--bpmn"]) == 2
    err = capsys.readouterr().err
    assert "'no-such-wait'" in err and "expense-approval" in err


def test_import_refuses_a_broken_shape_naming_the_node(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bpmn = tmp_path / "race.bpmn"
    assert main(["definitions", "export", str(REPO_ROOT / "tests" / "e2e" / "waits" /
                                              "race.yaml"), "--bpmn", "-o", str(bpmn)]) == 0
    text = bpmn.read_text().replace('name="Escalated"', "")
    bpmn.write_text(text)
    out = tmp_path / "race.yaml"
    assert main(["definitions", "import", str(bpmn), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "refused" in err and "'end_escalated'" in err and "has no name" in err
    assert not out.exists()


def test_import_names_the_definition_and_refuses_what_the_loader_refuses(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bpmn = tmp_path / "probe.bpmn"
    assert main(["definitions", "export", "probe", "--bpmn", "-o", str(bpmn)]) == 0
    assert main(["definitions", "import", str(bpmn), "--name", "nightly-probe"]) == 0
    assert "name: nightly-probe" in capsys.readouterr().out
    assert main(["definitions", "import", str(bpmn), "--name", "bad~name"]) == 1
    assert "field 'name'" in capsys.readouterr().err
    assert main(["definitions", "import", str(tmp_path / "missing.bpmn")]) == 2
