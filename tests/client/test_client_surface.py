"""The SDK's public surface is small, listed and stable."""

from __future__ import annotations

import streams.client
from streams.errors import XwaitError


def test_all_lists_exactly_the_public_names_and_each_exists() -> None:
    assert streams.client.__all__ == [
        "Action", "ActionKind", "ClientError", "DeliveryFailed", "InvalidRequest",
        "KafkaUnavailable", "NoSuchWait", "Outcome", "OutcomeKind", "Rejected", "ResultTimeout",
        "TopicMissing", "TraceEntry",
        "UndecodableOutput", "UnknownChannel", "UnknownDefinition", "WaitSpec", "XwaitClient",
        "XwaitConsumer", "new_correlation_key",
    ]
    for name in streams.client.__all__:
        assert getattr(streams.client, name).__module__.startswith("streams.")


def test_every_sdk_error_hangs_from_the_one_root() -> None:
    from streams.client import (
        ClientError,
        DeliveryFailed,
        InvalidRequest,
        NoSuchWait,
        ResultTimeout,
        TopicMissing,
        UndecodableOutput,
        UnknownChannel,
        UnknownDefinition,
    )

    assert issubclass(ClientError, XwaitError)
    for leaf in (DeliveryFailed, InvalidRequest, TopicMissing, UndecodableOutput):
        assert issubclass(leaf, ClientError)
    assert issubclass(UnknownDefinition, InvalidRequest)
    assert issubclass(UnknownChannel, InvalidRequest)
    assert issubclass(NoSuchWait, InvalidRequest)
    assert issubclass(ResultTimeout, ClientError) and issubclass(ResultTimeout, TimeoutError)
