"""Security flags stand for their XWAIT_* variables and are checked the same way."""

from __future__ import annotations

from pathlib import Path

import pytest

from streams.cli import build_parser, main, settings_from
from streams.config import Security


def test_security_flags_override_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    monkeypatch.setenv("XWAIT_SECURITY_PROTOCOL", "PLAINTEXT")
    monkeypatch.setenv("XWAIT_SASL_PASSWORD", "s3cret")
    args = build_parser().parse_args(["topics", "describe", "--security-protocol", "sasl_ssl",
                                      "--sasl-username", "ops", "--ssl-cafile", str(ca)])
    security = settings_from(args).security
    assert security.protocol == "SASL_SSL"
    assert security.confluent() == {
        "security.protocol": "SASL_SSL", "sasl.mechanisms": "PLAIN", "sasl.username": "ops",
        "sasl.password": "s3cret", "ssl.ca.location": str(ca),
    }


def test_sasl_without_a_mechanism_is_plain_as_the_readme_and_the_worker_say() -> None:
    # librdkafka's own default, GSSAPI, fails every client it is not built for
    security = Security(protocol="SASL_PLAINTEXT", sasl_username="u", sasl_password="p")
    assert security.confluent()["sasl.mechanisms"] == "PLAIN"
    scram = Security(protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", sasl_username="u",
                     sasl_password="p")
    assert scram.confluent()["sasl.mechanisms"] == "SCRAM-SHA-512"
    assert "sasl.mechanisms" not in Security().confluent()


def test_sasl_without_credentials_is_a_configuration_error_with_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("XWAIT_SASL_USERNAME", raising=False)
    monkeypatch.delenv("XWAIT_SASL_PASSWORD", raising=False)
    assert main(["topics", "describe", "--security-protocol", "SASL_SSL"]) == 2
    assert "set XWAIT_SASL_USERNAME and XWAIT_SASL_PASSWORD" in capsys.readouterr().err


def test_an_unknown_sasl_mechanism_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XWAIT_SASL_PASSWORD", "p")
    assert main(["topics", "describe", "--security-protocol", "SASL_PLAINTEXT",
                 "--sasl-username", "u", "--sasl-mechanism", "GSSAPI"]) == 2
    assert "Expected one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512" in capsys.readouterr().err


@pytest.mark.parametrize("content", [None, "not a certificate\n"])
def test_a_bad_ssl_cafile_is_a_configuration_error_in_one_line_not_a_traceback(
    content: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a CA file that does not exist, or that is no certificate
    ca = tmp_path / "ca.pem"
    if content is not None:
        ca.write_text(content)
    # when a command needs a Kafka client
    code = main(["start", "expense-approval", "--bootstrap", "127.0.0.1:1",
                 "--security-protocol", "SSL", "--ssl-cafile", str(ca)])
    # then it is refused as configuration, in one line
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("xwait: configuration error: ")
    assert len(err.strip().splitlines()) == 1
    assert ("Expected a readable file" in err) if content is None else ("ssl.ca.location" in err)
