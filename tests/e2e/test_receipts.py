"""`xwait reply KEY --wait` and the commands with `--wait` against a real worker: the
receipt printed, and the exit code that says it (streams/cli/__init__.py)."""

from __future__ import annotations

import json

import pytest

from streams.cli import main
from streams.client import Verdict, XwaitClient
from streams.config import Settings
from tests.e2e.harness import Watcher, WorkerProcess, new_key

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.rule2, pytest.mark.rule7]

APPROVED = '{"decision": "approved"}'


def _cli(e2e: Settings, *args: str) -> list[str]:
    return [*args, "--bootstrap", e2e.bootstrap, "--prefix", e2e.topic_prefix,
            "--topology", str(e2e.topology)]


def _reply(e2e: Settings, worker: WorkerProcess, key: str, *extra: str,
           data: str = APPROVED) -> int:
    return main(_cli(e2e, "reply", key, "--channel", "portal", "--data", data, "--wait",
                     "--json", "--console", worker.url, *extra))


def _receipt(capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    out = json.loads(capsys.readouterr().out)
    receipt: dict[str, object] = out["receipt"]
    return receipt


def _parked(e2e: Settings, watcher: Watcher, definition: str = "slow-approval",
            **fields: object) -> str:
    with XwaitClient(e2e) as xw:
        key = xw.start_wait(definition, **fields)  # type: ignore[arg-type]
    watcher.parked(key)
    return str(key)


def test_a_winning_reply_prints_won_and_exits_0(
    e2e: Settings, worker: WorkerProcess, watcher: Watcher,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """How fast the receipt comes is a figure (docs/guides/receipts.md), not asserted
    here: a machine beside other jobs took 5.5 s where an idle one takes 0.15-0.45 s."""
    key = _parked(e2e, watcher)
    assert main(_cli(e2e, "reply", key, "--channel", "portal", "--data", APPROVED,
                     "--wait", "--console", worker.url)) == 0
    line = capsys.readouterr().out
    assert line.startswith(f"won  reply  key={key}  decided=") and \
        "outcome=RECEIVED (reply_valid)" in line, line
    assert watcher.outcome(key)["outcome"] == "RECEIVED"


def test_each_fate_of_a_reply_has_its_exit_code(
    e2e: Settings, worker: WorkerProcess, watcher: Watcher,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # held: no wait has the key yet (--force sends it anyway): kept until its TTL.
    early = new_key()
    assert _reply(e2e, worker, early, "--force") == 8
    held = _receipt(capsys)
    assert held["verdict"] == "held" and isinstance(held["heldUntil"], int)
    assert held["heldUntil"] > int(str(held["decidedAt"]))

    # tenant_mismatch: the wait is acme's.
    key = _parked(e2e, watcher, tenant="acme")
    assert _reply(e2e, worker, key, "--tenant", "globex") == 12
    assert _receipt(capsys)["reason"] == "tenant_mismatch"

    # in_review: it won the race, but its data fails validation.
    assert _reply(e2e, worker, key, "--tenant", "acme", data='{"decision": "maybe"}') == 9
    review = _receipt(capsys)
    assert review["verdict"] == "in_review" and "maybe" in str(review["validationIssue"])

    # late: an earlier reply won and is in review.
    assert _reply(e2e, worker, key, "--tenant", "acme") == 10
    assert _receipt(capsys)["reason"] == "late"

    # held while suspended, then the same reply id again: a duplicate.
    other = _parked(e2e, watcher)
    assert main(_cli(e2e, "suspend", other, "--reason", "audit", "--wait", "--json")) == 0
    assert _receipt(capsys)["verdict"] == "applied"
    assert _reply(e2e, worker, other, "--reply-id", "r-1") == 8
    assert _receipt(capsys)["heldUntil"] is None
    assert _reply(e2e, worker, other, "--reply-id", "r-1") == 11
    assert _receipt(capsys)["reason"] == "duplicate"


def test_a_reply_after_the_deadline_is_late_and_says_when_the_wait_ended(
    e2e: Settings, worker: WorkerProcess, watcher: Watcher,
    capsys: pytest.CaptureFixture[str],
) -> None:
    key = _parked(e2e, watcher, "race")  # its 2 s deadline ends it ESCALATED
    outcome = watcher.outcome(key)
    assert _reply(e2e, worker, key, data="{}") == 10
    late = _receipt(capsys)
    assert (late["verdict"], late["endedAt"]) == ("late", outcome["endedAt"])
    assert int(str(late["decidedAt"])) >= int(str(outcome["endedAt"]))


def test_commands_say_applied_unchanged_or_refused(
    e2e: Settings, worker: WorkerProcess, watcher: Watcher,
    capsys: pytest.CaptureFixture[str],
) -> None:
    key = _parked(e2e, watcher)
    # Refused by the worker: a review answers a wait in review, and this one is parked.
    assert main(_cli(e2e, "review", "accept", key, "--note", "fine", "--wait")) == 13
    out = capsys.readouterr().out
    assert out.startswith(f"refused  review  key={key}") and "reason=invalid_command" in out
    assert "Expected the wait to be in review, but it is parked" in out
    assert main(_cli(e2e, "suspend", key, "--reason", "audit", "--wait")) == 0
    capsys.readouterr()
    assert main(_cli(e2e, "suspend", key, "--reason", "again", "--wait", "--json")) == 14
    assert _receipt(capsys)["reason"] == "already_suspended"
    assert main(_cli(e2e, "cancel", key, "--reason", "withdrawn", "--wait", "--json")) == 0
    cancelled = _receipt(capsys)
    outcome = watcher.outcome(key)
    assert (cancelled["outcome"], cancelled["outcomeId"]) == ("CANCELLED", outcome["outcomeId"])
    assert main(_cli(e2e, "cancel", key, "--reason", "twice", "--wait", "--json")) == 13
    assert _receipt(capsys)["reason"] == "late"


def test_the_sdk_returns_the_receipt_and_none_without_wait(
    e2e: Settings, worker: WorkerProcess, watcher: Watcher,
) -> None:
    key = _parked(e2e, watcher)
    with XwaitClient(e2e) as xw:
        assert xw.reply(key, {"decision": "maybe"}, channel="portal") is None
        receipt = xw.reply(key, {"decision": "approved"}, channel="portal", wait=True)
    assert receipt is not None and receipt.verdict is Verdict.LATE
    assert not receipt.accepted and receipt.correlation_key == key
