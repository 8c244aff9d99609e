"""The webhook adapter's routes, templates and POST results, without Kafka: a real local
HTTP server fails on purpose."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from streams.adapter import webhook
from streams.adapter.webhook import Route, load_config, post, template_values
from streams.cli import adapter as cli_adapter
from streams.client import Action
from streams.client.records import ActionKind
from streams.errors import ConfigError
from tests.adapter.hooks import Script, webhook_server

pytestmark = [pytest.mark.rule12]

ACTION = Action(action_id="a-1", correlation_key="k1~carrier a", definition="expense-approval",
                tenant=None, action=ActionKind.SEND_REQUEST, party="carrier a", level=0,
                attempt=1, payload={"to": "sam@example.com"}, at=5, send_attempt=2)


def _config(tmp_path: Path, text: str, **env: str) -> webhook.WebhookConfig:
    path = tmp_path / "hooks.yaml"
    path.write_text(text)
    return load_config(path, env=env)


def test_the_first_matching_route_names_the_url_with_the_action_s_fields(
        tmp_path: Path) -> None:
    config = _config(tmp_path, """
timeout: PT2S
concurrency: 3
routes:
  - definition: vendor-quote
    url: http://quotes/{action}
  - definition: [expense-approval]
    action: [SEND_REQUEST, SEND_REMINDER]
    url: http://mail/${MAIL_HOST}/{definition}/{action}?key={waitKey}&party={party}
    headers: {Authorization: "Bearer ${MAIL_TOKEN}"}
  - url: http://everything-else/{actionId}
""", MAIL_HOST="mx1", MAIL_TOKEN="s3cret")
    assert (config.timeout_s, config.concurrency) == (2.0, 3)
    route = next(r for r in config.routes if r.matches(ACTION))
    assert route.url.format_map(template_values(ACTION)) == (
        "http://mail/mx1/expense-approval/SEND_REQUEST?key=k1&party=carrier%20a")
    assert route.headers == {"Authorization": "Bearer s3cret"}
    escalation = dataclasses.replace(ACTION, action=ActionKind.RUN_ESCALATION)
    assert next(r for r in config.routes if r.matches(escalation)).url == (
        "http://everything-else/{actionId}")


@pytest.mark.parametrize(("text", "expected"), [
    ("routes: []\n", "field 'routes'"),
    ("routes: [{url: ftp://x}]\n", "http:// or https://"),
    ("routes: [{url: 'http://x/{nope}'}]\n", "{nope}"),
    ("routes: [{url: http://x, defintion: a}]\n", "routes[0].defintion"),
    ("routes: [{url: 'http://x/${UNSET_VARIABLE}'}]\n", "${UNSET_VARIABLE}"),
    ("routes: [{url: http://x}]\ntimeout: soon\n", "field 'timeout'"),
    ("routes: [{url: http://x}]\nconcurrency: 0\n", "field 'concurrency'"),
    ("routes: [{url: http://x, action: []}]\n", "routes[0].action"),
    ("- a list\n", "(document)"),
])
def test_a_wrong_configuration_is_refused_naming_the_field(
        tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _config(tmp_path, text)
    assert expected in str(caught.value) and "Expected" in str(caught.value)


def test_one_url_template_from_the_environment_is_a_route_for_everything() -> None:
    config = load_config(None, url="http://hooks/{definition}")
    assert config.routes == (Route(url="http://hooks/{definition}"),)
    with pytest.raises(ConfigError, match="neither"):
        load_config(None)


@pytest.mark.parametrize(("status", "delivered", "permanent"), [
    (200, True, False), (204, True, False), (404, False, True), (410, False, True),
    (500, False, False), (503, False, False), (0, False, False),
])
def test_a_post_is_delivered_on_2xx_failed_for_good_on_4xx_else_failed(
        status: int, delivered: bool, permanent: bool) -> None:
    script = Script({"/": [status]}, hang_s=1.5)
    with webhook_server(script) as base:
        result = post(f"{base}/hook", b'{"a": 1}', {"Idempotency-Key": "a-1"}, timeout=0.5)
    assert (result.delivered, result.permanent) == (delivered, permanent)
    if status >= 400:
        assert result.error is not None and result.error.startswith(f"HTTP {status} ")
        assert result.error.endswith(": mailbox unavailable") and result.http_status == status
    if status == 0:
        assert result.error is not None and "timed out" in result.error
    (hit,) = script.hits
    assert hit.headers["Idempotency-Key"] == "a-1" and hit.body == {"a": 1}


def test_the_body_is_the_action_with_its_payload_nested() -> None:
    body = json.loads(webhook.body_of(ACTION))
    assert body["payload"] == {"to": "sam@example.com"}
    assert (body["actionId"], body["sendAttempt"], body["correlationKey"]) == (
        "a-1", 2, "k1~carrier a")


def test_the_cli_s_default_metrics_port_is_the_adapter_s() -> None:
    assert cli_adapter.DEFAULT_METRICS_PORT == webhook.DEFAULT_METRICS_PORT
