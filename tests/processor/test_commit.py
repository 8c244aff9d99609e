"""The commit protocol with fake producers: what is tried again, who is fenced, and in
which order at_least_once makes outputs and state durable.

The producers are fakes because what is tested is the worker's policy on
librdkafka's answers (which failures prove a transaction aborted), and a
real broker does not fail on cue; the broker-restart chaos tests run the
same path against the real one.

A takeover cut short fences no one:

A revocation cancels a takeover that may be inside `init_transactions` for
its partitions; the call goes on in its thread.  Had the revocation returned
at once, that init took the id after the partition's next owner had, and the
next owner's first commit failed _FENCED (two workers starting together
both stopped so in a CI run).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from streams.processor.batch import Batch, PartitionBatch
from streams.processor.commit import AtLeastOnce, CommitFailed, Committed, ExactlyOnce
from streams.processor.context import WorkerContext
from streams.processor.model import OutRecord, Role
from streams.processor.positions import POSITIONS_KEY, Positions
from streams.processor.tuning import TUNING, Tuning
from tests.processor.contexts import context


class FakeProducer:
    """Records each `init_transactions`; every one waits for the test's gate."""

    entered: list[str] = []
    inited: list[str] = []
    gate = threading.Event()

    def __init__(self, conf: dict[str, Any]) -> None:
        self.transactional_id = conf["transactional.id"]

    def list_topics(self, topic: str, timeout: float) -> Any:
        return SimpleNamespace(orig_broker_id=1)  # a connected producer's answer

    def init_transactions(self, timeout: float) -> None:
        FakeProducer.entered.append(self.transactional_id)
        assert FakeProducer.gate.wait(30), "the test never opened the gate"
        FakeProducer.inited.append(self.transactional_id)


async def until(condition: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.01)


def test_a_revocation_waits_for_the_ids_a_cancelled_takeover_was_taking() -> None:
    FakeProducer.entered, FakeProducer.inited = [], []
    FakeProducer.gate.clear()

    async def scenario() -> None:
        committer = ExactlyOnce(_ctx(partitions=2), {}, make_producer=FakeProducer)
        takeover = asyncio.ensure_future(committer.assign([0, 1]))
        await until(lambda: len(FakeProducer.entered) == 2, "both inits started")
        takeover.cancel()  # a revocation cuts the takeover short
        revoking = asyncio.ensure_future(committer.revoke([0, 1]))
        await asyncio.sleep(0.1)
        assert not revoking.done(), "the revocation returned while the inits still ran"
        FakeProducer.gate.set()
        await asyncio.wait_for(revoking, 30)
        assert sorted(FakeProducer.inited) == ["app-0", "app-1"]
        # What they made is dropped; a later assignment takes the id afresh.
        await committer.assign([1])
        assert FakeProducer.inited[-1] == "app-1" and len(FakeProducer.inited) == 3
        await committer.close()

    asyncio.run(scenario())


class _ConnectingProducer:
    """A producer whose first metadata answers come from its bootstrap address (broker
    id -1), as a librdkafka producer's do before it has connected to a broker it learned."""

    calls: list[str] = []

    def __init__(self, conf: dict[str, Any]) -> None:
        self.bootstrap_answers = 2

    def list_topics(self, topic: str, timeout: float) -> Any:
        _ConnectingProducer.calls.append("metadata")
        broker = -1 if self.bootstrap_answers else 1
        self.bootstrap_answers = max(0, self.bootstrap_answers - 1)
        return SimpleNamespace(orig_broker_id=broker)

    def init_transactions(self, timeout: float) -> None:
        _ConnectingProducer.calls.append("init")


def test_a_partitions_producer_takes_its_transactional_id_once_connected_to_a_broker() -> None:
    """Asked before, librdkafka finds no coordinator and asks again 500 ms later: the
    fence step of every takeover took 0.52 s instead of 0.07."""
    _ConnectingProducer.calls = []

    async def scenario() -> None:
        committer = ExactlyOnce(_ctx(partitions=1), {}, make_producer=_ConnectingProducer)
        await committer.assign([0])
        await committer.close()

    asyncio.run(scenario())
    assert _ConnectingProducer.calls == ["metadata", "metadata", "metadata", "init"]


class _Message:
    def __init__(self, topic: str, partition: int, offset: int) -> None:
        self._where = (topic, partition, offset)

    def topic(self) -> str:
        return self._where[0]

    def partition(self) -> int:
        return self._where[1]

    def offset(self) -> int:
        return self._where[2]


class ScriptedProducer:
    """A transactional producer whose commits fail as the test's script says, in order.

    What a commit acknowledges is what a read_committed consumer would see
    (`visible`); an abort drops the transaction's records.
    """

    script: list[KafkaError] = []
    made: list[ScriptedProducer] = []
    visible: list[tuple[str, bytes]] = []
    abort_error: KafkaError | None = None
    # How `init_transactions` fails, in order, each after its timeout (then it succeeds).
    init_errors: list[KafkaError] = []

    def __init__(self, conf: dict[str, Any]) -> None:
        self.transactional_id = conf["transactional.id"]
        self.pending: list[tuple[str, int, bytes, Any]] = []
        self.aborts = 0
        self.offset = 0
        ScriptedProducer.made.append(self)

    def list_topics(self, topic: str, timeout: float) -> Any:
        return SimpleNamespace(orig_broker_id=1)  # a connected producer's answer

    def init_transactions(self, timeout: float) -> None:
        if ScriptedProducer.init_errors:
            time.sleep(timeout)  # as a coordinator that does not answer
            raise KafkaException(ScriptedProducer.init_errors.pop(0))

    def begin_transaction(self) -> None:
        self.pending = []

    def produce(self, topic: str, value: bytes | None, key: bytes, on_delivery: Any,
                partition: int = 0) -> None:
        self.pending.append((topic, partition, key, on_delivery))

    def commit_transaction(self, timeout: float) -> None:
        if ScriptedProducer.script:
            raise KafkaException(ScriptedProducer.script.pop(0))
        for topic, partition, key, on_delivery in self.pending:
            self.offset += 1
            on_delivery(None, _Message(topic, partition, self.offset))
            ScriptedProducer.visible.append((topic, key))
        self.pending = []

    def poll(self, timeout: float) -> int:
        return 0

    def abort_transaction(self, timeout: float) -> None:
        self.aborts += 1
        if ScriptedProducer.abort_error is not None:
            raise KafkaException(ScriptedProducer.abort_error)
        self.pending = []

    def purge(self, in_queue: bool = True, in_flight: bool = True,
              blocking: bool = True) -> None:
        self.pending = []


FLUSH_TIMED_OUT = KafkaError(KafkaError._TIMED_OUT, "Failed to flush all outstanding messages "
                             "within the API timeout: 15 message(s) remaining", retriable=True)
DELIVERIES_FAILED = KafkaError(KafkaError._INCONSISTENT, "3 message(s) failed delivery",
                               txn_requires_abort=True)
FENCED = KafkaError(KafkaError._FENCED, "fenced by a newer instance", fatal=True)
ABORT_NOT_ACKNOWLEDGED = KafkaError(KafkaError._STATE, "the coordinator refused")
# What the coordinator answers an abort when it holds no open transaction of the producer
# (already aborted, never begun) - or one it is committing.
NO_OPEN_TRANSACTION = KafkaError(
    KafkaError.INVALID_TXN_STATE, "Failed to end transaction: Broker: Producer attempted a "
    "transactional operation in an invalid state", fatal=True)
ABORTABLE_AT_END = KafkaError(KafkaError.UNKNOWN, "EndTxn failed", txn_requires_abort=True)


def _ctx(partitions: int = 1, tuning: Tuning = TUNING) -> WorkerContext:
    """Topics `t.<role>`, the changelog `changelog`, transactional ids `app-<p>`."""
    return context(tuning=tuning, changelog="changelog", app_id="app", partitions=partitions)


def _committer_with(script: list[KafkaError], abort_error: KafkaError | None = None,
                    tuning: Tuning = TUNING, make_producer: Any = None,
                    init_errors: list[KafkaError] | None = None) -> ExactlyOnce:
    ScriptedProducer.script = list(script)
    ScriptedProducer.init_errors = list(init_errors or [])
    ScriptedProducer.made, ScriptedProducer.visible = [], []
    ScriptedProducer.abort_error = abort_error
    return ExactlyOnce(_ctx(tuning=tuning), {}, make_producer=make_producer or ScriptedProducer)


def _batch(n: int) -> Batch:
    part = PartitionBatch(0, Positions(next_offset={Role.REPLIES: n}),
                          out=[OutRecord(Role.OUTCOMES, f"wait-{n}".encode(), b"outcome")],
                          rows={f"wait-{n}".encode(): b"row"})
    return Batch(parts={0: part})


def _commit(committer: ExactlyOnce, *batches: Batch) -> None:
    async def scenario() -> None:
        await committer.assign([0])
        try:
            for batch in batches:
                await committer.commit(batch)
        finally:
            await committer.close()

    asyncio.run(scenario())


def test_a_transaction_whose_records_expired_is_committed_again_on_a_new_producer() -> None:
    """The CI failure after a broker restart: the flush timed out, the records expired,
    the worker stopped.  Now the aborted batch is committed once, and the next batch
    goes on the new producer."""
    committer = _committer_with([FLUSH_TIMED_OUT, DELIVERIES_FAILED])
    _commit(committer, _batch(1), _batch(2))

    first, second = ScriptedProducer.made
    assert first.aborts == 1
    assert committer.counters["transactions.retried"] == 1, "operators see it in /metrics"
    assert ScriptedProducer.visible == [
        ("t.outcomes", b"wait-1"), ("changelog", b"wait-1"), ("changelog", POSITIONS_KEY),
        ("t.outcomes", b"wait-2"), ("changelog", b"wait-2"), ("changelog", POSITIONS_KEY)]
    assert second.offset == 6, "the next batch went on the new producer"


def test_a_commit_still_in_flight_when_its_time_is_up_stops_the_worker_unaborted() -> None:
    """Its EndTxn may yet commit it: committing the batch again could show its outcomes
    twice, so the worker stops and its restart restores what the coordinator decided."""
    committer = _committer_with([FLUSH_TIMED_OUT] * 1_000_000,
                                tuning=replace(TUNING, transaction_timeout_s=0.05,
                                               stall_s=0.01))
    with pytest.raises(CommitFailed, match="Failed to flush"):
        _commit(committer, _batch(1))
    assert len(ScriptedProducer.made) == 1, "no second producer tried the batch"
    assert ScriptedProducer.made[0].aborts == 0


@pytest.mark.parametrize(("script", "abort_error"), [
    ([FENCED], None),  # a newer owner took the partition: this worker is a zombie
    ([DELIVERIES_FAILED], FENCED),  # the abort found a newer owner
])
def test_a_fenced_transaction_reports_its_partition_lost_and_is_not_tried_again(
    script: list[KafkaError], abort_error: KafkaError | None
) -> None:
    """Commit F5: being fenced is an ownership change, not a failure of the worker."""
    committer = _committer_with(script, abort_error=abort_error)

    async def scenario() -> Committed:
        await committer.assign([0])
        try:
            return await committer.commit(_batch(1))
        finally:
            await committer.close()

    assert asyncio.run(scenario()) == Committed({}, frozenset({0}))
    assert len(ScriptedProducer.made) == 1, "a fenced partition is never taken back here"
    assert ScriptedProducer.visible == []
    assert committer.counters["transactions.fenced"] == 1


@pytest.mark.parametrize(("script", "abort_error"), [
    ([DELIVERIES_FAILED], ABORT_NOT_ACKNOWLEDGED),  # the abort was not acknowledged
    # An error that needs an abort but may come after the EndTxn(commit) was sent:
    # "no open transaction" may then mean the coordinator is committing it.
    ([ABORTABLE_AT_END], NO_OPEN_TRANSACTION),
])
def test_a_transaction_not_proven_aborted_is_not_tried_again(
    script: list[KafkaError], abort_error: KafkaError | None
) -> None:
    committer = _committer_with(script, abort_error=abort_error)
    with pytest.raises(CommitFailed):
        _commit(committer, _batch(1))
    assert len(ScriptedProducer.made) == 1
    assert ScriptedProducer.visible == []


def test_a_transaction_whose_commit_was_never_sent_is_tried_again_when_its_abort_finds_none(
) -> None:
    """The CI failure after a controller kill: records stood still, were purged, the
    commit failed at its flush (before any EndTxn) and the coordinator refused the
    abort, holding no open transaction of the producer.  None of it can be visible:
    the batch is committed once, on a new producer."""
    committer = _committer_with([FLUSH_TIMED_OUT, DELIVERIES_FAILED],
                                abort_error=NO_OPEN_TRANSACTION)
    _committed_once_on_a_new_producer(committer)


def _committed_once_on_a_new_producer(committer: ExactlyOnce) -> None:
    """One batch committed: the first producer's transaction aborted, the second's visible."""
    _commit(committer, _batch(1))
    first, _second = ScriptedProducer.made
    assert first.aborts == 1
    assert committer.counters["transactions.retried"] == 1
    assert ScriptedProducer.visible == [
        ("t.outcomes", b"wait-1"), ("changelog", b"wait-1"), ("changelog", POSITIONS_KEY)]


# What a commit says when its records timed out before it began: the delivery reports say
# the same (librdkafka: "Current transaction failed in state InTransaction").
RECORDS_TIMED_OUT = KafkaError(KafkaError._TIMED_OUT, "49 message(s) timed out on "
                               "changelog [0]", txn_requires_abort=True)


class ExpiredProducer(ScriptedProducer):
    """The first producer's records time out (the broker away longer than the transaction
    timeout); their failed delivery reports wait for a poll, as librdkafka's do."""

    def __init__(self, conf: dict[str, Any]) -> None:
        super().__init__(conf)
        self.expired = len(ScriptedProducer.made) == 1
        self.reports: list[Any] = []

    def commit_transaction(self, timeout: float) -> None:
        if not self.expired:
            return super().commit_transaction(timeout)
        failed, self.pending = self.pending, []
        self.reports += [(on_delivery, _Message(topic, partition, -1))
                         for topic, partition, _key, on_delivery in failed]
        raise KafkaException(RECORDS_TIMED_OUT)

    def poll(self, timeout: float) -> int:
        served, self.reports = self.reports, []
        for on_delivery, msg in served:
            on_delivery(KafkaError(KafkaError._MSG_TIMED_OUT), msg)
        return len(served)


def test_a_transaction_whose_records_timed_out_is_tried_again_when_its_abort_finds_none(
) -> None:
    """A busy run's worker stopped after a broker restart (down 72 s): its rows timed out
    while at_least_once waited for the outputs, the commit failed _TIMED_OUT and the
    coordinator refused the abort (INVALID_TXN_STATE).  Records that failed delivery
    mean the EndTxn(commit) was never sent: none of it can be visible, so the batch is
    committed once, on a new producer, and the worker goes on."""
    _committed_once_on_a_new_producer(_committer_with(
        [], abort_error=NO_OPEN_TRANSACTION, make_producer=ExpiredProducer))


INIT_TIMED_OUT = KafkaError(KafkaError._TIMED_OUT, "Transactional producer init timed out",
                            retriable=True)
# A try of an init is this long here (`transaction_timeout_s`).
QUICK_INITS = replace(TUNING, transaction_timeout_s=0.05, stall_s=0.01)


def test_a_coordinator_away_for_several_tries_is_asked_again_and_the_batch_committed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A busy round's broker took 149 s to come back after a restart; the worker asked for
    its transactional producer once more after the first 60 s, then stopped with 565
    waits open.  A coordinator that does not answer is asked again."""
    committer = _committer_with([], init_errors=[INIT_TIMED_OUT] * 3,
                                tuning=replace(QUICK_INITS, broker_away_s=10.0))
    with caplog.at_level(logging.WARNING, logger="streams.processor.commit"):
        _commit(committer, _batch(1))
    assert len(ScriptedProducer.made) == 1, "the same producer is asked again"
    assert ScriptedProducer.visible == [
        ("t.outcomes", b"wait-1"), ("changelog", b"wait-1"), ("changelog", POSITIONS_KEY)]
    assert sum("got no answer" in r.getMessage() for r in caplog.records) == 3


def test_a_coordinator_away_longer_than_the_broker_may_be_away_stops_the_worker() -> None:
    committer = _committer_with([], init_errors=[INIT_TIMED_OUT] * 1_000,
                                tuning=replace(QUICK_INITS, broker_away_s=0.2))
    with pytest.raises(CommitFailed, match=r"cannot start the transactional producer .* "
                                           r"\(tried for \d+ s\)"):
        _commit(committer, _batch(1))
    assert len(ScriptedProducer.init_errors) < 1_000 - 2, "asked more than once"
    assert ScriptedProducer.visible == []


def test_a_producer_whose_start_fails_for_good_stops_the_worker_at_once() -> None:
    committer = _committer_with([], init_errors=[FENCED, INIT_TIMED_OUT])
    with pytest.raises(CommitFailed, match="fenced by a newer instance"):
        _commit(committer, _batch(1))
    assert ScriptedProducer.init_errors == [INIT_TIMED_OUT], "not asked again"


def test_a_transaction_that_keeps_failing_stops_the_worker_after_its_attempts() -> None:
    committer = _committer_with([DELIVERIES_FAILED] * TUNING.transaction_attempts)
    with pytest.raises(CommitFailed, match=f"failed {TUNING.transaction_attempts} times"):
        _commit(committer, _batch(1))
    assert len(ScriptedProducer.made) == TUNING.transaction_attempts
    assert ScriptedProducer.visible == []


class StuckProducer(ScriptedProducer):
    """Its records stay queued (no leader for their partition) until they are purged."""

    def __init__(self, conf: dict[str, Any]) -> None:
        super().__init__(conf)
        self.stuck = len(ScriptedProducer.made) == 1  # the first producer only
        self.purged = False
        self.commit_calls = 0

    def commit_transaction(self, timeout: float) -> None:
        self.commit_calls += 1
        if not self.stuck:
            return super().commit_transaction(timeout)
        if self.purged:
            raise KafkaException(DELIVERIES_FAILED)
        if self.commit_calls > 100:
            raise AssertionError("never purged")
        raise KafkaException(FLUSH_TIMED_OUT)

    def purge(self, in_queue: bool = True, in_flight: bool = True,
              blocking: bool = True) -> None:
        assert in_queue and not in_flight, "records in flight are never purged"
        self.purged = True
        super().purge()


class SlowProducer(ScriptedProducer):
    """Acknowledges one record per commit call: slow, never stuck."""

    def commit_transaction(self, timeout: float) -> None:
        if len(self.pending) > 1:
            topic, partition, key, on_delivery = self.pending.pop(0)
            self.offset += 1
            on_delivery(None, _Message(topic, partition, self.offset))
            ScriptedProducer.visible.append((topic, key))
            raise KafkaException(FLUSH_TIMED_OUT)
        super().commit_transaction(timeout)

    def purge(self, in_queue: bool = True, in_flight: bool = True,
              blocking: bool = True) -> None:
        raise AssertionError("a producer whose records are acknowledged was purged")


def test_records_queued_with_no_acknowledgement_are_purged_and_the_batch_tried_again() -> None:
    """The producer that stood still after a broker restart: instead of waiting for its
    records to expire with the transaction, they are purged after `Tuning.stall_s`."""
    committer = _committer_with([], tuning=replace(TUNING, stall_s=0.0))
    committer._make_producer = StuckProducer
    _commit(committer, _batch(1))

    first, second = ScriptedProducer.made
    assert isinstance(first, StuckProducer) and first.purged and first.aborts == 1
    assert committer.counters["transactions.retried"] == 1
    assert ScriptedProducer.visible == [
        ("t.outcomes", b"wait-1"), ("changelog", b"wait-1"), ("changelog", POSITIONS_KEY)]


def test_a_commit_whose_records_are_being_acknowledged_is_waited_for_not_purged() -> None:
    committer = _committer_with([], tuning=replace(TUNING, stall_s=0.0))
    committer._make_producer = SlowProducer
    _commit(committer, _batch(1))
    assert len(ScriptedProducer.made) == 1
    assert committer.counters["transactions.retried"] == 0
    assert ScriptedProducer.visible == [
        ("t.outcomes", b"wait-1"), ("changelog", b"wait-1"), ("changelog", POSITIONS_KEY)]


ABORT_TIMED_OUT = KafkaError(KafkaError._TIMED_OUT, "Timed out waiting for operation to "
                             "finish, retry call to resume", retriable=True)


def test_a_transaction_whose_commit_was_never_sent_is_tried_again_when_its_abort_hangs(
) -> None:
    """The CI failure after a broker restart: a producer that lost its partition's leader
    had its records purged, its commit failed before any EndTxn, and its abort timed out
    again and again (the worker stood still, 567 of 600 waits never ended).  Now the
    abort is given 2 x `stall_s`; the new producer's init fences the old one, whose
    transaction the coordinator aborts.  The batch is committed once."""
    committer = _committer_with([FLUSH_TIMED_OUT, DELIVERIES_FAILED],
                                abort_error=ABORT_TIMED_OUT,
                                tuning=replace(TUNING, stall_s=0.05))
    _commit(committer, _batch(1))
    first, _second = ScriptedProducer.made
    assert first.aborts >= 1
    assert committer.counters["transactions.retried"] == 1
    assert ScriptedProducer.visible == [
        ("t.outcomes", b"wait-1"), ("changelog", b"wait-1"), ("changelog", POSITIONS_KEY)]


def test_an_abort_that_hangs_after_a_commit_may_have_been_sent_stops_the_worker() -> None:
    """An EndTxn(commit) may be in the coordinator's hands: not tried again."""
    committer = _committer_with([ABORTABLE_AT_END], abort_error=ABORT_TIMED_OUT,
                                tuning=replace(TUNING, stall_s=0.05,
                                               transaction_timeout_s=0.1))
    with pytest.raises(CommitFailed):
        _commit(committer, _batch(1))
    assert len(ScriptedProducer.made) == 1
    assert ScriptedProducer.visible == []


class GatedOutputs:
    """at_least_once's output producer: its flush acknowledges (or refuses) the outputs
    when the test opens the gate."""

    gate = threading.Event()
    flushing = threading.Event()
    refuse = False

    def __init__(self, conf: dict[str, Any]) -> None:
        self.queued: list[Any] = []

    def produce(self, topic: str, value: bytes | None, key: bytes, on_delivery: Any,
                partition: int = 0, headers: Any = None) -> None:
        self.queued.append((topic, on_delivery))

    def poll(self, timeout: float) -> int:
        return 0

    def flush(self, timeout: float) -> int:
        GatedOutputs.flushing.set()
        assert GatedOutputs.gate.wait(30), "the test never opened the gate"
        error = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED) if self.refuse else None
        for topic, on_delivery in self.queued:
            on_delivery(error, _Message(topic, 0, 0))
        self.queued = []
        return 0


@pytest.mark.parametrize("refused", [False, True])
def test_at_least_once_commits_the_state_only_after_every_output_is_acknowledged(
        refused: bool) -> None:
    """Step 2 of the protocol: the transactions begin and carry their rows while the
    outputs are in flight, and commit only after; if the outputs fail, none commits."""
    ScriptedProducer.script, ScriptedProducer.made, ScriptedProducer.visible = [], [], []
    ScriptedProducer.abort_error = None
    GatedOutputs.gate.clear()
    GatedOutputs.flushing.clear()
    GatedOutputs.refuse = refused
    committer = AtLeastOnce(_ctx(partitions=2), {}, make_producer=ScriptedProducer,
                            make_output_producer=GatedOutputs)
    batch = Batch(parts={p: PartitionBatch(p, Positions(next_offset={Role.REPLIES: 1}),
                                           out=[OutRecord(Role.OUTCOMES, b"w", b"outcome")],
                                           rows={f"wait-{p}".encode(): b"row"})
                         for p in (0, 1)})

    async def scenario() -> Committed:
        await committer.assign([0, 1])
        try:
            commit = asyncio.ensure_future(committer.commit(batch))
            # Both transactions hold their rows and positions while the outputs wait.
            await until(lambda: GatedOutputs.flushing.is_set() and all(
                len(made.pending) == 2 for made in ScriptedProducer.made), "rows produced")
            await asyncio.sleep(0.05)  # a commit that did not wait would show by now
            assert ScriptedProducer.visible == [], "a state committed before its outputs"
            GatedOutputs.gate.set()
            return await commit
        finally:
            await committer.close()

    if refused:
        with pytest.raises(CommitFailed, match="refused by Kafka"):
            asyncio.run(scenario())
        assert ScriptedProducer.visible == []  # no state without its outputs
    else:
        committed = asyncio.run(scenario())
        assert sorted(committed.offsets) == [0, 1]
        assert sorted(key for _, key in ScriptedProducer.visible) == [
            POSITIONS_KEY, POSITIONS_KEY, b"wait-0", b"wait-1"]
