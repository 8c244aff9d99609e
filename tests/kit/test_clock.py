"""The test clock without a broker: the setting, the file, and the kit's topology."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from streams.config import PACKAGED_TOPOLOGY, Settings, from_env
from streams.errors import ConfigError
from streams.processor.context import wall_ms
from streams.testing.clock import FileClock, refuse_on_broker_time, worker_clock, write_clock
from streams.testing.kit import kit_topology


def test_the_clock_is_the_wall_clock_unless_a_test_says_otherwise() -> None:
    assert from_env({}).clock == "wall"
    assert worker_clock(Settings()) is wall_ms


@pytest.mark.parametrize("raw", ["nope", "file:", "file:/nowhere/clock"])
def test_a_clock_setting_xwait_cannot_read_is_refused_naming_the_variable(raw: str) -> None:
    with pytest.raises(ConfigError, match="XWAIT_CLOCK"):
        from_env({"XWAIT_CLOCK": raw})


def test_a_clock_file_without_milliseconds_is_refused(tmp_path: Path) -> None:
    clock = tmp_path / "clock"
    clock.write_text("tomorrow\n")
    with pytest.raises(ConfigError, match="Expected epoch milliseconds"):
        from_env({"XWAIT_CLOCK": f"file:{clock}"})


def test_a_file_clock_reads_what_the_test_wrote_and_never_goes_back(tmp_path: Path) -> None:
    clock = tmp_path / "clock"
    write_clock(clock, 1_000)
    assert from_env({"XWAIT_CLOCK": f"file:{clock}"}).clock == f"file:{clock}"
    read = FileClock(clock)
    assert read() == 1_000
    write_clock(clock, 5_000)
    assert read() == 5_000
    write_clock(clock, 2_000)  # back in time: the worker's time stays
    assert read() == 5_000
    clock.unlink()  # the kit's session ended before its worker
    assert read() == 5_000
    assert [p.name for p in tmp_path.iterdir()] == []  # no temporary file left behind


def test_a_test_clock_is_refused_on_topics_the_broker_stamps() -> None:
    with pytest.raises(ConfigError, match="x.requests is stamped by the broker"):
        refuse_on_broker_time("file:/c", {"x.requests": "LogAppendTime",
                                          "x.replies": "CreateTime"})
    refuse_on_broker_time("file:/c", {"x.requests": "CreateTime"})
    refuse_on_broker_time("wall", {"x.requests": "LogAppendTime"})


def test_the_kits_input_topics_are_stamped_by_producers_and_its_waits_are_yours(
        tmp_path: Path) -> None:
    mine = tmp_path / "my-waits"
    mine.mkdir()
    folder = kit_topology(tmp_path / "topology", mine)
    doc = yaml.safe_load((folder / "topics.yaml").read_text())
    stamped = {role: body["config"].get("message.timestamp.type")
               for role, body in doc["topics"].items()}
    assert {r: stamped[r] for r in ("requests", "replies", "commands")} == dict.fromkeys(
        ("requests", "replies", "commands"), "CreateTime")
    shipped = yaml.safe_load((PACKAGED_TOPOLOGY / "topics.yaml").read_text())
    assert {r: b for r, b in doc["topics"].items() if r not in ("requests", "replies",
                                                                 "commands")} == \
        {r: b for r, b in shipped["topics"].items() if r not in ("requests", "replies",
                                                                  "commands")}
    assert (folder / "waits").resolve() == mine.resolve()
