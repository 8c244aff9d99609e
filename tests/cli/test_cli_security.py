"""Security flags stand for their XWAIT_* variables and are checked the same way."""

from __future__ import annotations

import pytest

from streams.cli import build_parser, main, settings_from


def test_security_flags_override_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XWAIT_SECURITY_PROTOCOL", "PLAINTEXT")
    monkeypatch.setenv("XWAIT_SASL_PASSWORD", "s3cret")
    args = build_parser().parse_args(["topics", "describe", "--security-protocol", "sasl_ssl",
                                      "--sasl-username", "ops", "--ssl-cafile", "/ca.pem"])
    security = settings_from(args).security
    assert security.protocol == "SASL_SSL"
    assert security.confluent() == {
        "security.protocol": "SASL_SSL", "sasl.username": "ops", "sasl.password": "s3cret",
        "ssl.ca.location": "/ca.pem",
    }


def test_sasl_without_credentials_is_a_configuration_error_with_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("XWAIT_SASL_USERNAME", raising=False)
    monkeypatch.delenv("XWAIT_SASL_PASSWORD", raising=False)
    assert main(["topics", "describe", "--security-protocol", "SASL_SSL"]) == 2
    assert "set XWAIT_SASL_USERNAME and XWAIT_SASL_PASSWORD" in capsys.readouterr().err
