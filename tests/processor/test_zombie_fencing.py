"""A worker that lost its partition while frozen (a zombie) cannot write its state.

The fencing argument of `streams.processor.commit` (F1-F5), step by step, on
the real broker and under both guarantees: the new owner's takeover fences
the old owner's transactional producer; the zombie's next commit comes back
`fenced` with nothing of it visible to read_committed readers; a database
restored from the zombie's own changelog offset then holds exactly what the
log holds, the new owner's rows and none of the zombie's.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import NewTopic

from streams.processor.batch import Batch, PartitionBatch
from streams.processor.commit import AtLeastOnce, Committed, ExactlyOnce
from streams.processor.gaps import EndOffsets
from streams.processor.model import OutRecord, Role
from streams.processor.positions import POSITIONS_KEY, Positions
from streams.processor.restore import ChangelogReader
from streams.processor.state import StateStores
from tests.made_topics import create_topics, read_keys
from tests.prefixes import unique_prefix
from tests.processor.contexts import context

pytestmark = pytest.mark.kafka

GUARANTEES = [AtLeastOnce, ExactlyOnce]


@pytest.fixture(autouse=True)
def _no_producer_outlives_the_test() -> Iterator[None]:
    yield
    gc.collect()


@pytest.fixture
def prefix(kafka_bootstrap: str) -> str:
    prefix = unique_prefix("z")
    create_topics(kafka_bootstrap, NewTopic(f"{prefix}.outcomes", 1, 1),
                  NewTopic(f"{prefix}.changelog", 1, 1, config={"cleanup.policy": "compact"}))
    return prefix


def _committer(kind: type[Any], bootstrap: str, prefix: str) -> AtLeastOnce | ExactlyOnce:
    ctx = context(topic_prefix=prefix, app_id=prefix, changelog=f"{prefix}.changelog",
                  partitions=1)
    committer: AtLeastOnce | ExactlyOnce = kind(ctx, {"bootstrap.servers": bootstrap})
    return committer


def _batch(key: str, replies: int) -> Batch:
    part = PartitionBatch(0, Positions(next_offset={Role.REPLIES: replies}),
                          out=[OutRecord(Role.OUTCOMES, key.encode(), b"outcome", partition=0)],
                          rows={key.encode(): f"row of {key}".encode()})
    return Batch(parts={0: part})


def _zombie_run(kind: type[Any], bootstrap: str, prefix: str
                ) -> tuple[Committed, Committed, Committed]:
    """w1 commits, w2 takes the partition over (fence), then w1 - the zombie - commits."""
    async def scenario() -> tuple[Committed, Committed, Committed]:
        w1, w2 = _committer(kind, bootstrap, prefix), _committer(kind, bootstrap, prefix)
        try:
            await w1.assign([0])
            before = await w1.commit(_batch("before-the-freeze", 1))
            await w2.assign([0])  # the takeover's first step
            owner = await w2.commit(_batch("owner", 2))
            zombie = await w1.commit(_batch("zombie", 2))
            return before, owner, zombie
        finally:
            await w1.close()
            await w2.close()

    return asyncio.run(scenario())


@pytest.mark.parametrize("kind", GUARANTEES)
def test_a_zombies_commit_after_the_takeover_is_fenced_and_invisible(
    kafka_bootstrap: str, prefix: str, kind: type[Any]
) -> None:
    before, owner, zombie = _zombie_run(kind, kafka_bootstrap, prefix)

    assert before.fenced == frozenset() and owner.fenced == frozenset()
    assert zombie == Committed({}, frozenset({0})), "the zombie's commit must come back fenced"
    changelog = [k for k, _ in read_keys(kafka_bootstrap, f"{prefix}.changelog")]
    assert changelog == [b"before-the-freeze", POSITIONS_KEY, b"owner", POSITIONS_KEY]
    outcomes = [k for k, _ in read_keys(kafka_bootstrap, f"{prefix}.outcomes")]
    if kind is ExactlyOnce:
        assert outcomes == [b"before-the-freeze", b"owner"]
    else:  # acknowledged before the state's transaction: a duplicate the owner makes too
        assert outcomes == [b"before-the-freeze", b"owner", b"zombie"]


@pytest.mark.parametrize("kind", GUARANTEES)
def test_a_restore_from_the_zombies_database_holds_the_owners_rows_and_none_of_its_own(
    kafka_bootstrap: str, prefix: str, kind: type[Any], tmp_path: Path
) -> None:
    """The zombie wrote its database only for what it committed before the fence (F4):
    taking the partition back, it restores from that offset and ends where the log does."""
    before, owner, _zombie = _zombie_run(kind, kafka_bootstrap, prefix)
    topic = f"{prefix}.changelog"
    stores = StateStores(tmp_path)
    state = stores.open(0)
    state.write({b"before-the-freeze": b"row of before-the-freeze"},
                Positions(next_offset={Role.REPLIES: 1}), before.offsets[0])
    conf = {"bootstrap.servers": kafka_bootstrap, "group.id": f"{topic}-restore"}
    end = EndOffsets(conf).get([(topic, 0)])[(topic, 0)]

    async def restore() -> int:
        reader = ChangelogReader(conf, topic, stores)
        try:
            return (await asyncio.wait_for(reader.restore(0, end), 60)).records
        finally:
            reader.stop()

    assert asyncio.run(restore()) == 2, "the owner's row and positions, nothing else"
    assert state.get(b"owner") == b"row of owner"
    assert state.get(b"zombie") is None
    assert state.changelog_offset() == owner.offsets[0]
    stored = state.positions()
    assert stored is not None and stored.next_offset == {Role.REPLIES: 2}
    stores.close_all()
