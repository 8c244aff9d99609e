"""exactly_once against the real broker: a refused transaction is aborted, then committed once.

The broker refuses the batch's outcome (its topic takes no record that
large), so librdkafka fails the transaction and asks for an abort; by the
time the committer tries again on a new producer, the topic takes it.  A
read_committed consumer (downstream, or a worker restoring the changelog)
must see the batch exactly once, although the first try's changelog records
may be in the log (whether librdkafka sent them before the refusal made the
transaction abortable is a race).
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from streams.processor.batch import Batch, PartitionBatch
from streams.processor.commit import CommitFailed, ExactlyOnce
from streams.processor.model import OutRecord, Role
from streams.processor.positions import POSITIONS_KEY, Positions
from tests.made_topics import create_topics, limit_record_size, read_keys
from tests.prefixes import unique_prefix
from tests.processor.contexts import context

pytestmark = pytest.mark.kafka

LIMIT = 1_024


@pytest.fixture(autouse=True)
def _no_producer_outlives_the_test() -> Iterator[None]:
    """A commit's reference cycles (asyncio's task, the executor's future, a failure's
    traceback) hold its producers until the garbage collector comes: collected here,
    so that none reconnects to the session's broker after it stopped."""
    yield
    gc.collect()


def _committer(bootstrap: str, prefix: str, make_producer: Any) -> ExactlyOnce:
    ctx = context(topic_prefix=prefix, app_id=prefix, changelog=f"{prefix}.changelog",
                  partitions=1)
    return ExactlyOnce(ctx, {"bootstrap.servers": bootstrap}, make_producer=make_producer)


def _commit(committer: ExactlyOnce, batch: Batch) -> dict[int, int]:
    async def scenario() -> dict[int, int]:
        await committer.assign([0])
        try:
            return (await committer.commit(batch)).offsets
        finally:
            await committer.close()

    return asyncio.run(scenario())


def _batch() -> Batch:
    big = OutRecord(Role.OUTCOMES, b"wait-1", b"o" * (4 * LIMIT), partition=0)
    return Batch(parts={0: PartitionBatch(0, Positions(next_offset={Role.REPLIES: 1}),
                                          out=[big], rows={b"wait-1": b"row"})})


@pytest.fixture
def topics(kafka_bootstrap: str) -> tuple[str, str, str]:
    prefix = unique_prefix("x")
    outcomes, changelog = f"{prefix}.outcomes", f"{prefix}.changelog"
    create_topics(kafka_bootstrap, NewTopic(outcomes, 1, 1,
                                            config={"max.message.bytes": str(LIMIT)}),
                  NewTopic(changelog, 1, 1))
    return prefix, outcomes, changelog


def test_a_transaction_the_broker_refused_is_committed_once_on_a_new_producer(
    kafka_bootstrap: str, topics: tuple[str, str, str]
) -> None:
    prefix, outcomes, changelog = topics
    made: list[Producer] = []

    def make_producer(conf: dict[str, Any]) -> Producer:
        if made:  # the retry: the operator has raised the limit meanwhile
            limit_record_size(AdminClient({"bootstrap.servers": kafka_bootstrap}), outcomes,
                              None)
        made.append(Producer(conf))
        return made[-1]

    offsets = _commit(_committer(kafka_bootstrap, prefix, make_producer), _batch())

    assert len(made) == 2, "the refused transaction was tried again on a new producer"
    assert [k for k, _ in read_keys(kafka_bootstrap, outcomes, "read_committed")] == [b"wait-1"]
    stored = read_keys(kafka_bootstrap, changelog, "read_committed")
    assert [k for k, _ in stored] == [b"wait-1", POSITIONS_KEY]
    assert offsets[0] == stored[-1][1], "the offset stored is the committed positions record's"


def test_a_transaction_the_broker_keeps_refusing_stops_the_worker_with_nothing_visible(
    kafka_bootstrap: str, topics: tuple[str, str, str]
) -> None:
    prefix, outcomes, changelog = topics
    with pytest.raises(CommitFailed, match="failed 3 times.*Message size too large"):
        _commit(_committer(kafka_bootstrap, prefix, Producer), _batch())
    assert read_keys(kafka_bootstrap, outcomes, "read_committed") == []
    assert read_keys(kafka_bootstrap, changelog, "read_committed") == []
