"""The README tells the truth about the contract and the configuration."""

from __future__ import annotations

import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text()


def test_every_field_of_every_schema_is_documented_under_its_record() -> None:
    for path in sorted((REPO / "schemas").glob("*.avsc")):
        schema = json.loads(path.read_text())
        section = README.split(f"**`{schema['name']}`**", 1)
        assert len(section) == 2, f"README has no section for {schema['name']}"
        body = section[1].split("**`", 1)[0]
        for field in schema["fields"]:
            assert f"`{field['name']}`" in body, f"{schema['name']}.{field['name']} undocumented"


def test_every_setting_the_code_reads_is_documented() -> None:
    code = "".join(p.read_text() for p in (REPO / "streams").rglob("*.py"))
    code += (REPO / "scripts" / "kafka").read_text()
    code += (REPO / "scripts" / "registry").read_text()
    variables = set(re.findall(r'"(XWAIT_[A-Z_]+)"', code))
    assert variables, "the pattern finds the settings"
    missing = sorted(v for v in variables if v not in README)
    assert missing == []


def test_the_two_commands_are_make_targets_and_ci_runs_the_test_command() -> None:
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^demo:", makefile, re.M) and re.search(r"^test:", makefile, re.M)
    assert "make demo" in README and "make test" in README
    ci = [line for line in (REPO / ".ci" / "run").read_text().splitlines()
          if line and not line.startswith(("#", "set ", "cd "))]
    assert ci == ["make test"]


def test_the_outcome_reasons_documented_are_exactly_the_ones_the_core_names() -> None:
    from streams.core.effects import OutcomeReason

    schema = json.loads((REPO / "schemas" / "Outcome.avsc").read_text())
    [reason] = [f for f in schema["fields"] if f["name"] == "reason"]
    values = {r.value for r in OutcomeReason}
    # before: the doc named reply_accepted and escalation_exhausted, which never existed
    assert set(re.findall(r"\b[a-z]+_[a-z_]+\b", reason["doc"])) <= values
    assert all(re.search(rf"\b{v}\b", reason["doc"]) for v in values)
    listed = README.split("Outcome reasons (`Outcome.reason`):", 1)[1].split("\n\n", 1)[0]
    assert set(re.findall(r"`([a-z_]+)`", listed)) == values


def test_every_rejection_reason_the_worker_publishes_is_in_the_readmes_list() -> None:
    from streams.core.effects import RejectReason
    from streams.processor.model import ProcessorReject

    listed = README.split("Rejection reasons (`Rejected.reason`):", 1)[1].split("\n\n", 1)[0]
    named = set(re.findall(r"`([a-z_]+)`", listed))
    missing = sorted({r.value for r in (*RejectReason, *ProcessorReject)} - named)
    assert missing == []  # issue 31: invalid_key (a key with a NUL byte) was missing
