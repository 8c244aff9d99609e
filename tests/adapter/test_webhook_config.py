"""The webhook adapter's routes, templates, headers and body, without Kafka."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from streams.adapter import sending, webhook
from streams.adapter.webhook import Route, headers_of, load_config, template_values
from streams.cli import adapter as cli_adapter
from streams.client import Action
from streams.client.records import ActionKind
from streams.errors import ConfigError

pytestmark = [pytest.mark.rule12]

ACTION = Action(action_id="a-1", correlation_key="k1~carrier a", definition="expense-approval",
                tenant=None, action=ActionKind.SEND_REQUEST, party="carrier a", level=0,
                attempt=1, payload={"to": "sam@example.com"}, at=5, send_attempt=2,
                idempotency_key="a-0")


def _config(tmp_path: Path, text: str, **env: str) -> webhook.WebhookConfig:
    path = tmp_path / "hooks.yaml"
    path.write_text(text)
    return load_config(path, env=env)


def test_the_first_matching_route_names_the_url_with_the_action_s_fields(
        tmp_path: Path) -> None:
    config = _config(tmp_path, """
timeout: PT2S
concurrency: 3
retries: 1
max_retry_wait: PT5S
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
    assert config.retry == sending.RetryPolicy(retries=1, max_wait_s=5.0)
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
    ("routes: [{url: http://x}]\nretries: -1\n", "field 'retries'"),
    ("routes: [{url: http://x}]\nmax_retry_wait: 0\n", "field 'max_retry_wait'"),
    ("routes: [{url: http://x}]\nmax_wait: PT1S\n", "field 'max_wait'"),
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


def test_the_retry_policy_defaults_to_three_retries_of_at_most_30_s_each() -> None:
    config = load_config(None, url="http://hooks/{definition}")
    assert config.retry == sending.RetryPolicy(retries=3, max_wait_s=30.0)
    assert load_config(None, url="http://x", retries=0,
                       max_retry_wait_s=2.0).retry == sending.RetryPolicy(0, 2.0)


def test_every_post_of_one_action_is_keyed_by_its_first_send_attempt_s_id() -> None:
    route = Route(url="http://x", headers={"X-Token": "t"})
    retry = headers_of(ACTION, route)  # send attempt 2
    assert (retry["Idempotency-Key"], retry["X-Xwait-Action-Id"]) == ("a-0", "a-1")
    first = headers_of(dataclasses.replace(ACTION, action_id="a-0", send_attempt=1), route)
    assert first["Idempotency-Key"] == retry["Idempotency-Key"]
    assert first["X-Xwait-Action-Id"] != retry["X-Xwait-Action-Id"]
    assert retry["X-Token"] == "t" and retry["X-Xwait-Correlation-Key"] == "k1~carrier a"
    # An action written before the key existed: its own id (exact for a first attempt).
    old = dataclasses.replace(ACTION, idempotency_key=None, send_attempt=1)
    assert headers_of(old, route)["Idempotency-Key"] == "a-1"
    assert template_values(ACTION)["idempotencyKey"] == "a-0"


def test_the_body_is_the_action_with_its_payload_nested() -> None:
    body = json.loads(webhook.body_of(ACTION))
    assert body["payload"] == {"to": "sam@example.com"}
    assert (body["actionId"], body["sendAttempt"], body["correlationKey"]) == (
        "a-1", 2, "k1~carrier a")
    assert body["idempotencyKey"] == "a-0"


def test_the_cli_s_defaults_are_the_adapter_s() -> None:
    assert cli_adapter.DEFAULT_METRICS_PORT == webhook.DEFAULT_METRICS_PORT
    assert cli_adapter.DEFAULT_RETRIES == sending.DEFAULT_RETRIES
    assert cli_adapter.DEFAULT_MAX_RETRY_WAIT_S == sending.DEFAULT_MAX_RETRY_WAIT_S
