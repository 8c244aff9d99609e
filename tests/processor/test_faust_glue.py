"""faust's fetch against a consumer thread that keeps aiokafka's rules.

The stand-in thread below answers like aiokafka's `Fetcher.fetched_records`:
the buffered records of the partitions asked for, and of *every* assigned
partition when the set asked for is empty; what it hands over, its position
has passed.  faust's own `Consumer.getmany` runs unchanged on top of it, so
the tests show what faust delivers and what it loses.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import faust
import pytest
from faust.types import TP

from streams.processor import faust_glue

REQUESTS = "x.requests"
REQUEST_0 = TP(REQUESTS, 0)
CHANGELOG_0, CHANGELOG_4 = TP("x-waits-changelog", 0), TP("x-waits-changelog", 4)


class PausingThread:
    """Waits for records like aiokafka, while the worker pauses partitions meanwhile."""

    def __init__(self, consumer: Any, paused_while_waiting: set[TP]) -> None:
        self.consumer = consumer
        self.paused_while_waiting = paused_while_waiting
        self.handed_over: set[TP] = set()

    async def getmany(self, active_partitions: set[TP], timeout: float) -> dict[TP, list[Any]]:
        await asyncio.sleep(0)  # the fetch waits in the consumer's thread ...
        self.consumer.pause_partitions(self.paused_while_waiting)  # ... the worker pauses
        buffered = {tp: [SimpleNamespace(offset=o, timestamp=0) for o in range(3)]
                    for tp in (REQUEST_0, CHANGELOG_0, CHANGELOG_4)}
        out = {tp: records for tp, records in buffered.items()
               if not active_partitions or tp in active_partitions}
        self.handed_over |= set(out)
        return out

    def highwater(self, tp: TP) -> int:
        return 3


def _consumer(app: faust.App) -> Any:
    consumer: Any = app.consumer
    consumer._thread.thread_loop.close()  # faust's own thread is never started here
    return consumer


def _fetch(app: faust.App, active: set[TP], paused_while_waiting: set[TP],
           paused_on_first: set[TP] | None = None) -> tuple[list[tuple[TP, int]], set[TP]]:
    """(records faust delivered, partitions whose records aiokafka handed over).

    `paused_on_first` are paused when the first record is delivered, as the
    worker pauses an input whose held records reach HELD_MAX.
    """
    consumer = _consumer(app)
    thread = PausingThread(consumer, paused_while_waiting)
    consumer._thread = thread
    consumer._to_message = lambda tp, record: SimpleNamespace(tp=tp, offset=record.offset)
    consumer._set_active_tps(active)
    consumer.resume_flow()

    async def delivered() -> list[tuple[TP, int]]:
        out = []
        async for tp, m in consumer.getmany(timeout=0.1):
            out.append((tp, m.offset))
            consumer.pause_partitions(paused_on_first or set())
        return out

    return app.loop.run_until_complete(delivered()), thread.handed_over


@pytest.fixture
def app(tmp_path: Path) -> Iterator[faust.App]:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)  # faust's transport takes the current loop
    try:
        yield faust.App("glue-test", broker="kafka://127.0.0.1:1", store="memory://",
                        datadir=str(tmp_path), autodiscover=False, loop=loop)
    finally:
        asyncio.set_event_loop(None)
        loop.close()


def test_an_input_paused_as_its_records_arrive_gets_the_rest_of_them(app: faust.App) -> None:
    faust_glue.deliver_what_was_fetched(app, [REQUESTS])
    delivered, handed_over = _fetch(app, {REQUEST_0, CHANGELOG_0}, set(), {REQUEST_0})
    assert sorted(delivered) == sorted([(REQUEST_0, 0), (REQUEST_0, 1), (REQUEST_0, 2),
                                        (CHANGELOG_0, 0), (CHANGELOG_0, 1), (CHANGELOG_0, 2)])
    assert handed_over == {REQUEST_0, CHANGELOG_0}  # the standby's partition was not asked


def test_a_fetch_whose_partitions_were_all_paused_takes_no_others_records(
        app: faust.App) -> None:
    """The recovery pauses the last changelog partition it restored while the fetch waits.

    The fetch still asks for that partition alone (not "every partition"), so the
    standby partition's records stay where they are; the restored partition's are
    dropped as faust drops them (they would be the worker's own writes).
    """
    faust_glue.deliver_what_was_fetched(app, [REQUESTS])
    delivered, handed_over = _fetch(app, {CHANGELOG_0}, {CHANGELOG_0})
    assert delivered == []
    assert handed_over == {CHANGELOG_0}


def test_without_the_glue_faust_loses_what_it_fetched(app: faust.App) -> None:
    """What the glue is for (if this fails after an upgrade, faust has fixed it and the
    glue can go): the emptied set fetches every partition, and all of it is dropped."""
    delivered, handed_over = _fetch(app, {CHANGELOG_0}, {CHANGELOG_0})
    assert delivered == []
    assert handed_over == {REQUEST_0, CHANGELOG_0, CHANGELOG_4}


def test_without_the_glue_a_paused_input_loses_the_rest_of_its_fetch(app: faust.App) -> None:
    delivered, handed_over = _fetch(app, {REQUEST_0}, set(), {REQUEST_0})
    assert delivered == [(REQUEST_0, 0)]
    assert REQUEST_0 in handed_over  # records 1 and 2: passed by aiokafka, never delivered


def _flow_control_with_pause_between(app: faust.App) -> set[TP]:
    """The buffer of REQUEST_0 fills, the worker pauses it, the buffer drains."""
    consumer = _consumer(app)
    consumer._set_active_tps({REQUEST_0, CHANGELOG_0})
    consumer.on_buffer_full(REQUEST_0)
    consumer.pause_partitions({REQUEST_0})
    consumer.on_buffer_drop(REQUEST_0)
    return set(consumer._get_active_partitions())


def test_a_paused_input_stays_paused_when_its_buffer_drains(app: faust.App) -> None:
    faust_glue.keep_paused_through_flow_control(app)
    assert _flow_control_with_pause_between(app) == {CHANGELOG_0}
    consumer: Any = app.consumer
    consumer.resume_partitions({REQUEST_0})
    assert consumer._get_active_partitions() == {REQUEST_0, CHANGELOG_0}


def test_flow_control_still_resumes_a_partition_nobody_paused(app: faust.App) -> None:
    consumer = _consumer(app)
    faust_glue.keep_paused_through_flow_control(app)
    consumer._set_active_tps({REQUEST_0, CHANGELOG_0})
    consumer.on_buffer_full(REQUEST_0)
    assert consumer._get_active_partitions() == {CHANGELOG_0}
    consumer.on_buffer_drop(REQUEST_0)
    assert consumer._get_active_partitions() == {REQUEST_0, CHANGELOG_0}


def test_without_the_glue_faust_undoes_a_pause_when_the_buffer_drains(app: faust.App) -> None:
    """Canary: if this fails after an upgrade, faust keeps pauses itself."""
    assert _flow_control_with_pause_between(app) == {REQUEST_0, CHANGELOG_0}


def test_the_worker_gives_its_partitions_up_before_faust_stops_its_consumer(
        app: faust.App) -> None:
    """faust's `App.on_stop` stops the fetch, closes the tables and later leaves the
    group; the worker's hook runs before any of it (if this fails after an upgrade,
    faust stops differently and the hook must move)."""
    steps: list[str] = []

    async def stop_consumer() -> None:
        steps.append("faust stops the fetch and the tables")

    async def give_up() -> None:
        steps.append("the worker gives its partitions up")

    async def before_shutdown(sender: Any, **kwargs: Any) -> None:
        steps.append("faust's on_before_shutdown")

    app._stop_consumer = stop_consumer  # type: ignore[method-assign]
    app.on_before_shutdown.connect(before_shutdown)  # type: ignore[arg-type]
    faust_glue.before_stopping(app, give_up)
    app.loop.run_until_complete(app.on_stop())
    assert steps == ["the worker gives its partitions up", "faust stops the fetch and the tables",
                     "faust's on_before_shutdown"]


class FetchingThread:
    """aiokafka's consumer thread as the seek sees it: a fetch may be handing records over.

    `seek` is faust's direct call into aiokafka from the caller's thread: it
    deletes the partition's buffered records under that fetch (what crashed a
    joining worker with a `KeyError` in `Fetcher.fetched_records`).
    `seek_wait` is queued to the consumer's thread and runs between its steps.
    """

    def __init__(self) -> None:
        self.buffered = {REQUEST_0: ["r0", "r1"]}
        self.positions: dict[TP, int] = {}

    def seek(self, tp: TP, offset: int) -> None:
        for _fetched in self.buffered:  # the fetch, mid-way in the other thread
            del self.buffered[tp]  # RuntimeError: changed size during iteration

    async def seek_wait(self, partitions: dict[TP, int]) -> None:
        self.buffered = {tp: r for tp, r in self.buffered.items() if tp not in partitions}
        self.positions.update(partitions)


def test_the_worker_seeks_its_inputs_in_the_consumers_thread_not_beside_its_fetch(
        app: faust.App) -> None:
    consumer = _consumer(app)
    thread = FetchingThread()
    consumer._thread = thread
    positions = {REQUEST_0: 7, TP("x.replies", 0): 3}
    app.loop.run_until_complete(faust_glue.seek(app, positions))
    assert thread.positions == positions
    assert REQUEST_0 not in thread.buffered  # what was fetched before the seek is dropped


def test_without_the_glue_a_seek_breaks_the_fetch_in_flight(app: faust.App) -> None:
    consumer = _consumer(app)
    consumer._thread = FetchingThread()
    with pytest.raises(RuntimeError, match="changed size during iteration"):
        app.loop.run_until_complete(consumer.seek(REQUEST_0, 7))
