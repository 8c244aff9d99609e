"""Rule 13: a wait keeps the version of its definition it parked on; only MIGRATE moves it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from streams import core
from streams.definitions import load_definitions
from tests.core.core_harness import DAY, DEFINITIONS, HOUR, Run
from tests.core.picking import actions, the_reject

pytestmark = [pytest.mark.rule13]

OLD = DEFINITIONS["expense-approval"]
NEW = dataclasses.replace(
    OLD, version="v2",
    stages=(dataclasses.replace(OLD.stages[0], reminder=core.ReminderPolicy(DAY, 5),
                                deadline_ms=10 * DAY),))


def _set(*kept: core.WaitDefinition, newest: core.WaitDefinition = NEW) -> core.DefinitionSet:
    others = {n: d for n, d in DEFINITIONS.items() if n != newest.name}
    return core.DefinitionSet({**others, newest.name: newest}, kept)


def test_a_wait_records_the_version_it_parks_on_and_new_waits_take_the_newest() -> None:
    run = Run(DEFINITIONS)
    run.start()
    assert run.wait.definition_version == OLD.version != ""
    newer = Run(_set(OLD))
    newer.start()
    assert newer.wait.definition_version == "v2"


def test_a_parked_wait_goes_on_with_its_own_version_after_a_newer_one_is_loaded() -> None:
    run = Run(DEFINITIONS)
    run.start()
    run.definitions = _set(OLD)  # a worker restarted with an edited file
    for _ in range(2):
        assert actions(run.fire(core.TimerKind.REMINDER), core.ActionKind.SEND_REMINDER)
    assert core.TimerKind.REMINDER not in {t.kind for t in run.wait.timers}  # limit 2, not 5
    assert run.due(core.TimerKind.DEADLINE) == run.wait.parked_at + 3 * DAY


def test_a_wait_whose_version_is_not_loaded_is_refused_naming_it_and_keeps_its_timers() -> None:
    run = Run(DEFINITIONS)
    run.start()
    run.definitions = core.DefinitionSet({**DEFINITIONS, "expense-approval": NEW})  # OLD lost
    reject = the_reject(run.fire(core.TimerKind.REMINDER))
    assert reject.reason is core.RejectReason.UNKNOWN_DEFINITION
    assert f"version {OLD.version!r}" in reject.detail
    assert core.TimerKind.REMINDER in {t.kind for t in run.wait.timers}


def test_a_wait_parked_before_versions_follows_the_newest_of_its_name() -> None:
    run = Run(DEFINITIONS)
    run.start()
    assert run.slot is not None
    run.slot = dataclasses.replace(
        run.slot, wait=dataclasses.replace(run.wait, definition_version=None))
    run.definitions = _set()
    for _ in range(2):
        run.fire(core.TimerKind.REMINDER)
    assert core.TimerKind.REMINDER in {t.kind for t in run.wait.timers}  # NEW's limit of 5


def test_migrate_moves_a_wait_to_the_newest_version_and_says_so_in_its_trace() -> None:
    run = Run(_set(OLD))
    run.definitions = DEFINITIONS
    run.start()
    run.definitions = _set(OLD)
    assert run.command(core.CommandKind.MIGRATE, reason="new policy") == ()
    assert run.wait.definition_version == "v2"
    entry = run.wait.trace[-1]
    assert entry.event == "migrated"
    assert entry.detail == (f"definition expense-approval version {OLD.version} -> v2: "
                            "new policy (by olga)")
    for _ in range(2):
        run.fire(core.TimerKind.REMINDER)
    assert core.TimerKind.REMINDER in {t.kind for t in run.wait.timers}  # the new limit, 5
    assert run.due(core.TimerKind.DEADLINE) == run.wait.parked_at + 3 * DAY  # armed stays armed


def test_migrate_to_a_named_version_and_back() -> None:
    run = Run(DEFINITIONS)
    run.start()
    run.definitions = _set(OLD)
    run.command(core.CommandKind.MIGRATE, version="v2")
    assert run.wait.definition_version == "v2"
    run.command(core.CommandKind.MIGRATE, version=OLD.version)
    assert run.wait.definition_version == OLD.version


def test_migrate_refusals_name_what_does_not_fit() -> None:
    run = Run(DEFINITIONS)
    run.start()
    run.definitions = _set(OLD)
    assert the_reject(run.command(core.CommandKind.MIGRATE, version="v9")).reason \
        is core.RejectReason.UNKNOWN_DEFINITION
    (same,) = run.command(core.CommandKind.MIGRATE, version=OLD.version)
    assert isinstance(same, core.Discard) and same.reason is core.DiscardReason.SAME_VERSION
    chained = dataclasses.replace(OLD, version="chained", variant=core.Variant.CHAINED,
                                  stages=(core.Stage("a", DAY), core.Stage("b", DAY)))
    run.definitions = _set(OLD, chained)
    reject = the_reject(run.command(core.CommandKind.MIGRATE, version="chained"))
    assert reject.reason is core.RejectReason.INVALID_COMMAND and "variant" in reject.detail
    no_levels = dataclasses.replace(NEW, version="flat", stages=(
        dataclasses.replace(NEW.stages[0], escalation=()),))
    run.definitions = _set(OLD, no_levels)
    run.fire(core.TimerKind.DEADLINE)  # the wait is at level 1 now
    reject = the_reject(run.command(core.CommandKind.MIGRATE, version="flat"))
    assert "escalation level 1" in reject.detail
    assert run.wait.definition_version == OLD.version


def test_migrate_refuses_an_ended_wait() -> None:
    run = Run(DEFINITIONS)
    run.start()
    run.reply()
    assert run.wait.status is core.WaitStatus.DONE
    run.definitions = _set(OLD)
    assert the_reject(run.command(core.CommandKind.MIGRATE)).reason is core.RejectReason.LATE


def test_migrate_rescues_a_wait_whose_version_was_lost() -> None:
    run = Run(DEFINITIONS)
    run.start()
    run.definitions = core.DefinitionSet({**DEFINITIONS, "expense-approval": NEW})
    assert run.command(core.CommandKind.MIGRATE) == ()
    run.advance(HOUR)
    assert actions(run.fire(core.TimerKind.REMINDER), core.ActionKind.SEND_REMINDER)


def test_the_definition_set_maps_names_to_the_newest_and_keeps_every_version() -> None:
    defs = _set(OLD)
    assert defs["expense-approval"] is NEW and len(defs) == len(DEFINITIONS)
    assert defs.version("expense-approval", OLD.version) is OLD
    assert core.definition_for(defs, "expense-approval", None) is NEW
    assert core.definition_for(defs, "expense-approval", OLD.version) is OLD
    assert core.definition_for(DEFINITIONS, "expense-approval", "other") is None
    assert [d.version for d in defs.kept() if d.name == "expense-approval"] == [
        "v2", OLD.version]


def _loaded(tmp_path: Path, text: str) -> core.WaitDefinition:
    folder = tmp_path / str(len(list(tmp_path.iterdir())))
    folder.mkdir()
    (folder / "approval.yaml").write_text(text)
    (d,) = load_definitions(folder).values()
    return d


def test_the_version_is_a_hash_of_what_the_definition_means_not_how_it_is_written(
        tmp_path: Path) -> None:
    base = _loaded(tmp_path, "variant: single-channel\ndeadline: P1D\nreminder: R2/PT12H\n")
    same = [
        "# a comment\nreminder: {limit: 2, every: PT12H}\ndeadline: PT24H\n"
        "variant: single-channel\n",
        "name: approval\nvariant: single-channel\ndeadline: P1D\nreminder: R2/PT12H\n"
        "invalid_reply: review\nearly_reply_ttl: PT10M\nretention: P7D\nchannels: []\n",
    ]
    for text in same:
        assert _loaded(tmp_path, text).version == base.version
    other = _loaded(tmp_path, "variant: single-channel\ndeadline: P2D\nreminder: R2/PT12H\n")
    assert other.version != base.version and len(base.version) == 12


def test_an_explicit_version_is_kept_as_written(tmp_path: Path) -> None:
    d = _loaded(tmp_path, "variant: single-channel\ndeadline: P1D\nversion: '2026-12'\n")
    assert d.version == "2026-12"


def test_shipped_definitions_have_versions_of_their_own() -> None:
    versions = [d.version for d in DEFINITIONS.values()]
    assert all(len(v) == 12 for v in versions) and len(set(versions)) == len(versions)
