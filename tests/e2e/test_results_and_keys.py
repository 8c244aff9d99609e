"""The outcome of one key, and keys nobody parked: against a real worker, through SDK and CLI.

The SDK and CLI ask this module's worker (its web API) whether a key exists;
the outcome of a key is read from the outcomes topic, filtered by key.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from streams.cli import main
from streams.client import NoSuchWait, OutcomeKind, ResultTimeout, XwaitClient
from streams.config import Settings
from tests.e2e.harness import Watcher, WorkerProcess, new_key

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


@pytest.fixture(scope="module")
def live(e2e: Settings, worker: WorkerProcess) -> Settings:
    """Settings whose console URL is this module's worker."""
    return e2e.with_overrides(console_url=f"http://127.0.0.1:{worker.web_port}")


def _cli(s: Settings, *args: str) -> list[str]:
    return [*args, "--bootstrap", s.bootstrap, "--prefix", s.topic_prefix,
            "--topology", str(s.topology), "--console", s.console_url]


def _started(live: Settings, capsys: pytest.CaptureFixture[str]) -> str:
    """A slow-approval wait started by `xwait start`: the key it printed."""
    assert main(_cli(live, "start", "slow-approval")) == 0
    return capsys.readouterr().out.strip()


def _parked(live: Settings, capsys: pytest.CaptureFixture[str], watcher: Watcher) -> str:
    """A wait started as `_started` does, once its request was processed: its key."""
    key = _started(live, capsys)
    watcher.parked(key)
    return key


def test_result_returns_the_outcome_of_its_key_not_the_first_outcome_to_arrive(
    live: Settings, watcher: Watcher,
) -> None:
    with XwaitClient(live) as xw:
        mine = xw.start_wait("slow-approval")
        other = xw.start_wait("slow-approval")
        watcher.parked(mine)
        watcher.parked(other)
        # the other wait ends first
        xw.reply(other, {"decision": "rejected"}, channel="portal")
        watcher.outcome(other)
        xw.reply(mine, {"decision": "approved"}, channel="portal")
        outcome = xw.result(mine, timeout=30)
    assert (outcome.correlation_key, outcome.outcome) == (mine, OutcomeKind.RECEIVED)
    assert outcome.response_data == {"decision": "approved"}
    # and a client that did not start it finds the outcome of a wait that ended already
    with XwaitClient(live) as later:
        began = time.monotonic()
        assert later.result(other, timeout=30).correlation_key == other
        assert time.monotonic() - began < 10


def test_result_async_waits_for_the_outcome_and_times_out_on_an_open_wait(
    live: Settings, watcher: Watcher,
) -> None:
    async def scenario() -> tuple[OutcomeKind, str]:
        with XwaitClient(live) as xw:
            key = xw.start_wait("slow-approval")
            with pytest.raises(ResultTimeout):
                await xw.result_async(key, timeout=1)
            watcher.parked(key)
            xw.cancel(key, "withdrawn")
            outcome = await xw.result_async(key, timeout=30)
            return outcome.outcome, outcome.reason

    assert asyncio.run(scenario()) == (OutcomeKind.CANCELLED, "cancelled_by_operator")


def test_cli_result_exit_code_says_how_the_wait_ended(
    live: Settings, watcher: Watcher, capsys: pytest.CaptureFixture[str],
) -> None:
    key = _started(live, capsys)
    assert main(_cli(live, "result", key, "--timeout", "1")) == 7  # still open
    assert "Expected an outcome" in capsys.readouterr().err
    watcher.parked(key)
    assert main(_cli(live, "cancel", key, "--reason", "duplicate order")) == 0
    capsys.readouterr()
    assert main(_cli(live, "result", key, "--timeout", "30", "--json")) == 6
    shown = json.loads(capsys.readouterr().out)
    assert (shown["correlationKey"], shown["outcome"]) == (key, "CANCELLED")


def test_reply_and_commands_to_a_key_nobody_parked_fail_with_exit_4_unless_forced(
    live: Settings, watcher: Watcher, capsys: pytest.CaptureFixture[str],
) -> None:
    ghost = new_key()
    assert main(_cli(live, "reply", ghost, "--channel", "portal", "--data", "{}")) == 4
    err = capsys.readouterr().err
    assert f"Expected a wait with key '{ghost}', but the worker at" in err
    assert "the reply was not sent" in err and "send it anyway with --force" in err
    assert main(_cli(live, "cancel", ghost, "--reason", "r")) == 4
    err = capsys.readouterr().err  # the command, not "a reply", and the CLI's flag
    assert "the cancel was not sent. Send it anyway with --force" in err
    assert "the reply was not sent" not in err
    assert main(_cli(live, "result", ghost, "--timeout", "30")) == 4
    assert "holds no outcome for it" in capsys.readouterr().err
    with XwaitClient(live) as xw, pytest.raises(NoSuchWait) as caught:
        xw.suspend(ghost, "audit")
    assert caught.value.key == ghost
    assert "Send it anyway with force=True" in str(caught.value)  # the SDK's own words
    # --force sends anyway: a reply that overtakes its request is held by the worker
    capsys.readouterr()
    assert main(_cli(live, "reply", ghost, "--channel", "portal", "--data",
                     '{"decision": "approved"}', "--force")) == 0
    assert "reply sent" in capsys.readouterr().out
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        code = main(_cli(live, "reply", ghost, "--channel", "portal", "--data", "{}"))
        err = capsys.readouterr().err
        if "1 reply(s) and 0 command(s) are held" in err:
            break
        time.sleep(0.3)
    assert code == 4 and "1 reply(s) and 0 command(s) are held" in err


def test_a_reply_on_a_channel_its_wait_definition_lacks_exits_2(
    live: Settings, watcher: Watcher, capsys: pytest.CaptureFixture[str],
) -> None:
    # email is a channel of another definition (fast-quote), not of slow-approval
    key = _parked(live, capsys, watcher)
    assert main(_cli(live, "reply", key, "--channel", "email", "--data", "{}")) == 2
    assert "the wait's definition 'slow-approval' accepts portal" in capsys.readouterr().err


def test_status_of_an_unknown_key_prints_the_workers_answer_and_exits_4(
    live: Settings, capsys: pytest.CaptureFixture[str],
) -> None:
    ghost = new_key()
    assert main(["status", ghost, "--console", live.console_url, "--json"]) == 4
    body = json.loads(capsys.readouterr().out)
    assert body["status"] == 404
    assert (body["key"], body["earlyReplies"], body["earlyCommands"]) == (ghost, 0, 0)


def test_status_shows_the_time_left_of_a_suspended_wait_and_its_held_replies(
    live: Settings, watcher: Watcher, capsys: pytest.CaptureFixture[str],
) -> None:
    key = _parked(live, capsys, watcher)
    assert main(_cli(live, "suspend", key, "--reason", "audit")) == 0
    assert main(_cli(live, "reply", key, "--channel", "portal", "--data",
                     '{"decision": "approved"}')) == 0
    capsys.readouterr()
    deadline = time.monotonic() + 20
    text = ""
    while time.monotonic() < deadline and "held        1 reply" not in text:
        assert main(["status", key, "--console", live.console_url]) == 0
        text = capsys.readouterr().out
        time.sleep(0.3)
    assert "left        deadline 59m" in text  # slow-approval: PT1H
    assert "held        1 reply(s), decided on resume:" in text
    assert 'data={"decision": "approved"}' in text
