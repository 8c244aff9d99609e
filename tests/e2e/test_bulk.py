"""Bulk operations through the real CLI against a real worker and broker: the dry run's
count, exactly the selected waits commanded, a run killed midway and run again, refusals
counted, and the worker taking one operation's command once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from streams.cli import main
from streams.client import XwaitClient
from streams.config import Settings
from streams.core.operations import carries
from tests.e2e.harness import XWAIT, Watcher, WorkerProcess, new_key, status, until_status
from tests.records import end_offsets

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.rule9]

Run = Callable[..., tuple[int, str, str]]


def _flags(e2e: Settings, worker: WorkerProcess) -> list[str]:
    return ["--bootstrap", e2e.bootstrap, "--prefix", e2e.topic_prefix, "--topology",
            str(e2e.topology), "--partitions", str(e2e.partitions), "--console", worker.url]


@pytest.fixture
def xwait(e2e: Settings, worker: WorkerProcess, capsys: pytest.CaptureFixture[str]) -> Run:
    """Run `xwait ARGS` in this process: (exit code, stdout, stderr)."""
    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main([*args, *_flags(e2e, worker)])
        out, err = capsys.readouterr()
        return code, out, err
    return run


def _park(client: XwaitClient, worker: WorkerProcess, count: int, definition: str = "slow-approval",
          **fields: Any) -> list[str]:
    keys = [new_key() for _ in range(count)]
    for key in keys:
        client.start_wait(definition, correlation_key=key, **fields)
    for key in keys:
        until_status(worker, key, lambda code, body: body.get("state") == "parked",
                     f"{key} parked")
    return keys


def _wait(worker: WorkerProcess, key: str) -> dict[str, Any]:
    code, body = status(worker, key)
    assert code == 200, (key, code, body)
    return body


def _marks(wait: dict[str, Any], operation: str) -> list[dict[str, Any]]:
    return [e for e in wait["trace"] if carries((e["detail"],), operation)]


def _marked(worker: WorkerProcess, key: str, operation: str) -> dict[str, Any]:
    """The wait once its trace carries the operation.  That a command was applied is
    told by an output (its receipt, or a duplicate's refusal), which under at_least_once
    can be out before the state of its batch is stored, and the console shows what is
    stored: read until it is there."""
    return until_status(worker, key, lambda code, body: code == 200 and bool(
        _marks(body, operation)), f"the mark of operation {operation} on {key}")


def _commands_written(settings: Settings) -> int:
    """Records on the commands topic so far (its partitions' end offsets, summed)."""
    return sum(end_offsets(settings, "commands"))


@pytest.fixture
def client(e2e: Settings) -> Any:
    with XwaitClient(e2e, check_keys=False) as xw:
        yield xw


def test_a_dry_run_counts_exactly_the_waits_the_filter_selects_and_sends_nothing(
    e2e: Settings, worker: WorkerProcess, client: XwaitClient, xwait: Run,
) -> None:
    tenant = f"dry-{uuid.uuid4().hex[:8]}"
    chosen = _park(client, worker, 5, tenant=tenant)
    _park(client, worker, 2, "fast-quote", tenant=tenant)  # another definition
    _park(client, worker, 1, tenant=f"{tenant}-other")  # another tenant
    before = _commands_written(e2e)

    where = f"definition=slow-approval,tenant={tenant},state=parked"
    code, out, _ = xwait("cancel", "--where", where, "--reason", "cleanup", "--dry-run")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith(f"5 wait(s) match {where}: cancel would take about"), out
    assert {line.split()[0] for line in lines[2:7]} == set(chosen)

    code, out, _ = xwait("cancel", "--where", where, "--reason", "cleanup", "--dry-run",
                         "--json")
    answer = json.loads(out)
    assert (code, answer["count"], answer["dryRun"]) == (0, 5, True)
    assert {w["key"] for w in answer["sample"]} == set(chosen)
    assert answer["filter"] == {"definition": "slow-approval", "tenant": tenant,
                                "state": "parked"}
    assert _commands_written(e2e) == before, "a dry run sends nothing"
    assert all(_wait(worker, k)["state"] == "parked" for k in chosen)


def test_cancel_where_cancels_exactly_those_waits_and_names_operator_and_operation(
    e2e: Settings, worker: WorkerProcess, client: XwaitClient, watcher: Watcher, xwait: Run,
) -> None:
    tenant = f"can-{uuid.uuid4().hex[:8]}"
    chosen = _park(client, worker, 4, tenant=tenant)
    paused = _park(client, worker, 1, tenant=tenant)[0]
    client.suspend(paused, "audit", operator="ann", force=True)
    until_status(worker, paused, lambda c, b: b.get("state") == "suspended", "suspended")
    others = _park(client, worker, 2, "fast-quote", tenant=tenant)
    operation = f"cleanup-{uuid.uuid4().hex[:6]}"

    where = f"definition=slow-approval,tenant={tenant},state=parked"
    code, out, err = xwait("cancel", "--where", where, "--reason", "duplicates",
                           "--operator", "olga", "--operation", operation, "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert (summary["selected"], summary["applied"], summary["skipped"], summary["refused"],
            summary["complete"]) == (4, 4, 0, 0, True)
    assert f"operation {operation}: cancel 4 wait(s)" in err
    for key in chosen:
        outcome = watcher.outcome(key)
        assert (outcome["outcome"], outcome["operator"], outcome["operatorReason"]) == (
            "CANCELLED", "olga", "duplicates")
        [entry] = [t for t in outcome["trace"] if t["event"] == "cancelled"]
        assert entry["detail"] == f"duplicates (by olga, operation {operation})"
    assert _wait(worker, paused)["state"] == "suspended", "not selected: suspended"
    assert all(_wait(worker, k)["state"] == "parked" for k in others), "not selected: definition"

    # Run again, it finds nothing left to do.
    code, out, _ = xwait("cancel", "--where", where, "--reason", "duplicates",
                         "--operation", operation, "--json")
    assert (code, json.loads(out)["selected"]) == (0, 0)


def test_a_run_killed_midway_goes_on_when_run_again_and_commands_each_wait_once(
    e2e: Settings, worker: WorkerProcess, client: XwaitClient, xwait: Run,
) -> None:
    """reschedule --by PT1H is not idempotent: a wait commanded twice would be two hours
    later.  The CLI is killed (SIGKILL) once a few waits carry the operation's mark."""
    tenant = f"kill-{uuid.uuid4().hex[:8]}"
    keys = _park(client, worker, 12, tenant=tenant)
    due = {k: _wait(worker, k)["nextDueAt"] for k in keys}
    operation = f"later-{uuid.uuid4().hex[:6]}"
    args = ["reschedule", "--where", f"tenant={tenant}", "--by", "PT1H", "--reason", "holiday",
            "--operation", operation]
    cli = subprocess.Popen([str(XWAIT), *args, "--rate", "2", *_flags(e2e, worker)],  # noqa: S603
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, env={**os.environ})
    try:
        deadline = time.monotonic() + 120
        marked: list[str] = []
        while len(marked) < 3:
            assert time.monotonic() < deadline, "the CLI did not get going"
            assert cli.poll() is None, cli.communicate()
            marked = [k for k in keys if _marks(_wait(worker, k), operation)]
            time.sleep(0.1)
        cli.send_signal(signal.SIGKILL)
    finally:
        cli.kill()  # a no-op once killed; reading to the end closes the pipes
        cli.communicate(timeout=30)
    assert cli.returncode == -signal.SIGKILL
    done_first = [k for k in keys if _marks(_wait(worker, k), operation)]
    assert 3 <= len(done_first) < len(keys), "killed midway"

    code, out, err = xwait(*args, "--rate", "50", "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["selected"] == 12 and summary["complete"]
    assert summary["skippedBy"].get("already done by this operation", 0) >= len(done_first)
    assert summary["applied"] + summary["skipped"] == 12
    for key in keys:
        wait = _marked(worker, key, operation)
        assert len(_marks(wait, operation)) == 1, wait["trace"]
        [deadline_timer] = [t for t in wait["timers"] if t["kind"] == "deadline"]
        assert deadline_timer["dueAt"] == due[key] + 3_600_000, "moved once, by one hour"


def test_refusals_are_counted_with_the_worker_s_reason(
    e2e: Settings, worker: WorkerProcess, client: XwaitClient, xwait: Run,
) -> None:
    tenant = f"ref-{uuid.uuid4().hex[:8]}"
    keys = _park(client, worker, 3, tenant=tenant)
    client.reply(keys[0], {"decision": "perhaps"}, channel="portal", tenant=tenant)
    until_status(worker, keys[0], lambda c, b: b.get("state") == "in_review", "in review")

    code, out, err = xwait("reschedule", "--where", f"tenant={tenant}", "--deadline", "PT2H",
                           "--reason", "more time", "--json")
    assert code == 1, err
    summary = json.loads(out)
    assert (summary["applied"], summary["refused"], summary["complete"]) == (2, 1, False)
    [refusal] = summary["refusals"]
    assert (refusal["key"], refusal["reason"]) == (keys[0], "invalid_command")
    assert "in review" in refusal["detail"]
    assert "--operation" in err, "the message says how to go on"


def test_the_worker_takes_one_operation_s_command_once_however_often_it_comes(
    e2e: Settings, worker: WorkerProcess, client: XwaitClient, watcher: Watcher,
) -> None:
    """What a re-run sends for a command the killed run had left in flight."""
    [key] = _park(client, worker, 1)
    due = _wait(worker, key)["nextDueAt"]
    operation = f"twice-{uuid.uuid4().hex[:6]}"
    for _ in range(2):
        client.reschedule(key, move_by="PT1H", operator="olga", operation=operation,
                          force=True)
    seen = watcher.until(lambda s: bool(s.for_key("rejected", key)), 30, "the repeat refused")
    [rejected] = seen.for_key("rejected", key)
    assert rejected["reason"] == "duplicate" and operation in rejected["detail"]
    wait = _marked(worker, key, operation)
    assert len(_marks(wait, operation)) == 1
    assert wait["nextDueAt"] == due + 3_600_000


@pytest.mark.parametrize(("args", "says"), [
    (["cancel", "--where", "owner=ann", "--reason", "r"], "unknown field 'owner'"),
    (["cancel", "--where", "parkedBefore=last week", "--reason", "r"], "parkedBefore must be"),
    (["cancel", "some-key", "--where", "tenant=a", "--reason", "r"], "not both"),
    (["cancel", "--reason", "r"], "give the KEY of one wait, or --where FILTER"),
    (["cancel", "some-key", "--reason", "r", "--dry-run"], "only go with --where"),
    (["migrate", "--where", "tenant=a"], "needs --to VERSION"),
    (["migrate", "--where", "definition=slow-approval", "--to", "deadbeef0000"],
     "unknown version 'deadbeef0000' of definition 'slow-approval'"),
])
def test_what_an_operation_cannot_use_exits_2_and_sends_nothing(
    e2e: Settings, worker: WorkerProcess, client: XwaitClient, xwait: Run, args: list[str],
    says: str,
) -> None:
    if args[0] == "migrate" and "--to" in args:
        _park(client, worker, 1)  # a wait of the definition, so the selection names it
    before = _commands_written(e2e)
    code, _, err = xwait(*args)
    assert code == 2, err
    assert says in err, err
    assert _commands_written(e2e) == before


def test_no_worker_answering_exits_3(e2e: Settings, capsys: pytest.CaptureFixture[str]
                                     ) -> None:
    code = main(["cancel", "--where", "tenant=a", "--reason", "r", "--bootstrap",
                 e2e.bootstrap, "--prefix", e2e.topic_prefix, "--console",
                 "http://127.0.0.1:9"])
    assert code == 3
    assert "no xwait worker answered" in capsys.readouterr().err
