"""The webhook adapter reports a batch's results until Kafka takes them, then commits it.

In a busy CI round the adapter exited (3, Kafka unreachable) when the broker
took more than 5 s to answer its first report, and every later test of its
module waited for POSTs that never came.  Kafka, the HTTP side and the
commit are stood in for here; `tests/e2e/test_webhook_adapter.py` runs the
adapter against the real broker.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path
from typing import Any, cast

import pytest
from confluent_kafka import Message

from streams.adapter import webhook
from streams.adapter.sending import Delivery
from streams.adapter.webhook import WebhookAdapter, load_config
from streams.client import Action, DeliveryFailed, XwaitClient
from streams.client.records import ActionKind
from streams.config import Settings
from streams.errors import KafkaUnavailable

pytestmark = [pytest.mark.rule12]

SENT = Action(action_id="a-1", correlation_key="k1", definition="hooked", tenant=None,
              action=ActionKind.SEND_REQUEST, party=None, level=0, attempt=1, payload={},
              at=5, send_attempt=1, idempotency_key="a-1")
REMINDED = dataclasses.replace(SENT, action_id="a-2", correlation_key="k2",
                               action=ActionKind.SEND_REMINDER, idempotency_key="a-2")


class FlakyKafka:
    """The adapter's XwaitClient: its first `refusals` flushes (or reports) fail."""

    def __init__(self, refusals: list[Exception], on_refusal: Any = None) -> None:
        self.refusals = refusals
        self.on_refusal = on_refusal
        self.pending: list[str] = []
        self.taken: list[str] = []
        self.reports = 0

    def report_delivered(self, key: str, action_id: str, at: int, wait: bool) -> None:
        self.reports += 1
        self.pending.append(action_id)

    def report_failed(self, key: str, action_id: str, error: str, permanent: bool, at: int,
                      wait: bool) -> None:
        self.report_delivered(key, action_id, at, wait)

    def flush(self) -> int:
        pending, self.pending = self.pending, []
        if self.refusals:
            if self.on_refusal is not None:
                self.on_refusal()
            raise self.refusals.pop(0)
        self.taken += pending
        return len(pending)


class Adapter(WebhookAdapter):
    """Its batches hold actions, every POST is delivered, and its commits are recorded."""

    def __init__(self, settings: Settings, config: webhook.WebhookConfig) -> None:
        super().__init__(settings, config)
        self.committed: list[list[Any]] = []

    def _decode(self, msg: Any) -> Action | None:
        return cast(Action, msg)

    def _deliver(self, action: Action, route: webhook.Route) -> tuple[Action, Delivery]:
        return action, Delivery(delivered=True)

    def _commit(self, batch: Iterable[Any]) -> None:
        self.committed.append(list(batch))


@pytest.fixture
def adapter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Adapter:
    monkeypatch.setattr(webhook, "REPORT_RETRY_S", 0.01)
    config_path = tmp_path / "hooks.yaml"
    config_path.write_text("routes:\n  - url: http://127.0.0.1:9/{actionId}\n")
    return Adapter(Settings(bootstrap="127.0.0.1:9", topic_prefix="r"),
                   dataclasses.replace(load_config(config_path), metrics_port=0))


def test_results_kafka_did_not_take_are_reported_again_and_the_batch_committed_once(
    adapter: Adapter,
) -> None:
    kafka = FlakyKafka([KafkaUnavailable("no answer within 5.0 s"),
                        DeliveryFailed([("k1", "not confirmed within 30 s")], 1)])
    adapter._client = cast(XwaitClient, kafka)
    adapter.handle(cast(list[Message], [SENT, REMINDED]))
    assert sorted(kafka.taken) == ["a-1", "a-2"]
    assert kafka.reports == 6, "both results, reported three times"
    assert adapter.committed == [[SENT, REMINDED]]
    assert adapter.metrics.report_retries._value.get() == 2


def test_a_stop_while_results_are_reported_again_commits_nothing(
    adapter: Adapter,
) -> None:
    kafka = FlakyKafka([KafkaUnavailable("no answer")] * 100, on_refusal=adapter.stop)
    adapter._client = cast(XwaitClient, kafka)
    adapter.handle(cast(list[Message], [SENT]))
    assert adapter.committed == []
    assert kafka.taken == [] and kafka.reports == 1
