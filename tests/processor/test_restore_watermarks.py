"""A restore asks its partition's watermarks again while the partition's leader moves.

Right after a broker thawed, the changelog reader's watermark question was
answered "Unknown partition" from librdkafka's metadata, and the worker taking
its partitions back stopped itself with RestoreFailed (issue 48, 4 runs of 5 on
a loaded machine).  `streams.processor.restore.watermarks` asks again after
fresh metadata, with a doubling wait, for a bounded time; an error that is not
a leader moving still fails the restore at once.  Here librdkafka's consumer is
scripted; tests/processor/test_restore.py shows a whole restore through it on
the real broker, tests/cluster/test_cluster_freeze.py the thaw itself.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from streams.processor.restore import RestoreFailed, watermarks
from streams.processor.tuning import TUNING, Tuning

TOPIC = "app-waits-changelog"
TP = TopicPartition(TOPIC, 3)
UNKNOWN_PARTITION = KafkaError(KafkaError._UNKNOWN_PARTITION)  # noqa: SLF001
FAST = replace(TUNING, watermark_timeout_s=5.0, watermark_retry_s=0.01,
               watermark_retry_max_s=0.02)

Answer = tuple[int, int] | KafkaError


class _Consumer:
    """librdkafka's consumer as `watermarks` asks it: answers in order, the last one
    again and again; the topics whose metadata it was asked for."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.asked = 0
        self.refreshed: list[str] = []

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float,
                              cached: bool) -> tuple[int, int]:
        assert tp == TP and timeout > 0 and not cached
        self.asked += 1
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, KafkaError):
            raise KafkaException(answer)
        return answer

    def list_topics(self, topic: str, timeout: float) -> None:
        self.refreshed.append(topic)


def _ask(consumer: _Consumer, tuning: Tuning = FAST,
         stop: threading.Event | None = None) -> tuple[tuple[int, int], list[str]]:
    retries: list[str] = []
    found = watermarks(consumer, TP, tuning, stop or threading.Event(),  # type: ignore[arg-type]
                       retries.append)
    return found, retries


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "streams.processor.restore" and r.levelno == logging.WARNING]


def test_a_partition_answered_unknown_after_a_thaw_is_asked_again_after_fresh_metadata(
    caplog: pytest.LogCaptureFixture,
) -> None:
    consumer = _Consumer(UNKNOWN_PARTITION, KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION),
                         KafkaError(KafkaError.LEADER_NOT_AVAILABLE), (0, 42))

    with caplog.at_level(logging.INFO, logger="streams.processor.restore"):
        found, retries = _ask(consumer)

    assert found == (0, 42)
    assert (consumer.asked, len(retries)) == (4, 3)
    assert consumer.refreshed == [TOPIC] * 3  # before each question asked again
    [warning] = _warnings(caplog)  # once a question, however many times it is asked
    assert "partition=3" in warning and "Unknown partition" in warning


def test_an_offset_below_zero_without_an_error_is_no_watermark_and_is_asked_again() -> None:
    """-1001 (not answered) as a high watermark would make every database look ahead of
    its changelog, and be thrown away."""
    found, retries = _ask(_Consumer((-1001, -1001), (7, 9)))

    assert found == (7, 9)
    assert len(retries) == 1


def test_an_error_that_is_no_leader_moving_fails_the_restore_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    consumer = _Consumer(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED), (0, 1))

    with pytest.raises(RestoreFailed, match="(?i)authoriz"):
        _ask(consumer)

    assert (consumer.asked, consumer.refreshed) == (1, [])
    assert _warnings(caplog) == []


def test_a_leader_that_never_comes_fails_the_restore_within_the_watermark_timeout() -> None:
    consumer = _Consumer(UNKNOWN_PARTITION)
    tuning = replace(FAST, watermark_timeout_s=0.3)

    started = time.monotonic()
    with pytest.raises(RestoreFailed, match=r"Unknown partition, still after \d+ questions"):
        _ask(consumer, tuning)

    assert time.monotonic() - started < tuning.watermark_timeout_s + 1.0
    assert consumer.asked > 2  # asked again meanwhile, not given up at the first


def test_a_reader_stopping_meanwhile_asks_no_more() -> None:
    stop = threading.Event()
    stop.set()
    consumer = _Consumer(UNKNOWN_PARTITION)

    with pytest.raises(RestoreFailed, match="stopping"):
        _ask(consumer, stop=stop)

    assert consumer.asked == 1
