"""Asking the broker directly: input records the fetch passed over, and end offsets.

When the intake (`streams.processor.intake`) takes a record above the next
offset it expects (`streams.processor.inputs`), the offsets in between were
either never records (transaction markers, aborted transactions, records
removed by retention) or records the fetch skipped.  A plain confluent-kafka
consumer, outside the group and committing nothing, reads exactly that
range; the intake applies whatever it returns before the record that
revealed the gap.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import (
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from streams.errors import XwaitError
from streams.headers import read_input_headers
from streams.kafka_errors import error_code
from streams.processor.model import InputRecord, Role
from streams.processor.tuning import TUNING, Tuning

log = logging.getLogger(__name__)

class GapReadFailed(XwaitError):
    """The offsets of a gap could not be read."""


def input_record(role: Role, msg: Message, follows: int | None = None) -> InputRecord:
    """A record as confluent-kafka delivered it (without an error), as the worker takes it."""
    ts_type, ts = msg.timestamp()
    headers = msg.headers()  # None when the record has none: the common case
    traceparent, receipt = read_input_headers(headers) if headers else (None, None)
    return InputRecord(role, msg.topic() or "", msg.partition() or 0, msg.offset() or 0,
                       msg.key(), msg.value(), ts if ts >= 0 else None,
                       ts_type == TIMESTAMP_LOG_APPEND_TIME, follows, traceparent, receipt)


class GapReader:
    """Reads a range of an input partition directly from the broker (a gap, a stall)."""

    def __init__(self, conf: dict[str, Any], tuning: Tuning = TUNING) -> None:
        self._conf = {**conf, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                      "isolation.level": "read_committed", "enable.partition.eof": False,
                      **tuning.prefetch()}
        # A range the broker does not deliver within this time is an outage: the
        # worker stops rather than guess (its inputs are read again on restart).
        self._timeout_s = tuning.gap_read_timeout_s

    def read(self, role: Role, topic: str, partition: int, start: int, stop: int,
             limit: int | None = None) -> list[InputRecord]:
        """The records of offsets [start, stop) that exist, or the first `limit` of them.

        It is done when a record at `stop` or later arrives, or when the
        consumer's position passes `stop` (the range may end at the log's end,
        or in transaction markers, which are never delivered).  A consumer of
        its own each time: a reused one reports the position of its previous
        assignment until it has fetched again.  Blocking: run it in a thread.
        """
        consumer = Consumer(self._conf)
        out: list[InputRecord] = []
        give_up = time.monotonic() + self._timeout_s
        where = TopicPartition(topic, partition)
        try:
            consumer.assign([TopicPartition(topic, partition, start)])
            while True:
                for msg in consumer.consume(500, timeout=0.2):
                    if msg.error() is not None:
                        raise GapReadFailed(f"{topic}[{partition}]: {msg.error()}")
                    offset = msg.offset()
                    if offset is None or offset >= stop or (
                            limit is not None and len(out) >= limit):
                        return out
                    out.append(input_record(role, msg))
                if consumer.position([where])[0].offset >= stop:
                    return out
                if time.monotonic() > give_up:
                    raise GapReadFailed(f"{topic}[{partition}] offsets {start}..{stop - 1}: "
                                        f"not read within {self._timeout_s:.0f}s")
        except KafkaException as exc:
            raise GapReadFailed(f"{topic}[{partition}]: {exc}") from exc
        finally:
            consumer.close()


class EndOffsets:
    """End offsets (last stable offsets) or earliest offsets of partitions, on
    connections of its own.

    faust's consumer could ask too, but on the connection of its fetch: the
    broker answers a connection's requests in order, so the answer would wait
    behind a fetch that is long-polling for new records (1.5 s in faust).
    """

    def __init__(self, conf: dict[str, Any],
                 make_admin: Callable[[dict[str, Any]], Any] = AdminClient,
                 tuning: Tuning = TUNING) -> None:
        # Made now, not at the first request: an admin client asked right after
        # it was made sometimes answers only after a retry 1 s or 3 s later (2 of
        # 15 tries in a row), and the first request is the takeover's.
        self._conf = conf
        self._make_admin = make_admin
        self._attempt_s = tuning.offsets_attempt_s
        self._same_client_s = tuning.offsets_same_client_s
        self._leader_retry_s = tuning.offsets_leader_retry_s
        self._warn_s = tuning.offsets_unanswered_warn_s
        self._warn_every_s = tuning.offsets_warn_every_s
        self._admin = make_admin(conf)
        self._stale = False  # the last request left partitions unanswered: a new client
        self._unanswered_since: float | None = None  # this client's answers stopped
        # Since when each partition has gone unanswered, whichever the client, and when it
        # was last asked (one no longer asked, given up, is forgotten); the last warning.
        self._unanswered: dict[tuple[str, int], tuple[float, float]] = {}
        self._warned_at: float | None = None

    def replicas(self, topics: list[str], timeout: float = 2.0) -> int:
        """The most replicas any partition of `topics` has (blocking: run it in a thread);
        one metadata request."""
        found = self._admin.list_topics(timeout=timeout).topics
        most = 0
        for topic in topics:
            meta = found.get(topic)
            if meta is None or meta.error is not None:
                raise KafkaException(meta.error if meta is not None else KafkaError(
                    KafkaError.UNKNOWN_TOPIC_OR_PART, f"{topic}: no metadata"))
            most = max([most, *(len(p.replicas) for p in meta.partitions.values())])
        return most

    def get(self, partitions: list[tuple[str, int]], timeout: float = 10.0,
            earliest: bool = False, partial: bool = False) -> dict[tuple[str, int], int]:
        """(topic, partition) -> end offset, or with `earliest` the offset of the
        earliest record kept (blocking: run it in a thread).

        Each request waits at most `Tuning.offsets_attempt_s`.  A partition is answered only by
        an offset of 0 or more.  While a broker is down, librdkafka 2.x answers
        a ListOffsets request only at its timeout, and for each partition that
        broker led with offset -1001 (OFFSET_INVALID) and no error, again and
        again on the same client, even after the partition has a new leader
        (measured on a three-node cluster: every request of a long-lived client
        took its whole timeout until the broker was back, a minute later; a new
        client found the new leaders).  Taken for an end offset, -1001 proved a
        topic caught up that was not, and made a restore target of nothing.

        A partition not answered - offset -1001, or an error fresh metadata
        clears (FENCED_LEADER_EPOCH, NOT_LEADER...) - is asked again through a
        new admin client, until `timeout`; a broker away (the request did not
        reach it) through the same one, for at most `offsets_same_client_s`.  With
        `partial`, the partitions answered by the first request are returned and
        the others left out (the next call asks them again): stream time moves
        on for the partitions whose leaders answer while another waits for its own.
        """
        spec: Any = OffsetSpec  # its class methods are not typed
        give_up = time.monotonic() + timeout
        pending = list(partitions)
        out: dict[tuple[str, int], int] = {}
        while True:
            left = max(give_up - time.monotonic(), 0.1)
            if self._stale:
                self._admin = self._make_admin(self._conf)  # fresh metadata
                self._stale = False
                self._unanswered_since = None
            wait = min(left, self._attempt_s)
            futures = self._admin.list_offsets(
                {TopicPartition(t, p): spec.earliest() if earliest else spec.latest()
                 for t, p in pending},
                isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=wait)
            again: list[tuple[str, int]] = []
            moved = False
            for tp, future in futures.items():
                try:
                    info = future.result(timeout=wait + 1)
                except KafkaException as exc:
                    code = error_code(exc)
                    if code not in _LEADER_MOVING and code not in _BROKER_AWAY:
                        raise
                    again.append((tp.topic, tp.partition))
                    moved = moved or code in _LEADER_MOVING
                    # confluent-kafka gives every future of a failed request the same
                    # exception, which keeps the frames it was raised through: this
                    # one's too, with `self` and its admin client, until the garbage
                    # collector breaks the cycle - a client reconnecting meanwhile.
                    exc.__traceback__ = None
                    continue
                if info.offset < 0:  # not answered (see above)
                    again.append((tp.topic, tp.partition))
                    moved = True
                    continue
                out[(tp.topic, tp.partition)] = int(info.offset)
            now = time.monotonic()
            self._note_answers(out, again, moved, now)
            if not again:
                self._unanswered_since = None
                return out
            if self._unanswered_since is None:
                self._unanswered_since = now
            away_long = now - self._unanswered_since >= self._same_client_s
            self._stale = self._stale or moved or away_long
            if partial:
                return out
            if time.monotonic() >= give_up:
                raise KafkaException(KafkaError(
                    KafkaError._TIMED_OUT,  # noqa: SLF001 - librdkafka's own code
                    f"{len(again)} partition(s) not answered within {timeout:.0f}s, e.g. "
                    f"{again[0][0]}[{again[0][1]}]"))
            log.info("end offsets asked again partitions=%d: %s", len(again),
                     "a leader moved" if moved else "the broker is not answering")
            pending = again
            time.sleep(self._leader_retry_s)

    def _note_answers(self, answered: dict[tuple[str, int], int],
                      unanswered: list[tuple[str, int]], moved: bool, now: float) -> None:
        """A WARNING naming partitions unanswered for `offsets_unanswered_warn_s`, once each
        `offsets_warn_every_s` while any is: their stream time stands still meanwhile."""
        for tp in answered:
            self._unanswered.pop(tp, None)
        for tp in unanswered:
            self._unanswered[tp] = (self._unanswered.get(tp, (now, now))[0], now)
        self._unanswered = {tp: (since, asked) for tp, (since, asked) in self._unanswered.items()
                            if now - asked < self._warn_every_s}
        if not self._unanswered:
            if self._warned_at is not None:
                log.info("end offsets answered again: stream time moves on")
                self._warned_at = None
            return
        long = sorted(tp for tp, (since, _) in self._unanswered.items()
                      if now - since >= self._warn_s)
        if not long or (self._warned_at is not None
                        and now - self._warned_at < self._warn_every_s):
            return
        self._warned_at = now
        oldest = now - min(self._unanswered[tp][0] for tp in long)
        log.warning("end offsets of %d partition(s) unanswered for up to %.0f s, e.g. %s[%d] "
                    "(%s): their stream time stands still until their leader answers",
                    len(long), oldest, long[0][0], long[0][1],
                    "a leader moved" if moved else "the broker is not answering")


# Errors of a partition whose leader is moving: fresh metadata (a new client) clears them.
# "No leaders found" (_NOENT) too: a client that looked the leaders up while the only
# broker restarted kept answering it for good (its metadata is refreshed every
# topic.metadata.refresh.interval.ms, 5 min), and a worker never restarted stopped
# deciding after a broker restart in 2 of 6 runs of the crash test
# (`test_a_worker_never_restarted_lives_through_a_broker_restart`): its probes left those
# partitions unanswered, so their stream time stood still.
_LEADER_MOVING = frozenset({
    KafkaError.FENCED_LEADER_EPOCH, KafkaError.UNKNOWN_LEADER_EPOCH,
    KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.OFFSET_NOT_AVAILABLE, KafkaError.REQUEST_TIMED_OUT,
    KafkaError._NOENT,  # noqa: SLF001
})
# Errors of a broker away (the request did not reach it): the same client asks again.
_BROKER_AWAY = frozenset({  # librdkafka's local error codes start with "_"
    KafkaError._TRANSPORT,  # noqa: SLF001
    KafkaError._TIMED_OUT,  # noqa: SLF001
    KafkaError._ALL_BROKERS_DOWN,  # noqa: SLF001
})


__all__ = ["EndOffsets", "GapReadFailed", "GapReader", "input_record"]
