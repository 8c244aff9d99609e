"""The command line reads well: a version, each command's own options first."""

from __future__ import annotations

from importlib import metadata

import pytest

from streams.cli import build_parser, main


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"xwait {metadata.version('xwait')}"


@pytest.mark.parametrize(("command", "own"), [
    (["reply"], "--channel"), (["start"], "--count"), (["tail"], "--from-beginning"),
    (["cancel"], "--reason"), (["result"], "--timeout"), (["review", "accept"], "--note"),
])
def test_help_lists_the_commands_own_options_before_the_shared_kafka_flags(
    command: list[str], own: str, capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    text = capsys.readouterr().out
    options = text.split("\noptions:", 1)[1]
    assert options.index(own) < options.index("Kafka and topology (shared by every command)")
    assert options.index("--bootstrap") > options.index(own)
    assert "--security-protocol" in options.split("Kafka security", 1)[1]


def test_every_producing_command_can_force_past_the_key_check() -> None:
    parser = build_parser()
    for command in (["reply", "k", "--channel", "c", "--data", "{}"], ["suspend", "k", "--reason",
                    "r"], ["resume", "k"], ["cancel", "k", "--reason", "r"],
                    ["deliver", "k", "--data", "{}"], ["review", "accept", "k", "--note", "n"]):
        assert parser.parse_args([*command, "--force"]).force is True
