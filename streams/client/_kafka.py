"""What the SDK's producer and consumer (and the CLI's admin) share.

The reachability probe and its timeout, and the one place where a
confluent-kafka client is built, so that a setting librdkafka refuses (an
unreadable CA file, a SASL mechanism it lacks) is a :class:`ConfigError`
with one line, not a traceback.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from streams.client._budget import CONNECT_TIMEOUT_S, answer_by, connect_timeout
from streams.client.errors import TopicMissing
from streams.config import LIBRDKAFKA_LOGGER, Settings
from streams.errors import ConfigError, KafkaUnavailable
from streams.kafka_errors import error_text

__all__ = ["CONNECT_TIMEOUT_S", "LIBRDKAFKA_LOGGER", "answer_by", "build", "connect_timeout",
           "known_topics", "probe"]

_C = TypeVar("_C", Producer, Consumer, AdminClient)

log = logging.getLogger(__name__)


class _LastError(logging.Handler):
    """Keeps librdkafka's latest error line: the reason behind a bare "transport failure".

    A metadata request that fails says only "Broker transport failure"; the
    log line before it says why ("SASL authentication error: Authentication
    failed: Invalid username or password"). The CLI silences librdkafka's
    log, so this is how that reason still reaches the one line it prints.
    """

    _PREFIX = re.compile(r"^\S+ \[[^\]]*\] \[[^\]]*\]: (?:\S+/\S+: )?")

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.message: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        self.message = self._PREFIX.sub("", record.getMessage()).strip()


_LAST_ERROR = _LastError()
LIBRDKAFKA_LOGGER.addHandler(_LAST_ERROR)


def build(factory: Callable[[dict[str, Any]], _C], conf: dict[str, Any]) -> _C:
    """``factory(conf)``, with librdkafka's refusal of a setting turned into a ConfigError."""
    try:
        return factory(conf)
    except KafkaException as exc:
        raise ConfigError("Expected Kafka client settings librdkafka accepts, but: "
                          f"{error_text(exc)}"
                          ) from exc


def known_topics(client: Producer | Consumer | AdminClient, settings: Settings,
                 wanted: str | None) -> set[str]:
    """One metadata round trip: the broker's topics, after checking ``wanted`` is among them
    (within ``settings.connect_timeout``, or the CLI's budget: `connect_timeout`)."""
    _LAST_ERROR.message = None
    bootstrap = settings.bootstrap
    timeout = connect_timeout(settings.connect_timeout)
    try:
        meta = client.list_topics(timeout=timeout)
    except KafkaException as exc:
        text = error_text(exc)
        client.poll(0)  # hands librdkafka's queued log lines to the logger (_LastError)
        why = f"; librdkafka: {_LAST_ERROR.message}" if _LAST_ERROR.message else ""
        raise KafkaUnavailable(
            f"{bootstrap} did not answer a metadata request within "
            f"{timeout:.1f} s ({text}{why}); check XWAIT_BOOTSTRAP, the security "
            "settings and that Kafka runs"
        ) from exc
    if wanted is not None and wanted not in meta.topics:
        raise TopicMissing(wanted)
    return set(meta.topics)


def probe(settings: Settings) -> set[str]:
    """Fail within XWAIT_CONNECT_TIMEOUT, in one line, when the broker does not answer.

    Used before work whose own failure against a dead broker is slow and loud
    (the topic admin's 15 s timeouts, faust's start-up traceback).
    """
    admin = build(AdminClient, settings.confluent(**{
        "socket.connection.setup.timeout.ms": int(settings.connect_timeout * 1000)}))
    return known_topics(admin, settings, None)
