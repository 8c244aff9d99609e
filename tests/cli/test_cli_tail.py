"""`xwait tail`: outputs as JSON lines, bounded by --count and --timeout."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from streams import codec
from streams.cli import main
from streams.codec import RecordType
from streams.config import Settings
from streams.testing.workers import XWAIT, settings_env
from tests.cli.conftest import Flags, Produce


def _outcome(key: str) -> dict[str, object]:
    return {"outcomeId": f"o-{key}", "correlationKey": key, "definition": "probe",
            "tenant": None, "outcome": "ESCALATED", "reason": "escalation_exhausted",
            "responseData": None, "responseValid": None, "validationIssue": None,
            "reviewOutcome": None, "reviewNote": None, "remindersSent": 0,
            "escalationLevel": 1, "parkedAt": 1, "endedAt": 2,
            "trace": [{"at": 1, "event": "requested", "detail": ""}],
            "operator": None, "operatorReason": None, "sendError": None,
            "definitionVersion": None}


def test_tail_prints_one_json_line_per_record_that_reads_back_as_the_record(
    topics: Settings, capsys: pytest.CaptureFixture[str], flags: Flags, produce: Produce,
) -> None:
    produce(topics, "outcomes", [(k, codec.encode(RecordType.OUTCOME, _outcome(k)))
                                 for k in ("a", "b")])
    assert main(["tail", "outcomes", "--from-beginning", "--count", "2", "--timeout", "20",
                 *flags(topics)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    assert sorted(codec.from_json(RecordType.OUTCOME, line)["correlationKey"]
                  for line in lines) == ["a", "b"]
    assert codec.from_json(RecordType.OUTCOME, lines[0]) == _outcome(
        codec.from_json(RecordType.OUTCOME, lines[0])["correlationKey"])


def test_tail_headers_shows_the_traceparent_each_record_carries(
    topics: Settings, capsys: pytest.CaptureFixture[str], flags: Flags, produce: Produce,
) -> None:
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    produce(topics, "outcomes", [("a", codec.encode(RecordType.OUTCOME, _outcome("a")))],
            headers={"traceparent": traceparent})
    produce(topics, "outcomes", [("b", codec.encode(RecordType.OUTCOME, _outcome("b")))])
    assert main(["tail", "outcomes", "--from-beginning", "--count", "2", "--timeout", "20",
                 "--headers", *flags(topics)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {line["record"]["correlationKey"]: line["headers"] for line in lines} == {
        "a": {"traceparent": traceparent}, "b": {}}


def test_tail_fails_with_exit_1_when_fewer_records_than_count_arrive_in_time(
    topics: Settings, capsys: pytest.CaptureFixture[str], flags: Flags,
) -> None:
    assert main(["tail", "actions", "--count", "1", "--timeout", "1", *flags(topics)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "0 of 1 actions records within 1 s" in captured.err


def test_tail_reports_an_undecodable_record_on_stderr_and_goes_on(
    topics: Settings, capsys: pytest.CaptureFixture[str], flags: Flags, produce: Produce,
) -> None:
    produce(topics, "rejected", [("k", b"not a record")])
    produce(topics, "rejected", [("k", codec.encode(RecordType.REJECTED, {
        "topic": "t", "partition": 0, "offset": 1, "key": b"k", "reason": "late",
        "detail": "d", "original": b"\x00\xff", "rejectedAt": 5}))])
    assert main(["tail", "rejected", "--from-beginning", "--count", "1", "--timeout", "20",
                 "--raw", *flags(topics)]) == 1
    captured = capsys.readouterr()
    assert "skipped an undecodable record" in captured.err
    [line] = captured.out.splitlines()
    assert codec.from_json(RecordType.REJECTED, line)["original"] == b"\x00\xff"


def test_tail_shows_keys_and_originals_as_text_and_json_fields_as_nested_json(
    topics: Settings, capsys: pytest.CaptureFixture[str], flags: Flags, produce: Produce,
) -> None:
    # given a rejected JSON reply, a rejected Avro reply, a rejected binary value
    reply = {"correlationKey": "k1", "channel": "portal", "responseData": '{"ok": true}'}
    avro = codec.encode(RecordType.REPLY, reply)
    rejected = [
        ({"topic": f"{topics.topic_prefix}.replies", "original": json.dumps(reply).encode()}),
        ({"topic": f"{topics.topic_prefix}.replies", "original": avro}),
        ({"topic": f"{topics.topic_prefix}.replies", "original": b"\x00\xff"}),
    ]
    produce(topics, "rejected", [("k1", codec.encode(RecordType.REJECTED, {
        "partition": 0, "offset": i, "key": b"k1", "reason": "unmatched", "detail": "d",
        "rejectedAt": 5, **r})) for i, r in enumerate(rejected)])
    # when they are tailed
    assert main(["tail", "rejected", "--from-beginning", "--count", "3", "--timeout", "20",
                 *flags(topics)]) == 0
    lines = sorted((json.loads(line) for line in capsys.readouterr().out.splitlines()),
                   key=lambda r: r["offset"])
    # then keys are text, originals the record they are (JSON fields nested), else base64
    assert [r["key"] for r in lines] == ["k1", "k1", "k1"]
    decoded = {**reply, "responseData": {"ok": True}, "tenant": None, "replyId": None,
               "sentAt": None}
    assert lines[0]["original"] == lines[1]["original"] == decoded
    assert lines[2]["original"] == {"base64": "AP8="}


def test_tail_key_prints_only_the_records_of_that_wait(
    topics: Settings, capsys: pytest.CaptureFixture[str], flags: Flags, produce: Produce,
) -> None:
    produce(topics, "outcomes", [(k, codec.encode(RecordType.OUTCOME, _outcome(k)))
                                 for k in ("other1", "mine", "other2")])
    assert main(["tail", "outcomes", "--from-beginning", "--key", "mine", "--count", "1",
                 "--timeout", "20", *flags(topics)]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert json.loads(line)["correlationKey"] == "mine"


def test_tail_on_missing_topics_fails_and_on_an_unreachable_broker_exits_3(
    settings: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    flags: Flags,
) -> None:
    assert main(["tail", "outcomes", "--timeout", "1", *flags(settings)]) == 1
    assert "run `xwait topics create`" in capsys.readouterr().err
    monkeypatch.setenv("XWAIT_CONNECT_TIMEOUT", "1")
    assert main(["tail", "outcomes", "--bootstrap", "127.0.0.1:1"]) == 3
    assert capsys.readouterr().err.startswith("xwait: Kafka unreachable:")


def test_tail_key_shows_the_records_of_a_wait_that_already_ended_without_from_beginning(
    topics: Settings, capsys: pytest.CaptureFixture[str], flags: Flags, produce: Produce,
) -> None:
    # given a wait that ended before anyone tailed it (no worker knows it any more)
    produce(topics, "outcomes", [(k, codec.encode(RecordType.OUTCOME, _outcome(k)))
                                 for k in ("ended", "other")])
    # when its records are tailed by key, as the README words it
    assert main(["tail", "outcomes", "--key", "ended", "--count", "1", "--timeout", "20",
                 *flags(topics)]) == 0
    # then its outcome shows: a key's records start where that wait's start
    [line] = capsys.readouterr().out.splitlines()
    assert json.loads(line)["correlationKey"] == "ended"


def test_tail_into_a_pipe_closed_early_ends_quietly(
    topics: Settings, produce: Produce,
) -> None:
    """`xwait tail ... | head -1`: no BrokenPipeError traceback, exit 0."""
    produce(topics, "outcomes", [(f"k{i}", codec.encode(RecordType.OUTCOME, _outcome(f"k{i}")))
                                 for i in range(200)])
    env = {**os.environ, **settings_env(topics), "XWAIT_CONSOLE_URL": "http://127.0.0.1:9"}
    with subprocess.Popen([str(XWAIT), "tail", "outcomes", "--from-beginning", "--timeout",
                           "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) as tail:
        assert tail.stdout is not None and tail.stderr is not None
        first = tail.stdout.readline()  # what `head -1` reads, then it goes
        tail.stdout.close()
        err = tail.stderr.read().decode()
        assert tail.wait(60) == 0, err
    assert json.loads(first)["correlationKey"].startswith("k")
    assert "Traceback" not in err and "BrokenPipeError" not in err
