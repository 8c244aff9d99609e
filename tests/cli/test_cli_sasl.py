"""SASL against a real SASL_PLAINTEXT listener (a second broker from scripts/kafka --sasl-port)."""

from __future__ import annotations

import pytest

from streams import codec
from streams.cli import main
from streams.codec import RecordType
from streams.config import from_env
from tests.conftest import SaslBroker
from tests.prefixes import unique_prefix
from tests.records import first_records


def _sasl_env(monkeypatch: pytest.MonkeyPatch, broker: SaslBroker, password: str) -> None:
    monkeypatch.setenv("XWAIT_SECURITY_PROTOCOL", "SASL_PLAINTEXT")
    monkeypatch.setenv("XWAIT_SASL_USERNAME", broker.username)
    monkeypatch.setenv("XWAIT_SASL_PASSWORD", password)
    monkeypatch.delenv("XWAIT_SASL_MECHANISM", raising=False)  # the case that broke


@pytest.mark.kafka
def test_sasl_without_a_mechanism_creates_topics_and_starts_a_wait_with_plain(
    sasl_broker: SaslBroker, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # given SASL credentials but no mechanism (before: "No provider for SASL mechanism GSSAPI")
    _sasl_env(monkeypatch, sasl_broker, sasl_broker.password)
    prefix = unique_prefix("s")
    flags = ["--bootstrap", sasl_broker.sasl_bootstrap, "--prefix", prefix, "--partitions", "2"]
    # when a user creates the topics and starts a wait
    assert main(["topics", "create", *flags]) == 0
    capsys.readouterr()
    assert main(["start", "expense-approval", *flags]) == 0
    key = capsys.readouterr().out.strip()
    # then the request is on the SASL broker's topic
    settings = from_env().with_overrides(bootstrap=sasl_broker.sasl_bootstrap,
                                         topic_prefix=prefix)
    [request] = first_records(settings, "requests", 1)
    assert codec.decode(RecordType.START_WAIT, request.value())["correlationKey"] == key


@pytest.mark.kafka
def test_a_wrong_sasl_password_fails_in_one_line_that_says_authentication_failed(
    sasl_broker: SaslBroker, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _sasl_env(monkeypatch, sasl_broker, "not-the-password")
    code = main(["start", "expense-approval", "--bootstrap", sasl_broker.sasl_bootstrap,
                 "--prefix", unique_prefix("s")])
    err = capsys.readouterr().err
    assert code == 3
    assert len(err.strip().splitlines()) == 1
    assert "Authentication failed" in err
