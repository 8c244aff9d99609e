"""Settings: what is derived from what, and what is refused."""

from __future__ import annotations

import pytest

from streams.config import PACKAGED_TOPOLOGY, Settings, from_env
from streams.errors import ConfigError


def test_the_app_id_follows_the_topic_prefix_so_two_deployments_never_share_a_group() -> None:
    assert from_env({}).app_id == "xwait-processor"
    assert from_env({"XWAIT_TOPIC_PREFIX": "blue"}).app_id == "blue-processor"
    assert from_env({"XWAIT_TOPIC_PREFIX": "blue", "XWAIT_APP_ID": "legacy"}).app_id == "legacy"
    # a prefix given later (the CLI's --prefix) derives it again; an explicit id stays
    assert from_env({}).with_overrides(topic_prefix="green").app_id == "green-processor"
    explicit = from_env({"XWAIT_APP_ID": "legacy"}).with_overrides(topic_prefix="green")
    assert explicit.app_id == "legacy"
    assert Settings(topic_prefix="red").app_id == "red-processor"


def test_the_default_topology_is_the_one_shipped_in_the_package() -> None:
    assert from_env({}).topology == PACKAGED_TOPOLOGY
    assert (PACKAGED_TOPOLOGY / "topics.yaml").is_file()
    assert sorted(p.name for p in (PACKAGED_TOPOLOGY / "waits").glob("*.yaml"))[:1] == [
        "demo-approval.yaml"]


# A table alike in shape with itself and test_client_start.py's (duplicates lists the pairs),
# deliberately: one row a refused setting and its message.
@pytest.mark.parametrize(("env", "message"), [
    ({"XWAIT_SCHEMA_REGISTRY_URL": "localhost:8081"}, "Expected an http:// or https:// URL"),
    ({"XWAIT_CONSOLE_URL": "6066"}, "Expected an http:// or https:// URL"),
    ({"XWAIT_GC_THRESHOLD": "0"}, "XWAIT_GC_THRESHOLD='0': expected a number above zero"),
    ({"XWAIT_TIMER_TICK": "nan"}, "XWAIT_TIMER_TICK='nan': expected a number above zero"),
    ({"XWAIT_BATCH_LINGER": "-0.1"}, "XWAIT_BATCH_LINGER='-0.1': expected a number of 0 or more"),
    ({"XWAIT_BATCH_LINGER": "inf"}, "XWAIT_BATCH_LINGER='inf': expected a number of 0 or more"),
    ({"XWAIT_BATCH_LINGER": "2"}, "XWAIT_BATCH_LINGER='2': expected at most 1.0 s"),
    ({"XWAIT_BATCH_LINGER": "soon"}, "XWAIT_BATCH_LINGER='soon': expected a number of seconds"),
    ({"XWAIT_COMMIT_GRACE": "-1"}, "XWAIT_COMMIT_GRACE='-1': expected a number of 0 or more"),
    ({"XWAIT_COMMIT_GRACE": "nan"}, "XWAIT_COMMIT_GRACE='nan': expected a number of 0 or more"),
    ({"XWAIT_COMMIT_GRACE": "31"}, "XWAIT_COMMIT_GRACE='31': expected at most 30 s"),
    ({"XWAIT_COMMIT_GRACE": "later"}, "XWAIT_COMMIT_GRACE='later': expected a number of sec"),
    ({"XWAIT_PURE_PYTHON": "maybe"}, "XWAIT_PURE_PYTHON='maybe': expected 1 \\(on\\) or 0"),
    ({"XWAIT_SECURITY_PROTOCOL": "SSL", "XWAIT_SSL_CERTFILE": "/nonexistent.pem"},
     "XWAIT_SSL_CERTFILE='/nonexistent.pem': Expected a readable file"),
])
def test_unusable_settings_are_refused_naming_the_variable(env: dict[str, str],
                                                           message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        from_env(env)


def test_the_collector_threshold_is_raised_unless_set() -> None:
    assert from_env({}).gc_threshold == 20_000
    assert from_env({"XWAIT_GC_THRESHOLD": "700"}).gc_threshold == 700


def test_batches_linger_50_ms_unless_set_and_zero_starts_each_at_once() -> None:
    assert from_env({}).batch_linger == 0.05
    assert from_env({"XWAIT_BATCH_LINGER": "0"}).batch_linger == 0.0
    assert from_env({"XWAIT_BATCH_LINGER": "0.2"}).batch_linger == 0.2


def test_the_commit_grace_is_automatic_unless_set() -> None:
    assert from_env({}).commit_grace is None
    assert from_env({"XWAIT_COMMIT_GRACE": "auto"}).commit_grace is None
    assert from_env({"XWAIT_COMMIT_GRACE": "0"}).commit_grace == 0.0
    assert from_env({"XWAIT_COMMIT_GRACE": "0.5"}).commit_grace == 0.5


def test_the_native_record_path_decides_unless_pure_python_is_asked_for() -> None:
    assert from_env({}).pure_python is False
    assert from_env({"XWAIT_PURE_PYTHON": "0"}).pure_python is False
    assert from_env({"XWAIT_PURE_PYTHON": "1"}).pure_python is True
    assert from_env({"XWAIT_PURE_PYTHON": "true"}).pure_python is True
