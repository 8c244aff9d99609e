"""Failures surface as exceptions: refused deliveries, missing topics, an unreachable broker."""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import NewTopic

from streams.client import (
    ClientError,
    DeliveryFailed,
    KafkaUnavailable,
    TopicMissing,
    XwaitClient,
)
from streams.config import Settings
from tests.made_topics import create_topics


def test_a_record_the_broker_refuses_raises_delivery_failed_naming_its_key(
    settings: Settings,
) -> None:
    topic = settings.topic("requests")
    create_topics(settings.bootstrap,
                  NewTopic(topic, 1, 1, config={"max.message.bytes": "1024"}))

    with XwaitClient(settings) as client:
        client.start_wait("expense-approval", correlation_key="small")
        with pytest.raises(DeliveryFailed) as caught:
            client.start_wait("expense-approval", correlation_key="too-big",
                              payload={"blob": "x" * 4000})
    assert caught.value.failed[0][0] == "too-big"
    assert "too large" in caught.value.failed[0][1].lower()
    assert caught.value.delivered == 0


def test_a_missing_topic_is_named_before_anything_is_produced(settings: Settings) -> None:
    with XwaitClient(settings) as client, pytest.raises(TopicMissing) as caught:
        client.start_wait("expense-approval")
    assert caught.value.topic == settings.topic("requests")
    assert "xwait topics create" in str(caught.value)


def test_an_unreachable_broker_raises_kafka_unavailable_within_its_connect_timeout() -> None:
    """The SDK's clients follow `Settings.connect_timeout` (XWAIT_CONNECT_TIMEOUT), as the
    CLI does: a test's clients under load once gave up after the default 5 s though
    their settings said 30."""
    began = time.monotonic()
    with XwaitClient(Settings(connect_timeout=1.0), bootstrap="127.0.0.1:1") as client:
        with pytest.raises(KafkaUnavailable, match="127.0.0.1:1 did not answer a metadata "
                           "request within 1.0 s"):
            client.cancel("k", "gone")
        with pytest.raises(KafkaUnavailable):
            client.subscribe("outcomes")
    assert time.monotonic() - began < 5


def test_except_client_error_catches_a_broker_that_is_down() -> None:
    """A caller that handles "the SDK could not do it" in one place is not surprised by
    the one failure it sees most in production."""
    caught: list[ClientError] = []
    with XwaitClient(Settings(connect_timeout=1.0), bootstrap="127.0.0.1:1",
                     check_keys=False) as client:
        for send in (lambda: client.start_wait("expense-approval"),
                     lambda: client.reply("k", {"decision": "approved"}, channel="portal"),
                     lambda: client.subscribe("outcomes")):
            try:
                send()
            except ClientError as exc:
                caught.append(exc)
    assert len(caught) == 3 and all(isinstance(e, KafkaUnavailable) for e in caught)
