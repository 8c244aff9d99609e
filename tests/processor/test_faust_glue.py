"""faust's fetch against a consumer thread that keeps aiokafka's rules.

The stand-in thread below answers like aiokafka's `Fetcher.fetched_records`:
records of the partitions asked for, and of *every* assigned partition when
the set asked for is empty.  faust's own `Consumer.getmany` runs unchanged
on top of it, so the tests show what faust delivers to the agents.
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

CHANGELOG = "app-waits-changelog"
ACTIVE, STANDBY = TP(CHANGELOG, 0), TP(CHANGELOG, 4)


class PausingThread:
    """Waits for records like aiokafka, while the worker pauses partitions meanwhile."""

    def __init__(self, paused_while_waiting: set[TP]) -> None:
        self.paused_while_waiting = paused_while_waiting
        self.consumer: Any = None

    async def getmany(self, active_partitions: set[TP], timeout: float) -> dict[TP, list[Any]]:
        await asyncio.sleep(0)  # the fetch waits in the consumer's thread ...
        self.consumer.pause_partitions(self.paused_while_waiting)  # ... the recovery pauses
        buffered = {tp: [SimpleNamespace(offset=o, timestamp=0) for o in range(3)]
                    for tp in (ACTIVE, STANDBY)}
        return {tp: records for tp, records in buffered.items()
                if not active_partitions or tp in active_partitions}

    def highwater(self, tp: TP) -> int:
        return 3


async def _delivered(app: faust.App, paused_while_waiting: set[TP]) -> list[tuple[TP, int]]:
    consumer: Any = app.consumer
    thread = PausingThread(paused_while_waiting)
    thread.consumer = consumer
    consumer._thread.thread_loop.close()  # faust's own thread is never started here
    consumer._thread = thread
    consumer._to_message = lambda tp, record: SimpleNamespace(tp=tp, offset=record.offset)
    consumer._set_active_tps({ACTIVE})  # restoring ACTIVE; STANDBY waits for its seek
    consumer.resume_flow()
    return [(tp, message.offset) async for tp, message in consumer.getmany(timeout=0.1)]


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


def test_a_partition_paused_while_the_fetch_waits_still_gets_the_records_fetched_for_it(
        app: faust.App) -> None:
    faust_glue.deliver_what_was_fetched(app)
    delivered = app.loop.run_until_complete(_delivered(app, paused_while_waiting={ACTIVE}))
    # The recovery paused the last active changelog partition: the fetch still asked
    # for it alone (not "every partition"), and what it got is delivered, not dropped.
    assert delivered == [(ACTIVE, 0), (ACTIVE, 1), (ACTIVE, 2)]


def test_without_the_glue_faust_loses_both_partitions_records(app: faust.App) -> None:
    """What the glue is for: faust 0.15 drops all six records while the fetch moved past
    (if this fails after an upgrade, faust has fixed it and the glue can go)."""
    assert app.loop.run_until_complete(_delivered(app, paused_while_waiting={ACTIVE})) == []
