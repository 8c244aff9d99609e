"""Definitions load into frozen values; a wrong one is refused naming file, field, expectation."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from streams import core
from streams.definitions import load_definitions
from tests.core.core_harness import DAY, DEFINITIONS, HOUR, MINUTE

BASE = """\
variant: single-channel
deadline: P3D
"""


def _load(tmp_path: Path, text: str, name: str = "w.yaml") -> None:
    (tmp_path / name).write_text(text)
    load_definitions(tmp_path)


def test_shipped_examples_load_with_the_durations_of_the_issue() -> None:
    assert set(DEFINITIONS) == {"expense-approval", "vendor-quote", "first-valid", "probe",
                                "two-stage-approval", "demo-approval"}
    expense = DEFINITIONS["expense-approval"]
    (stage,) = expense.stages
    assert expense.variant is core.Variant.SINGLE_CHANNEL
    assert stage.reminder == core.ReminderPolicy(interval_ms=DAY, limit=2)
    assert stage.deadline_ms == 3 * DAY
    assert stage.escalation == (core.EscalationLevel(target="director", deadline_ms=12 * HOUR),)
    assert DEFINITIONS["vendor-quote"].channels == ("email", "webhook", "portal")
    assert DEFINITIONS["vendor-quote"].stages[0].reminder == core.ReminderPolicy(8 * HOUR, 3)
    assert len(DEFINITIONS["first-valid"].parties) == 3
    assert DEFINITIONS["probe"].poll_interval_ms == 5 * MINUTE
    assert DEFINITIONS["probe"].invalid_reply is core.InvalidReplyRoute.ESCALATE
    assert [s.name for s in DEFINITIONS["two-stage-approval"].stages] == ["manager", "finance"]


def test_definitions_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFINITIONS["probe"].name = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("text", "field", "expected"),
    [
        (BASE.replace("P3D", "three days"), "deadline", "ISO 8601 duration"),
        (BASE.replace("P3D", "P1M"), "deadline", "weeks, days, hours"),
        (BASE.replace("P3D", "PT0S"), "deadline", "positive"),
        ("variant: single-channel\n", "deadline", "ISO 8601 duration"),
        (BASE.replace("single-channel", "carrier-pigeon"), "variant", "one of"),
        (BASE + "reminder: R0/PT1H\n", "reminder", "cycle"),
        (BASE + "reminder: {every: PT1H, limit: 0}\n", "reminder.limit", "whole number"),
        (BASE + "reminder: {every: PT1H, limit: 2, jitter: 1}\n", "reminder.jitter", "fields"),
        (BASE + "escalation: [{target: boss}]\n", "escalation[0].deadline", "ISO 8601"),
        (BASE + "invalid_reply: ignore\n", "invalid_reply", "review"),
        (BASE + "response_schema: {type: 12}\n", "response_schema/type", "valid JSON Schema"),
        (BASE + "dedline: P1D\n", "dedline", "one of the fields"),
        (BASE + "poll: PT5M\n", "poll", "probe"),
        (BASE + "channels: [a, b]\n", "channels", "at most one"),
        ("variant: multi-channel\ndeadline: P1D\nchannels: [email]\n", "channels", "at least two"),
        ("variant: probe\ndeadline: PT2H\n", "poll", "ISO 8601"),
        ("variant: chained\ndeadline: P1D\n", "deadline", "per-stage"),
        ("variant: chained\nstages: [{name: a, deadline: P1D}]\n", "stages", "at least two"),
        ("variant: chained\nstages: [{name: a, deadline: P1D}, {name: b}]\n",
         "stages[1].deadline", "ISO 8601"),
        ("- just\n- a list\n", "(document)", "mapping"),
        (BASE + "on_send_failure: {retries: 3}\n", "on_send_failure.then", "one of"),
        (BASE + "on_send_failure: {retries: -1, then: review}\n", "on_send_failure.retries",
         "whole number"),
        (BASE + "on_send_failure: {retries: 101, then: review}\n", "on_send_failure.retries",
         "from 0 to 100"),
        (BASE + "on_send_failure: {retries: 1, backoff: soon, then: review}\n",
         "on_send_failure.backoff", "ISO 8601"),
        (BASE + "on_send_failure: {then: escalate, jitter: 1}\n", "on_send_failure.jitter",
         "fields"),
        (BASE + "on_send_failure: escalate\n", "on_send_failure", "mapping"),
        (BASE + "version: a@b\n", "version", "without '@'"),
        (BASE + "version: ''\n", "version", "non-empty"),
        ("variant: [unclosed\n", "(document)", "YAML"),
    ],
)
def test_wrong_definition_is_refused_naming_file_field_and_expectation(
    tmp_path: Path, text: str, field: str, expected: str
) -> None:
    with pytest.raises(core.DefinitionError) as caught:
        _load(tmp_path, text)
    error = caught.value
    assert isinstance(error, core.XwaitError)
    assert error.file.endswith("w.yaml") and error.field == field
    assert expected in error.expected
    assert str(error).startswith(f"{error.file}: field '{field}': Expected ")
    assert ", but " in str(error)


def test_two_files_defining_the_same_name_are_refused(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(BASE + "name: same\n")
    (tmp_path / "b.yaml").write_text(BASE + "name: same\n")
    with pytest.raises(core.DefinitionError, match="also defined in"):
        load_definitions(tmp_path)


def test_name_defaults_to_the_file_name_and_cycle_reminders_are_accepted(tmp_path: Path) -> None:
    (tmp_path / "nudge.yaml").write_text(BASE + "reminder: R3/PT1H\n")
    (definition,) = load_definitions(tmp_path).values()
    assert definition.name == "nudge"
    assert definition.stages[0].reminder == core.ReminderPolicy(interval_ms=HOUR, limit=3)


def test_missing_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(core.DefinitionError, match="does not exist"):
        load_definitions(tmp_path / "nope")


def test_a_send_failure_policy_loads_with_a_default_backoff(tmp_path: Path) -> None:
    (tmp_path / "w.yaml").write_text(BASE + "on_send_failure: {retries: 3, then: review}\n")
    (d,) = load_definitions(tmp_path).values()
    assert d.on_send_failure == core.SendFailurePolicy(3, MINUTE, core.SendFailureRoute.REVIEW)
