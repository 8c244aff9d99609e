"""Every reach into faust-streaming 0.15's and aiokafka 0.14's internals, in one place.

The worker keeps faust as its frame (group membership and assignment, the
RocksDB table with its changelog, restores and standbys, the web server, the
timer) but owns what faust gets wrong for it: input positions and the commit
order (`streams.processor.commit`).  For that it needs a few things faust does
not offer publicly; each is here, with why, so that an upgrade of faust has
one file to check.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any

import faust
from aiokafka.structs import OffsetAndMetadata, TopicPartition
from faust.tables import TableManager
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP

log = logging.getLogger(__name__)

_PATCHED = "_xwait_read_committed"


def read_committed_consumers() -> None:
    """Make faust's worker consumer read only committed records (isolation.level).

    faust reads read_committed only under its own exactly_once guarantee.
    The worker runs faust at at_least_once and makes its own transactions
    (exactly_once mode), so the consumer that restores the changelog must skip
    aborted transactions itself; for inputs, a transactional producer's
    aborted records are not input either.  Idempotent; applies to every app
    of the process.
    """
    thread_cls: Any = faust_aiokafka.AIOKafkaConsumerThread
    if getattr(thread_cls, _PATCHED, False):
        return
    create = thread_cls._create_worker_consumer  # noqa: SLF001 - the one place it is built

    def create_read_committed(self: Any, transport: Any) -> Any:
        consumer = create(self, transport)
        consumer._isolation_level = "read_committed"  # noqa: SLF001 - read at start()
        return consumer

    thread_cls._create_worker_consumer = create_read_committed  # noqa: SLF001
    setattr(thread_cls, _PATCHED, True)


class TablesDeclaredFirst(TableManager):
    """faust's table manager without the second it waits at start for tables.

    faust sleeps 1 s before it registers the tables' changelog topics, so
    that tables a project declares while its modules are still being
    imported are not missed.  The worker declares its one table when it
    builds the app, before anything starts (`TableManager.add` refuses one
    declared later), so that second only delayed every start, including
    the restart after a crash, before the group was joined.
    """

    async def on_start(self) -> None:
        if not self.should_stop:
            await self._update_channels()
            await self.recovery.start()


def after_seek_to_committed(app: faust.App, hook: Callable[[], Awaitable[None]]) -> None:
    """Run `hook` each time faust has sought the stream partitions to committed offsets
    at the end of an assignment's recovery.

    faust calls `Consumer.perform_seek` when an assignment's recovery is
    complete, right before it resumes the flow of records to the agents: the
    one moment where the worker's own seeks are final.  It also calls it from
    a fetch that finds the flow stopped, which happens during a rebalance,
    before the tables of newly assigned partitions are recovered: taking over
    then would read a standby's state that is still behind (seen in the scale
    bench: a standby taking over counted 8,239 of 100,400 waits short).  So
    the hook runs only while `Recovery.on_recovery_completed` runs; the seeks
    faust makes otherwise go to the group's committed offsets with the flow
    stopped, and the hook's own seeks follow when the recovery completes.
    """
    consumer: Any = app.consumer
    recovery: Any = app.tables.recovery  # type: ignore[attr-defined]
    seek = consumer.perform_seek
    completed = recovery.on_recovery_completed
    completing = 0

    async def on_recovery_completed(*args: Any, **kwargs: Any) -> None:
        nonlocal completing
        completing += 1
        try:
            await completed(*args, **kwargs)
        finally:
            completing -= 1

    async def perform_seek() -> None:
        await seek()
        if completing:
            await hook()

    recovery.on_recovery_completed = on_recovery_completed
    consumer.perform_seek = perform_seek


def before_stopping(app: faust.App, hook: Callable[[], Awaitable[None]]) -> None:
    """Run `hook` when the app begins to stop, before faust touches its consumer.

    faust stops the fetch and closes the tables first (`App._stop_consumer`),
    then its agents, and leaves the consumer group last; nothing tells the
    worker in between, so its applier went on deciding what it held and
    committing it (for seconds, with the input reader) after the group had
    handed its partitions to another worker.  The hook is the moment to give
    the partitions up: the tables are still open and the group is not left.
    """
    stop_consumer = app._stop_consumer  # noqa: SLF001 - the first step of App.on_stop

    async def stop_consumer_after_hook() -> None:
        await hook()
        await stop_consumer()

    app._stop_consumer = stop_consumer_after_hook  # type: ignore[method-assign]  # noqa: SLF001


def restore_to_last_data_record(
        app: faust.App, changelogs: set[str],
        data_ends: Callable[[str, dict[int, int]], Awaitable[dict[int, int]]]) -> None:
    """Make faust's restore wait for a changelog's last data record, not its end offset.

    faust's recovery asks `Consumer.highwaters` for the end offsets of the
    changelog partitions and restores until it has seen the record at end - 1.
    The worker's exactly_once transactions leave a commit marker there, which
    no consumer sees (faust copes only under its own exactly_once, with 5 s
    timeouts); `data_ends` returns, per partition of a topic, the offset after
    its last data record.
    """
    consumer: Any = app.consumer
    highwaters = consumer.highwaters

    async def data_highwaters(*partitions: TP) -> dict[TP, int]:
        got: Mapping[TP, int] = await highwaters(*partitions)
        out: dict[TP, int] = dict(got)
        for topic in changelogs:
            ends = {tp.partition: int(end) for tp, end in got.items()
                    if tp.topic == topic and end is not None and end > 0}
            if ends:
                for partition, end in (await data_ends(topic, ends)).items():
                    out[TP(topic, partition)] = end
        return out

    consumer.highwaters = data_highwaters


class _Deliverable:
    """What faust's fetch loop may deliver: its live active set, and the inputs
    the fetch asked for even if paused since."""

    def __init__(self, live: set[TP], inputs: set[TP]) -> None:
        self.live = live
        self.inputs = inputs

    def __contains__(self, tp: object) -> bool:
        return tp in self.live or tp in self.inputs


def deliver_what_was_fetched(app: faust.App, inputs: Collection[str]) -> None:
    """Fetch for the active partitions as they are when the fetch begins, and
    deliver the records fetched for an input even if it was paused meanwhile.

    faust hands its live set of active partitions to aiokafka's fetch, which
    waits for records in the consumer's thread, and afterwards drops each
    record whose partition is no longer in that set, while aiokafka's position
    has moved past it.  Two things went wrong.  A set that empties meanwhile
    (the recovery pauses the changelog partitions it has restored) reads as
    "every partition" to aiokafka, which then handed over records faust never
    asked for, and faust dropped them: a standby's changelog partitions, just
    sought to their beginning, lost everything they held when it started (the
    restore guard, `TableStore.restored_from`, filled it back at takeover; seen
    in half of the scale bench's standby phases).  And an input paused for
    holding too much lost the rest of its fetched records, which the worker
    then read again directly.  Now the fetch asks for a copy of the set taken
    when it begins, and the records of an input topic (`inputs`) it returns
    are delivered (the worker's gate takes each offset once).  A changelog
    partition paused meanwhile still has its records dropped, as faust does:
    the recovery pauses an active one once restored, and records arriving
    after that are the worker's own writes, never to be restored over newer
    rows.
    """
    consumer: Any = app.consumer
    getmany = consumer._getmany  # noqa: SLF001 - the call into the consumer thread
    wait_next_records = consumer._wait_next_records  # noqa: SLF001
    input_topics = set(inputs)
    asked: list[set[TP] | None] = [None]

    async def getmany_asked(active_partitions: set[TP] | None, timeout: float) -> Any:
        asked[0] = None if active_partitions is None else set(active_partitions)
        return await getmany(active_partitions=asked[0], timeout=timeout)

    async def wait_next_records_asked(timeout: float) -> tuple[Any, Any]:
        asked[0] = None
        records, active = await wait_next_records(timeout)
        if asked[0] is None or active is None:
            return records, active
        return records, _Deliverable(active, {tp for tp in asked[0] if tp.topic in input_topics})

    consumer._getmany = getmany_asked  # noqa: SLF001
    consumer._wait_next_records = wait_next_records_asked  # noqa: SLF001


def keep_paused_through_flow_control(app: faust.App) -> None:
    """A partition the worker paused stays paused when faust's flow control lets go of it.

    When a stream's buffer fills, faust takes the partition out of the active
    set (`Consumer.on_buffer_full`) and, once the buffer has drained by half,
    puts it back (`on_buffer_drop`), whether or not it was paused meanwhile.
    The worker pauses an input holding `flow.HELD_MAX` records, which bounds what it
    holds; a pause made while the partition's buffer was full was undone when
    the buffer drained, and the worker, having paused it once, did not pause
    it again: nothing then bounded that input but the backlog itself.  (A
    suspect, not a proven cause, for the 1.32M input records the 10M scale run
    held on older code; a 1M backlog on the fetch fix held at most ~90,000.)
    """
    consumer: Any = app.consumer
    buffer_drop = consumer.on_buffer_drop

    def on_buffer_drop(tp: TP) -> None:
        if tp in consumer._paused_partitions:  # noqa: SLF001 - resume_partitions activates it
            consumer._buffered_partitions.discard(tp)  # noqa: SLF001
            return
        buffer_drop(tp)

    consumer.on_buffer_drop = on_buffer_drop


async def seek(app: faust.App, positions: Mapping[TP, int]) -> None:
    """Move faust's consumer to `positions`, in the consumer's own thread.

    faust's `Consumer.seek` calls aiokafka's seek from the caller's thread,
    while aiokafka's fetch runs in the consumer's thread: its `seek_to`
    deletes a partition's buffered records, and a fetch handing them over at
    that moment failed on the missing key (`KeyError` in
    `Fetcher.fetched_records`; a worker joining a group under load crashed
    so in the crash bench).  `seek_wait` makes the same seeks in the consumer's
    thread, between two of its fetch steps.
    """
    consumer: Any = app.consumer
    await consumer.seek_wait(dict(positions))


async def committed_offsets(app: faust.App, tps: list[TP]) -> dict[TP, int | None]:
    """The consumer group's committed offsets (None: none committed)."""
    consumer: Any = app.consumer
    thread: Any = consumer._thread  # noqa: SLF001 - aiokafka's consumer lives there
    aiokafka_consumer = thread._ensure_consumer()  # noqa: SLF001
    out: dict[TP, int | None] = {}
    for tp in tps:
        offset = await thread.call_thread(aiokafka_consumer.committed, tp)
        out[tp] = offset if isinstance(offset, int) and offset >= 0 else None
    return out


async def commit_group_offsets(app: faust.App, offsets: Mapping[TP, int]) -> None:
    """Commit the consumer group's offsets; a failure is logged, never fatal.

    The worker never starts from these offsets (it seeks to the positions
    stored with its state); they serve lag monitors and tools.
    """
    if not offsets:
        return
    consumer: Any = app.consumer
    thread: Any = consumer._thread  # noqa: SLF001
    aiokafka_consumer = thread._ensure_consumer()  # noqa: SLF001
    commits = {TopicPartition(tp.topic, tp.partition): OffsetAndMetadata(offset, "")
               for tp, offset in offsets.items()}
    try:
        await thread.call_thread(aiokafka_consumer.commit, commits)
    except Exception as exc:  # noqa: BLE001 - informational: a rebalance may be running
        log.info("consumer group offsets not committed (%s: %s)", type(exc).__name__, exc)


def active_partitions(app: faust.App, topic: str) -> set[int]:
    return {tp.partition for tp in app.assignor.assigned_actives() if tp.topic == topic}


__all__ = ["active_partitions", "after_seek_to_committed", "before_stopping",
           "commit_group_offsets", "committed_offsets", "deliver_what_was_fetched",
           "keep_paused_through_flow_control", "read_committed_consumers",
           "restore_to_last_data_record", "seek"]
