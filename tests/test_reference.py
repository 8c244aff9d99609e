"""The reference pages are generated from the code, complete and current.

docs/reference/ is written by `make reference` (scripts/reference.py) from the
settings class, the CLI's parser, the schemas, the reason enums, the web
routes and the metrics registries; a page edited by hand, or code changed
without regenerating, fails here.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGES = REPO / "docs" / "reference"


@pytest.fixture
def generator(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """scripts/reference.py, with its pages (scripts/refpages) importable as when it runs."""
    monkeypatch.syspath_prepend(str(REPO / "scripts"))
    spec = importlib.util.spec_from_file_location("reference", REPO / "scripts" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rows(page: str, first: str) -> list[list[str]]:
    """The rows of every table of `page` whose header starts with `first`."""
    rows, inside = [], False
    for line in (PAGES / page).read_text().splitlines():
        if line.startswith(f"| {first} |"):
            inside = True
            continue
        if inside and line.startswith("| ---"):
            continue
        if inside and line.startswith("| "):
            rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]])
        else:
            inside = False
    return rows


def test_the_checked_in_reference_pages_are_what_the_code_gives(
        generator: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    code = generator.main(["--check"])
    assert code == 0, capsys.readouterr().err  # "out of date: ...: run `make reference`"


def test_a_page_edited_by_hand_is_found_out(tmp_path: Path, generator: ModuleType,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    for name in generator.PAGES:
        (tmp_path / name).write_text((PAGES / name).read_text())
    (tmp_path / "cli.md").write_text((PAGES / "cli.md").read_text() + "\nan edit\n")
    generator.OUT = tmp_path  # type: ignore[attr-defined]
    assert generator.main(["--check"]) == 1
    assert "docs/reference/cli.md: run `make reference`" in capsys.readouterr().err


def test_every_setting_the_code_reads_is_on_the_configuration_page_with_a_meaning() -> None:
    code = "".join(p.read_text() for p in (REPO / "streams").rglob("*.py"))
    code += (REPO / "scripts" / "kafka").read_text() + (REPO / "scripts" / "registry").read_text()
    code += "".join(p.read_text() for p in (REPO / "scripts" / "kafkactl").glob("*.py"))
    variables = set(re.findall(r'"(XWAIT_[A-Z_]+)"', code))
    assert len(variables) > 40, "the pattern finds the settings"
    page = (PAGES / "configuration.md").read_text()
    assert sorted(v for v in variables if v not in page) == []
    rows = _rows("configuration.md", "variable")
    assert len(rows) > 35
    assert [r[0] for r in rows if not r[-1]] == [], "a setting without a meaning"


def test_every_field_of_every_schema_is_under_its_record_with_a_meaning() -> None:
    page = (PAGES / "contract.md").read_text()
    for path in sorted((REPO / "schemas").glob("*.avsc")):
        schema = json.loads(path.read_text())
        section = page.split(f"\n### {schema['name']}\n", 1)
        assert len(section) == 2, f"no section for {schema['name']}"
        body = section[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
        for field in schema["fields"]:
            [row] = [r for r in _rows_of(body) if r[0] == f"`{field['name']}`"]
            assert row[-1], f"{schema['name']}.{field['name']} has no meaning"


def _rows_of(text: str) -> list[list[str]]:
    return [[c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            for line in text.splitlines() if line.startswith("| `")]


def test_every_rejection_and_outcome_reason_the_code_names_is_listed_with_a_meaning() -> None:
    from streams.core.effects import OutcomeReason, RejectReason
    from streams.processor.model import ProcessorReject

    rejections = {r[0].strip("`"): r[1] for r in _rows("contract.md", "reason") if len(r) == 3}
    assert set(rejections) == {r.value for r in (*RejectReason, *ProcessorReject)}
    assert all(rejections.values())
    outcomes = {r[0].strip("`"): r[1] for r in _rows("contract.md", "reason") if len(r) == 2}
    assert set(outcomes) == {r.value for r in OutcomeReason}
    assert all(outcomes.values())


def test_the_outcome_schema_names_exactly_the_reasons_the_core_names() -> None:
    from streams.core.effects import OutcomeReason

    schema = json.loads((REPO / "schemas" / "Outcome.avsc").read_text())
    [reason] = [f for f in schema["fields"] if f["name"] == "reason"]
    values = {r.value for r in OutcomeReason}
    # before: the doc named reply_accepted and escalation_exhausted, which never existed
    assert set(re.findall(r"\b[a-z]+_[a-z_]+\b", reason["doc"])) <= values
    assert all(re.search(rf"\b{v}\b", reason["doc"]) for v in values)


def test_every_command_and_flag_of_the_parser_is_on_the_cli_page(generator: ModuleType) -> None:
    from streams.cli import build_parser

    page = (PAGES / "cli.md").read_text()
    for words, parser in generator.commands(build_parser()):
        assert f"### xwait {words}\n" in page
        for action in parser._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}" in page or f", {flag}" in page, f"xwait {words} {flag}"


def test_every_route_and_metric_has_a_description() -> None:
    routes = _rows("web-api.md", "method and path")
    assert {"`GET /healthz`", "`GET /readyz`", "`GET /metrics`"} <= {r[0] for r in routes}
    assert all(r[1] for r in routes)
    metrics = _rows("metrics.md", "metric")
    assert any(r[0].startswith("`xwait_parked_waits") for r in metrics)
    assert all(r[2] for r in metrics)
