"""The `KafkaError` a confluent-kafka exception carries, read one way everywhere.

librdkafka's failures reach Python as ``KafkaException(KafkaError)``, and
callers decide by the error's code (retriable, fatal, a topic that already
exists).  But the exception is also raised with a plain message or nothing
(confluent-kafka's own argument checks, our tests' fakes), so
``exc.args[0].code()`` is an AttributeError or IndexError waiting for the
one failure that should have been reported clearly.  Kept apart from
`streams.errors`, which imports nothing, so the core never loads a Kafka
client.
"""

from __future__ import annotations

from confluent_kafka import KafkaError

__all__ = ["error_code", "error_text", "kafka_error"]


def kafka_error(exc: BaseException) -> KafkaError | None:
    """The KafkaError `exc` carries, if it carries one."""
    err = exc.args[0] if exc.args else None
    return err if isinstance(err, KafkaError) else None


def error_code(exc: BaseException) -> int | None:
    """The librdkafka error code `exc` carries, or None."""
    err = kafka_error(exc)
    return None if err is None else err.code()


def error_text(exc: BaseException) -> str:
    """What went wrong, for a message: the KafkaError's text, else the exception's."""
    err = kafka_error(exc)
    return err.str() if err is not None else str(exc.args[0] if exc.args else exc)
