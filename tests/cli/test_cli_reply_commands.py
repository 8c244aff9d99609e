"""`xwait reply` and the operator commands: records, output, refusals and exit codes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from streams.cli import main
from streams.codec import RecordType
from streams.config import REPO_ROOT, Settings
from tests.cli.conftest import Flags, Read


def test_reply_with_a_party_key_is_keyed_by_the_wait_key(
    topics: Settings, capsys: pytest.CaptureFixture[str], flags: Flags, read: Read,
) -> None:
    assert main(["reply", "W1~carrier-a", "--channel", "portal", "--data", '{"price": 3}',
                 "--tenant", "acme", "--reply-id", "r-9", *flags(topics)]) == 0
    assert capsys.readouterr().out.startswith("reply sent  key=W1~carrier-a channel=portal")
    [(key, record)] = read(topics, "replies", RecordType.REPLY, 1)
    assert key == b"W1"
    assert record == {"correlationKey": "W1~carrier-a", "tenant": "acme", "channel": "portal",
                      "responseData": '{"price": 3}', "replyId": "r-9", "sentAt": None}

    assert main(["reply", "W1", "--channel", "email", "--data", "{}", "--json",
                 *flags(topics)]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "sent": "Reply", "correlationKey": "W1", "channel": "email",
        "topic": topics.topic("replies")}


def test_reply_refuses_bad_json_and_unknown_channels_with_exit_2(
    topics: Settings, capsys: pytest.CaptureFixture[str], tmp_path: Path, flags: Flags,
) -> None:
    assert main(["reply", "W1", "--channel", "portal", "--data", "{x", *flags(topics)]) == 2
    assert "--data is not valid JSON" in capsys.readouterr().err

    topology = tmp_path / "topology"
    (topology / "waits").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "topology" / "waits" / "vendor-quote.yaml", topology / "waits")
    assert main(["reply", "W1", "--channel", "fax", "--data", "{}", "--topology",
                 str(topology), *flags(topics)]) == 2
    assert "unknown reply channel 'fax'" in capsys.readouterr().err


def test_operator_commands_write_their_fields_with_the_operator(
    topics: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    flags: Flags, read: Read,
) -> None:
    monkeypatch.setenv("LOGNAME", "night-shift")
    f = flags(topics)
    assert main(["suspend", "W2", "--reason", "vendor on holiday", *f]) == 0
    assert main(["resume", "W2", "--operator", "ana", *f]) == 0
    assert main(["deliver", "W2", "--data", '{"amount": 1}', "--reason", "phone", *f]) == 0
    assert main(["review", "accept", "W2", "--note", "fine", *f]) == 0
    assert main(["review", "correct", "W2", "--note", "typo", "--data", '{"amount": 2}',
                 "--json", *f]) == 0
    assert main(["cancel", "W2", "--reason", "withdrawn", *f]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"suspend sent  key=W2 topic={topics.topic('commands')}"
    assert json.loads("\n".join(out[4:-1])) == {
        "sent": "Command", "command": "REVIEW", "correlationKey": "W2",
        "operator": "night-shift", "topic": topics.topic("commands")}

    records = [r for _, r in read(topics, "commands", RecordType.COMMAND, 6)]
    assert [(r["command"], r["operator"]) for r in records] == [
        ("SUSPEND", "night-shift"), ("RESUME", "ana"), ("DELIVER", "night-shift"),
        ("REVIEW", "night-shift"), ("REVIEW", "night-shift"), ("CANCEL", "night-shift")]
    assert records[0]["reason"] == "vendor on holiday"
    assert records[2]["responseData"] == '{"amount": 1}' and records[2]["reason"] == "phone"
    assert (records[3]["reviewOutcome"], records[3]["reviewNote"]) == ("Accept", "fine")
    assert records[3]["responseData"] is None
    assert records[4]["reviewOutcome"] == "Submit Correction"
    assert records[4]["responseData"] == '{"amount": 2}'
    assert records[5]["reason"] == "withdrawn"


@pytest.mark.parametrize("args", [
    ["suspend", "W"],                              # --reason is required
    ["cancel", "W"],
    ["review", "correct", "W", "--note", "n"],     # --data is required
    ["review", "reject", "W", "--note", "n"],
])
def test_missing_required_flags_are_usage_errors(args: list[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(args)
    assert caught.value.code == 2


def test_a_command_for_a_party_key_is_refused_with_exit_2(
    topics: Settings, capsys: pytest.CaptureFixture[str], flags: Flags,
) -> None:
    assert main(["cancel", "W~p", "--reason", "x", *flags(topics)]) == 2
    assert "contains '~'" in capsys.readouterr().err


def test_commands_against_an_unreachable_broker_exit_3(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("XWAIT_CONNECT_TIMEOUT", "1")  # 5 s by default
    assert main(["reply", "W", "--channel", "portal", "--data", "{}",
                 "--bootstrap", "127.0.0.1:1"]) == 3
    assert main(["resume", "W", "--bootstrap", "127.0.0.1:1"]) == 3
    err = capsys.readouterr().err
    assert err.count("xwait: Kafka unreachable:") == 2
    waited = [float(line.split(" within ", 1)[1].split()[0]) for line in err.splitlines()
              if " did not answer a metadata request within " in line]
    assert len(waited) == 2 and all(s <= 1.0 for s in waited), err
