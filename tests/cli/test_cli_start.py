"""`xwait start`: one wait, --count, --file; output, --json, refusals and exit codes."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from streams.cli import main
from streams.cli.start import ProgressBar
from streams.codec import RecordType
from streams.config import Settings
from streams.headers import TRACEPARENT, valid_traceparent
from tests.cli.conftest import Flags, Read


def test_start_prints_the_new_key_and_parks_a_wait_under_it(
    topics: Settings, capsys: pytest.CaptureFixture[str], flags: Flags, read: Read,
) -> None:
    assert main(["start", "expense-approval", "--payload", '{"amount": 5}', "--tenant", "acme",
                 "--deadline", "PT2H", *flags(topics)]) == 0
    key = capsys.readouterr().out.strip()
    assert len(key) >= 22 and "~" not in key
    [(raw_key, record)] = read(topics, "requests", RecordType.START_WAIT, 1)
    assert raw_key == key.encode()
    assert record["correlationKey"] == key and record["definition"] == "expense-approval"
    assert record["payload"] == '{"amount": 5}' and record["tenant"] == "acme"
    assert record["deadline"] == "PT2H"


def test_start_json_with_a_given_key_and_parties(
    topics: Settings, capsys: pytest.CaptureFixture[str], flags: Flags, read: Read,
) -> None:
    assert main(["start", "first-valid", "--key", "order-7", "--party", "carrier-a",
                 "--party", "carrier-c", "--json", *flags(topics)]) == 0
    out = json.loads(capsys.readouterr().out)
    [trace] = out.pop("traceparents")
    assert out == {"correlationKeys": ["order-7"], "topic": topics.topic("requests")}
    assert valid_traceparent(trace)
    [(_, record)] = read(topics, "requests", RecordType.START_WAIT, 1)
    assert record["parties"] == ["carrier-a", "carrier-c"]


def test_start_count_parks_n_waits_each_with_its_own_key(
    topics: Settings, capsys: pytest.CaptureFixture[str], flags: Flags, read: Read,
) -> None:
    assert main(["start", "probe", "--count", "25", "--json", *flags(topics)]) == 0
    out = json.loads(capsys.readouterr().out)
    keys = out["correlationKeys"]
    assert len(set(keys)) == 25
    assert capsys.readouterr().err == ""  # stderr is no TTY here: no progress bar
    records = read(topics, "requests", RecordType.START_WAIT, 25)
    assert sorted(r["correlationKey"] for _, r in records) == sorted(keys)


def test_start_file_takes_each_lines_fields_and_the_argument_as_default_definition(
    topics: Settings, capsys: pytest.CaptureFixture[str], tmp_path: Path, flags: Flags, read: Read,
) -> None:
    items = tmp_path / "items.jsonl"
    items.write_text(
        '{"correlationKey": "inv-1", "deadline": "PT1H", "payload": {"invoice": 1}}\n'
        "\n"
        '{"correlationKey": "inv-2", "deadline": "P2D", "tenant": "acme"}\n'
        '{"definition": "vendor-quote", "deadline": "PT30M"}\n'
    )
    assert main(["start", "expense-approval", "--file", str(items), *flags(topics)]) == 0
    keys = capsys.readouterr().out.split()
    assert keys[:2] == ["inv-1", "inv-2"] and len(keys) == 3
    by_key = {r["correlationKey"]: r for _, r in read(topics, "requests",
                                                      RecordType.START_WAIT, 3)}
    assert by_key["inv-1"]["deadline"] == "PT1H"
    assert by_key["inv-1"]["payload"] == '{"invoice":1}'
    assert by_key["inv-2"]["deadline"] == "P2D" and by_key["inv-2"]["tenant"] == "acme"
    assert by_key[keys[2]]["definition"] == "vendor-quote"
    assert by_key[keys[2]]["deadline"] == "PT30M"


@pytest.mark.parametrize(("args", "message"), [
    (["start", "expense-aproval"], "unknown wait definition 'expense-aproval'"),
    (["start", "expense-approval", "--payload", "{nope"], "--payload is not valid JSON"),
    (["start", "expense-approval", "--deadline", "soon"], "deadline: Expected an ISO 8601"),
    (["start", "expense-approval", "--key", "a~b"], "contains '~'"),
    (["start", "expense-approval", "--key", "k", "--count", "2"], "--key names one wait"),
    (["start"], "name the wait definition"),
])
def test_start_refuses_bad_arguments_with_exit_2_and_produces_nothing(
    topics: Settings, capsys: pytest.CaptureFixture[str], args: list[str], message: str,
    flags: Flags,
) -> None:
    assert main([*args, *flags(topics)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("xwait: ") and message in captured.err


def test_start_file_names_the_bad_line(
    topics: Settings, capsys: pytest.CaptureFixture[str], tmp_path: Path, flags: Flags,
) -> None:
    items = tmp_path / "items.jsonl"
    items.write_text('{"definition": "probe"}\n{"definition": "probe", "dedline": "PT1H"}\n')
    assert main(["start", "--file", str(items), *flags(topics)]) == 2
    assert f"--file {items} line 2: unknown field 'dedline'" in capsys.readouterr().err


@pytest.mark.parametrize(("line", "message"), [
    ('{"definition": "no-such-definition"}', "unknown wait definition 'no-such-definition'"),
    ('{"definition": "probe", "deadline": "soon"}', "deadline: "),
])
def test_start_file_names_the_line_of_an_item_the_definitions_refuse(
    topics: Settings, capsys: pytest.CaptureFixture[str], tmp_path: Path, flags: Flags,
    line: str, message: str,
) -> None:
    items = tmp_path / "items.jsonl"
    items.write_text('{"definition": "probe"}\n\n' + line + "\n")
    assert main(["start", "--file", str(items), *flags(topics)]) == 2
    err = capsys.readouterr().err
    assert f"--file {items} line 3: {message}" in err
    assert "item " not in err


def test_count_and_file_together_are_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["start", "probe", "--count", "2", "--file", str(tmp_path / "x.jsonl")])
    assert caught.value.code == 2


def test_start_fails_with_exit_1_when_the_topics_are_missing(
    settings: Settings, capsys: pytest.CaptureFixture[str], flags: Flags,
) -> None:
    assert main(["start", "probe", *flags(settings)]) == 1
    assert "run `xwait topics create`" in capsys.readouterr().err


def test_start_against_an_unreachable_broker_exits_3_within_a_few_seconds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    began = time.monotonic()
    assert main(["start", "probe", "--bootstrap", "127.0.0.1:1"]) == 3
    assert time.monotonic() - began < 8
    captured = capsys.readouterr()
    assert captured.err.startswith("xwait: Kafka unreachable: 127.0.0.1:1 did not answer")
    assert captured.out == ""


def test_progress_bar_draws_in_place_only_when_enabled_and_slow() -> None:
    stream = io.StringIO()
    bar = ProgressBar(stream, 10, enabled=True, delay=0.0)
    bar(5, 10)
    bar(10, 10)
    bar.finish()
    drawn = stream.getvalue()
    assert drawn.startswith("\rstarting waits:   0%")
    assert "\rstarting waits: 100%" in drawn and "10/10" in drawn and drawn.endswith("\n")

    quiet = io.StringIO()
    for bar in (ProgressBar(quiet, 2, enabled=False, delay=0.0),
                ProgressBar(quiet, 2, enabled=True, delay=60.0)):
        bar(1, 2)
        bar.finish()
    assert quiet.getvalue() == ""


def test_start_sends_the_traceparent_given_and_prints_it_beside_the_key(
    topics: Settings, capsys: pytest.CaptureFixture[str], flags: Flags,
) -> None:
    trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    assert main(["start", "expense-approval", "--key", "order-8", "--traceparent", trace,
                 *flags(topics)]) == 0
    printed = capsys.readouterr()
    assert printed.out == "order-8\n"  # KEY=$(xwait start ...) still captures the key alone
    assert printed.err == f"traceparent {trace}\n"
    topic = topics.topic("requests")
    consumer = Consumer(topics.confluent(**{"group.id": "headers", "enable.auto.commit": False}))
    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        deadline = time.monotonic() + 15
        msg = None
        while msg is None and time.monotonic() < deadline:
            got = consumer.poll(0.2)
            msg = got if got is not None and got.error() is None else None
        assert msg is not None and msg.key() == b"order-8"
        assert dict(msg.headers() or []) == {TRACEPARENT: trace.encode()}
    finally:
        consumer.close()


def test_start_refuses_a_traceparent_that_is_not_one(
    topics: Settings, capsys: pytest.CaptureFixture[str], flags: Flags,
) -> None:
    assert main(["start", "expense-approval", "--traceparent", "abc", *flags(topics)]) == 2
    assert "is not a W3C traceparent" in capsys.readouterr().err
