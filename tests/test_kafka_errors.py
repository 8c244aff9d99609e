"""A Kafka exception is read the same way everywhere, whatever it carries."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from streams.kafka_errors import error_code, error_text, kafka_error


def test_the_error_librdkafka_raised_is_read_with_its_code_and_text() -> None:
    exc = KafkaException(KafkaError(KafkaError.TOPIC_ALREADY_EXISTS, "Topic 'x' already exists."))
    err = kafka_error(exc)
    assert err is not None and err.code() == KafkaError.TOPIC_ALREADY_EXISTS
    assert error_code(exc) == KafkaError.TOPIC_ALREADY_EXISTS
    assert error_text(exc) == "Topic 'x' already exists."


def test_an_exception_without_a_kafka_error_has_no_code_and_keeps_its_message() -> None:
    # confluent-kafka's own argument checks raise it with a plain message; a
    # caller asking for the code must get None, not an AttributeError.
    for exc, text in ((KafkaException("No such configuration property"),
                       "No such configuration property"),
                      (KafkaException(), "")):
        assert kafka_error(exc) is None and error_code(exc) is None
        assert error_text(exc) == text
