"""End offsets while a broker is down: an offset of -1001 is no answer, and never returned.

librdkafka 2.x answers a ListOffsets request for a partition whose leader is a
dead broker with offset -1001 (OFFSET_INVALID) and no error, at the request's
timeout, for as long as that broker is down, even once the partition has a new
leader; a new client finds the new leader (measured on a three-node cluster).
The fake admin clients here answer that way: the first client made knows only
the dead leader, later ones the new one.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from streams.processor.gaps import EndOffsets
from streams.processor.tuning import TUNING

ENDS = {("t", 0): 120, ("t", 1): 75, ("t", 2): 9}


class DeadLeader:
    """Admin clients of a cluster whose broker leading `dead` is down."""

    def __init__(self, dead: set[tuple[str, int]], stale_clients: int = 1) -> None:
        self.dead = dead
        self.stale_clients = stale_clients  # how many clients made keep the old leader
        self.made = 0
        self.asked: list[tuple[int, set[tuple[str, int]]]] = []  # (client, partitions)
        self.timeouts: list[float] = []

    def __call__(self, conf: dict[str, Any]) -> Any:
        self.made += 1
        return _Admin(self, self.made, stale=self.made <= self.stale_clients)


class _Admin:
    def __init__(self, cluster: DeadLeader, number: int, stale: bool) -> None:
        self.cluster, self.number, self.stale = cluster, number, stale

    def list_offsets(self, specs: dict[TopicPartition, Any], **kwargs: Any
                     ) -> dict[TopicPartition, Future[Any]]:
        asked = {(tp.topic, tp.partition) for tp in specs}
        self.cluster.asked.append((self.number, asked))
        self.cluster.timeouts.append(kwargs["request_timeout"])
        answers: dict[TopicPartition, Future[Any]] = {}
        for tp in specs:
            future: Future[Any] = Future()
            key = (tp.topic, tp.partition)
            offset = -1001 if self.stale and key in self.cluster.dead else ENDS[key]
            future.set_result(SimpleNamespace(offset=offset))
            answers[tp] = future
        return answers


def test_a_partition_answered_with_an_invalid_offset_is_asked_again_through_a_new_client(
) -> None:
    cluster = DeadLeader({("t", 1)})
    got = EndOffsets({}, make_admin=cluster).get(list(ENDS))
    assert got == ENDS
    assert [n for n, _ in cluster.asked] == [1, 2]
    assert cluster.asked[1][1] == {("t", 1)}, "only the unanswered partition is asked again"


def test_a_partial_probe_returns_the_answered_partitions_and_the_next_uses_a_new_client(
) -> None:
    cluster = DeadLeader({("t", 1)})
    ends = EndOffsets({}, make_admin=cluster)
    first = ends.get(list(ENDS), partial=True)
    assert first == {("t", 0): 120, ("t", 2): 9}, "no -1001 taken for an end offset"
    assert ends.get(list(ENDS), partial=True) == ENDS
    assert [n for n, _ in cluster.asked] == [1, 2]


def test_an_offset_never_answered_is_an_error_at_the_timeout_not_an_end_offset() -> None:
    cluster = DeadLeader({("t", 2)}, stale_clients=10**6)
    started = time.monotonic()
    with pytest.raises(KafkaException, match=r"not answered within 1s.*t\[2\]"):
        EndOffsets({}, make_admin=cluster,
                   tuning=replace(TUNING, offsets_leader_retry_s=0.01)).get(list(ENDS),
                                                                           timeout=1.0)
    assert time.monotonic() - started < 3
    assert cluster.made > 2


def test_each_request_waits_at_most_the_attempt_time() -> None:
    cluster = DeadLeader(set())
    EndOffsets({}, make_admin=cluster).get(list(ENDS), timeout=30.0)
    assert cluster.timeouts == [TUNING.offsets_attempt_s]


class NoLeaders:
    """Admin clients whose first `stale_clients` answer every request with `code` for
    good (the cached metadata of a client that looked leaders up while the broker
    restarted), later ones with the end offsets."""

    def __init__(self, code: int, stale_clients: int = 1) -> None:
        self.code = code
        self.stale_clients = stale_clients
        self.made = 0

    def __call__(self, conf: dict[str, Any]) -> Any:
        self.made += 1
        return _Failing(self.code if self.made <= self.stale_clients else None)


class _Failing:
    def __init__(self, code: int | None) -> None:
        self.code = code

    def list_offsets(self, specs: dict[TopicPartition, Any], **kwargs: Any
                     ) -> dict[TopicPartition, Future[Any]]:
        answers: dict[TopicPartition, Future[Any]] = {}
        for tp in specs:
            future: Future[Any] = Future()
            if self.code is None:
                future.set_result(SimpleNamespace(offset=ENDS[(tp.topic, tp.partition)]))
            else:
                future.set_exception(KafkaException(KafkaError(self.code, "No leaders found")))
            answers[tp] = future
        return answers


def test_no_leaders_found_is_asked_again_through_a_new_client() -> None:
    """A worker never restarted stopped deciding after a broker restart: its probe's
    client answered "No leaders found" for good, so stream time stood still."""
    cluster = NoLeaders(KafkaError._NOENT)  # noqa: SLF001 - librdkafka's own code
    ends = EndOffsets({}, make_admin=cluster)
    assert ends.get(list(ENDS), partial=True) == {}
    assert ends.get(list(ENDS), partial=True) == ENDS
    assert cluster.made == 2


def test_a_client_that_cannot_reach_the_broker_is_replaced_after_a_while() -> None:
    cluster = NoLeaders(KafkaError._TRANSPORT)  # noqa: SLF001 - librdkafka's own code
    ends = EndOffsets({}, make_admin=cluster,
                      tuning=replace(TUNING, offsets_same_client_s=0.05, offsets_attempt_s=0.01))
    assert ends.get(list(ENDS), partial=True) == {}
    assert ends.get(list(ENDS), partial=True) == {}, "asked again on the same client at first"
    assert cluster.made == 1
    time.sleep(0.06)
    assert ends.get(list(ENDS), partial=True) == {}
    assert ends.get(list(ENDS), partial=True) == ENDS
    assert cluster.made == 2


def test_a_partition_unanswered_for_long_is_named_in_a_warning_once_a_while(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A partial probe leaves an unanswered partition out without a word, and its stream
    time stands still: a worker in a busy cluster run decided nothing for 60 s with a
    silent log.  After `offsets_unanswered_warn_s` the partition is named, not again
    before `offsets_warn_every_s`, and its answer is told."""
    cluster = DeadLeader({("t", 1)}, stale_clients=1_000)  # every client asks the dead one
    ends = EndOffsets({}, make_admin=cluster, tuning=replace(
        TUNING, offsets_unanswered_warn_s=0.05, offsets_warn_every_s=60.0))
    caplog.set_level("INFO", logger="streams.processor.gaps")

    def warnings() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]

    ends.get(list(ENDS), partial=True)
    assert warnings() == [], "not yet: a leader moving takes a moment"
    time.sleep(0.06)
    ends.get([("t", 0)], partial=True)  # a probe of other partitions forgets nothing
    ends.get(list(ENDS), partial=True)
    [warning] = warnings()
    assert "1 partition(s) unanswered" in warning and "t[1]" in warning
    ends.get(list(ENDS), partial=True)
    assert len(warnings()) == 1, "once a while, not once a probe"

    cluster.dead = set()
    assert ends.get(list(ENDS), partial=True) == ENDS
    assert any("answered again" in r.getMessage() for r in caplog.records)
