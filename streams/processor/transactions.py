"""How one Kafka transaction is committed, aborted, or found fenced, with librdkafka.

The commit protocol (`streams.processor.commit`, whose docstring says why
each step is where it is) runs a transaction per partition and batch; what
librdkafka makes of one - a call that times out and carries on, records that
stand still after a broker restart, an abort that is or is not proof that
nothing was committed, a newer producer that took the transactional id - is
handled here, in the commit threads (blocking calls only).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from streams.headers import Headers
from streams.kafka_errors import kafka_error
from streams.processor.tuning import Tuning

log = logging.getLogger(__name__)

TIMED_OUT = KafkaError._TIMED_OUT  # noqa: SLF001 - librdkafka's public code
# What a commit raises when records failed while it flushed, before its EndTxn.
UNDELIVERED = KafkaError._INCONSISTENT  # noqa: SLF001 - librdkafka's public code
# What a producer whose transactional id a newer one took says (commit F1): librdkafka's
# own code, or the broker's; a produce on it says only _FATAL (`is_fenced`).
FENCED_CODES = frozenset({KafkaError._FENCED, KafkaError.PRODUCER_FENCED,  # noqa: SLF001
                          KafkaError.INVALID_PRODUCER_EPOCH})
_FATAL = KafkaError._FATAL  # noqa: SLF001 - librdkafka's public code


class Aborted(Exception):
    """A transaction failed and its abort was acknowledged: nothing of it is visible."""


class Fenced(Exception):
    """A newer producer holds the partition's transactional id: it moved to another owner."""


class Steps:
    """The tuning of a commit's steps, and when the latest step began (monotonic).

    Each step (a flush, a transaction's commit or abort, an init) is bounded
    by the client; the worker's watchdog stops a worker one of whose steps
    has not returned after `Tuning.commit_hang_s` (`started`).
    """

    def __init__(self, tuning: Tuning) -> None:
        self.tuning = tuning
        self.started: float | None = None

    def begin(self) -> None:
        self.started = time.monotonic()


class Deliveries:
    """Delivery reports of one flush: errors, and the last changelog offset per partition."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.changelog_offsets: dict[int, int] = {}
        self.reports = 0  # delivery reports so far, good or bad: progress

    def output(self, err: KafkaError | None, msg: Any) -> None:
        self.reports += 1
        if err is not None:
            self.errors.append(f"{msg.topic()}[{msg.partition()}]: {err}")

    def changelog(self, err: KafkaError | None, msg: Any) -> None:
        self.reports += 1
        if err is not None:
            self.errors.append(f"{msg.topic()}[{msg.partition()}]: {err}")
            return
        p, offset = msg.partition(), msg.offset()
        if offset > self.changelog_offsets.get(p, -1):
            self.changelog_offsets[p] = offset


def produce(producer: Any, topic: str, key: bytes, value: bytes | None,
            partition: int | None, on_delivery: Callable[[KafkaError | None, Any], None],
            queue_full_wait_s: float, headers: Headers | None = None) -> None:
    """Queue one record, waiting (blocking, in a worker thread) while the queue is full."""
    extra: dict[str, Any] = {} if partition is None else {"partition": partition}
    if headers:
        extra["headers"] = list(headers)
    while True:
        try:
            producer.produce(topic, value=value, key=key, on_delivery=on_delivery, **extra)
            return
        except BufferError:
            producer.poll(queue_full_wait_s)


def commit_transaction(producer: Any, deliveries: Deliveries, steps: Steps) -> None:
    """Commit; records that stand still in librdkafka's queue for `stall_s` are purged.

    Calls that time out are called again (`resumed`).  A producer whose
    partition's leader librdkafka lost track of after a broker restart kept
    its records queued until they expired with the transaction, 60 s.  When
    a call times out with no delivery report since the last one, the
    records still queued (never sent) are purged instead: they fail, so the
    next call reports the transaction abortable, and it is aborted and tried
    again on a new producer.  Records in flight are left alone.
    """
    stall_s = steps.tuning.stall_s
    reports, since = deliveries.reports, time.monotonic()

    def stalled(err: KafkaError) -> None:
        nonlocal reports, since
        now = time.monotonic()
        if deliveries.reports != reports:
            reports, since = deliveries.reports, now
        elif now - since >= stall_s:
            log.warning("a transaction's records had no delivery report for %.0f s (%s): "
                        "purging those still queued, so that it is aborted and tried again "
                        "on a new producer", now - since, err)
            producer.purge(in_queue=True, in_flight=False, blocking=False)
            since = now

    resumed(producer.commit_transaction, "committing", steps, stall_s, stalled)


def resumed(call: Callable[[float], None], what: str, steps: Steps,
             timeout: float | None = None,
             retrying: Callable[[KafkaError], None] | None = None,
             within: float | None = None) -> None:
    """`call` (a commit or an abort), called again while librdkafka says it goes on.

    A commit or abort that times out (its flush, its EndTxn) is retriable
    and carries on in the background; calling it again resumes it.  A commit
    whose records then expire with the transaction becomes abortable, which
    the next call reports.  Each call at most `timeout` (the transaction
    timeout unless given), `within` seconds in all (two transaction timeouts
    unless given), then the error.  `retrying` hears each retriable error
    before the next call.
    """
    tuning = steps.tuning
    timeout = tuning.transaction_timeout_s if timeout is None else timeout
    deadline = time.monotonic() + (2 * tuning.transaction_timeout_s if within is None
                                   else within)
    while True:
        steps.begin()
        try:
            call(max(0.0, min(timeout, deadline - time.monotonic())))
            return
        except KafkaException as exc:
            err = kafka_error(exc)
            if not (err is not None and err.retriable() and time.monotonic() < deadline):
                raise
            log.info("%s a transaction: %s; calling again", what, err)
            if retrying is not None:
                retrying(err)
            if err.code() != TIMED_OUT:
                time.sleep(tuning.txn_retry_wait_s)  # answered at once: do not spin


def abort(producer: Any, err: KafkaError | None, unsent: bool, steps: Steps) -> bool:
    """Abort a failed transaction; whether it is proven never committed.

    Proven when the abort is acknowledged; or when the coordinator refuses
    it with INVALID_TXN_STATE - it holds no open transaction of this
    producer - and the commit's EndTxn was never sent (`unsent`): the
    coordinator then can only have aborted it or never begun it.  (After a
    controller and transaction coordinator was killed, a worker's purged
    transaction got that answer and the worker stopped: librdkafka issues
    3297, 4849.)  Also proven when the commit was never sent and the abort
    does not finish within 2 x stall_s: the new producer's init_transactions
    fences this one, and the coordinator aborts the transaction it holds
    open before it answers.  (After a broker restart, a producer that had
    lost its partitions' leader went on not reaching the coordinator; its
    abort timed out after 60 s, and again, and the worker stood still.)
    The same refusal or timeout after an EndTxn(commit) was sent may mean
    the coordinator is committing it, so that stops the worker, as does a
    fatal commit error, which leaves nothing to abort.  An abort refused
    because a newer producer took the transactional id raises `Fenced`: the
    partition moved (commit F5), and the new owner's fence aborted the transaction.
    """
    if err is not None and err.fatal():
        return False
    stall_s = steps.tuning.stall_s
    try:
        if unsent:
            resumed(producer.abort_transaction, "aborting", steps, stall_s,
                     within=2 * stall_s)
        else:
            resumed(producer.abort_transaction, "aborting", steps)
    except KafkaException as exc:
        refused = kafka_error(exc)
        if refused is not None and refused.code() in FENCED_CODES:
            raise Fenced(str(exc)) from exc
        if unsent and refused is not None and refused.code() == KafkaError.INVALID_TXN_STATE:
            log.warning("the coordinator holds no open transaction to abort (%s); its "
                        "commit was never sent, so none of it is visible", refused)
            return True
        if unsent and refused is not None and refused.code() == TIMED_OUT:
            log.warning("the abort did not finish within %.0f s (%s); its commit was never "
                        "sent, so the new producer's fence aborts it", 2 * stall_s, refused)
            return True
        log.exception("aborting the transaction failed too")
        return False
    return True


def is_fenced(producer: Any, err: KafkaError | None) -> bool:
    """Whether a transaction failed because a newer producer took its transactional id.

    librdkafka raises the fence as a fatal `_FENCED` from the transactional
    calls; a produce on the fenced producer says only `_FATAL`, and the next
    transactional call tells the cause.
    """
    if err is None:
        return False
    if err.code() in FENCED_CODES:
        return True
    if err.code() != _FATAL:
        return False
    try:
        producer.abort_transaction(0)
    except KafkaException as exc:
        cause = kafka_error(exc)
        return cause is not None and cause.code() in FENCED_CODES
    return False


__all__ = ["FENCED_CODES", "TIMED_OUT", "UNDELIVERED", "Aborted", "Deliveries", "Fenced", "Steps",
           "abort", "commit_transaction", "is_fenced", "produce", "resumed"]
