"""What the SDK's producer and consumer share: the reachability probe and its timeout."""

from __future__ import annotations

import logging

from confluent_kafka import Consumer, KafkaException, Producer

from streams.client.errors import TopicMissing
from streams.errors import KafkaUnavailable

CONNECT_TIMEOUT_S = 5.0
"""How long the first metadata request may take before the broker counts as unreachable.
A healthy broker answers in milliseconds; much shorter fails on a slow remote cluster,
much longer leaves a CLI user staring at a silent terminal."""

LIBRDKAFKA_LOGGER = logging.getLogger("streams.client.librdkafka")
"""librdkafka's own log lines (connection refused, ...) go here instead of raw stderr."""


def known_topics(client: Producer | Consumer, bootstrap: str, wanted: str) -> set[str]:
    """One metadata round trip: the broker's topics, after checking ``wanted`` is among them."""
    try:
        meta = client.list_topics(timeout=CONNECT_TIMEOUT_S)
    except KafkaException as exc:
        raise KafkaUnavailable(
            f"{bootstrap} did not answer a metadata request within "
            f"{CONNECT_TIMEOUT_S:g} s: {exc.args[0]}") from exc
    if wanted not in meta.topics:
        raise TopicMissing(wanted)
    return set(meta.topics)
