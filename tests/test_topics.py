"""`xwait topics create|describe` against the real broker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from streams import topics
from streams.cli import main
from streams.config import Settings


def _cli(settings: Settings, *args: str) -> list[str]:
    return [*args, "--bootstrap", settings.bootstrap, "--prefix", settings.topic_prefix,
            "--partitions", str(settings.partitions)]


@pytest.fixture(autouse=True)
def _app_id(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XWAIT_APP_ID", settings.app_id)


def test_create_makes_every_contract_topic_and_a_second_run_reports_them_as_existing(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_cli(settings, "topics", "create", "--json")) == 0
    first = json.loads(capsys.readouterr().out)
    assert sorted(first["created"]) == sorted(
        [f"{settings.topic_prefix}.{n}" for n in
         ("requests", "replies", "commands", "timers", "actions", "outcomes", "rejected",
          "receipts", "definitions")]
        + [f"{settings.app_id}-waits-changelog", f"{settings.app_id}-assignment"]
    )
    assert first["existed"] == [] and first["problems"] == []

    assert main(_cli(settings, "topics", "create", "--json")) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["created"] == []
    assert sorted(second["existed"]) == sorted(first["created"])

    assert main(_cli(settings, "topics", "describe", "--json")) == 0
    described = json.loads(capsys.readouterr().out)
    by_role = {t["role"]: t for t in described["topics"]}
    assert {t["partitions"] for t in described["topics"]} == {settings.partitions}
    assert by_role["waits-changelog"]["config"]["cleanup.policy"] == "compact"
    assert by_role["definitions"]["config"]["cleanup.policy"] == "compact"
    assert by_role["requests"]["config"]["cleanup.policy"] == "delete"
    assert {by_role[r]["config"]["message.timestamp.type"]
            for r in ("requests", "replies", "commands", "timers")} == {"LogAppendTime"}


def test_an_input_topic_stamped_by_producers_is_reported_as_a_problem(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    replies = f"{settings.topic_prefix}.replies"
    admin = AdminClient({"bootstrap.servers": settings.bootstrap})
    admin.create_topics([NewTopic(replies, settings.partitions, 1)])[replies].result(timeout=30)
    topics.wait_visible(admin, [replies])

    assert main(_cli(settings, "topics", "describe", "--json")) == 1
    problems = json.loads(capsys.readouterr().out)["problems"]
    assert (f"{replies}: message.timestamp.type=CreateTime, expected LogAppendTime"
            in problems)


def test_describe_fails_loudly_when_one_topic_has_a_different_partition_count(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    odd = f"{settings.topic_prefix}.replies"
    admin = AdminClient({"bootstrap.servers": settings.bootstrap})
    admin.create_topics([NewTopic(odd, settings.partitions + 1, 1)])[odd].result(timeout=30)
    topics.wait_visible(admin, [odd])

    assert main(_cli(settings, "topics", "create")) == 1
    out = capsys.readouterr().out
    assert f"existed  {odd}" in out
    assert "co-partitioning broken" in out

    assert main(_cli(settings, "topics", "describe", "--json")) == 1
    problems = json.loads(capsys.readouterr().out)["problems"]
    expected = f"{odd}: {settings.partitions + 1} partitions, expected {settings.partitions}"
    assert expected in problems


def test_describe_reports_missing_topics_and_fails(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_cli(settings, "topics", "describe")) == 1
    assert "missing (run `xwait topics create`)" in capsys.readouterr().out


def test_unreachable_broker_exits_3_with_one_clear_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("streams.topics.ADMIN_TIMEOUT_S", 2.0)
    assert main(["topics", "describe", "--bootstrap", "127.0.0.1:1"]) == 3
    assert capsys.readouterr().err.startswith("xwait: Kafka unreachable:")


def test_a_changelog_that_is_not_compacted_is_reported_as_a_problem(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    changelog = f"{settings.app_id}-waits-changelog"
    admin = AdminClient({"bootstrap.servers": settings.bootstrap})
    admin.create_topics([NewTopic(changelog, settings.partitions, 1)])[changelog].result(
        timeout=30)
    topics.wait_visible(admin, [changelog])

    assert main(_cli(settings, "topics", "create", "--json")) == 1
    problems = json.loads(capsys.readouterr().out)["problems"]
    assert f"{changelog}: cleanup.policy=delete, expected compact" in problems


def test_more_replicas_than_brokers_is_refused_before_anything_is_created(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_cli(settings, "topics", "create", "--replication-factor", "3")) == 2
    err = capsys.readouterr().err
    assert "replication factor 3, but the cluster has 1 broker" in err
    assert main(_cli(settings, "topics", "describe")) == 1
    assert "missing (run `xwait topics create`)" in capsys.readouterr().out


def test_min_insync_above_the_replication_factor_is_a_configuration_error(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_cli(settings, "topics", "create", "--min-insync-replicas", "2")) == 2
    assert "min.insync.replicas 2 is above the replication factor 1" in capsys.readouterr().err


def test_replication_settings_come_from_the_environment_and_min_insync_follows_the_factor(
) -> None:
    from streams.config import from_env

    three = topics.load_specs(from_env({"XWAIT_REPLICATION_FACTOR": "3"}))
    assert {(s.replication_factor, s.config["min.insync.replicas"]) for s in three} == {(3, "2")}
    one = topics.load_specs(from_env({}))
    assert {(s.replication_factor, s.config["min.insync.replicas"]) for s in one} == {(1, "1")}
    explicit = topics.load_specs(from_env({"XWAIT_REPLICATION_FACTOR": "5",
                                           "XWAIT_MIN_INSYNC_REPLICAS": "3"}))
    assert {s.config["min.insync.replicas"] for s in explicit} == {"3"}


def test_a_worker_starting_on_a_deployment_of_0_2_0_creates_the_receipts_topic(
    settings: Settings, tmp_path: Path
) -> None:
    """A topics.yaml written before receipts (0.2.0's) still gets the receipts topic, and
    `ensure` (what a worker runs at start) creates it beside the topics that exist."""
    old = tmp_path / "topology"
    old.mkdir()
    shipped = (settings.topology / "topics.yaml").read_text()
    start = shipped.index("  receipts:")
    end = shipped.index("  definitions:")
    (old / "topics.yaml").write_text(shipped[:start] + shipped[end:])
    earlier = settings.with_overrides(topology=old)
    receipts = f"{settings.topic_prefix}.receipts"
    specs = topics.load_specs(earlier)
    assert receipts in {s.name for s in specs}
    topics.create(earlier, [s for s in specs if s.role != "receipts"])  # 0.2.0's topics

    report = topics.ensure(earlier)

    assert report.created == [receipts]
    [state] = topics.describe(earlier, [s for s in specs if s.role == "receipts"])
    assert state.matches and state.partitions == settings.partitions
