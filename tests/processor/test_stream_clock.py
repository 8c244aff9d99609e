"""Records held for proof are released by a probe the applier asks for, not a tick later.

A record may be applied once no other input topic of its partition can still
hold an older one.  A topic with nothing fetched proves that only by a probe
(its end offset) sent after the record was appended.  The applier probes in
the background whenever the sequencer asks for one, while it decides.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from streams.config import Settings
from streams.processor import stream_clock as clock_module
from streams.processor.context import wall_ms
from streams.processor.model import INPUT_ROLES, InputRecord, Role
from streams.processor.partitions import PartitionBook
from streams.processor.sequencer import Sequencer
from streams.processor.stream_clock import StreamClock
from streams.processor.tuning import TUNING
from tests.processor.contexts import context

pytestmark = [pytest.mark.rule2]


class Ends:
    """A broker that answers ListOffsets: one request at a time, counted."""

    def __init__(self, ends: dict[str, int]) -> None:
        self.ends = ends
        self.calls = 0
        self.sent: list[float] = []
        self.answer = threading.Event()
        self.answer.set()
        self.asked = threading.Event()  # set by the first request (in the probe thread)
        self.replica_count: int | Exception = 1  # of the input topics' partitions

    def replicas(self, topics: list[str], timeout: float = 2.0) -> int:
        if isinstance(self.replica_count, Exception):
            raise self.replica_count
        return self.replica_count

    def get(self, tps: Iterable[tuple[str, int]], timeout: float = 10.0,
            earliest: bool = False, partial: bool = False) -> dict[tuple[str, int], int]:
        self.calls += 1
        self.sent.append(time.monotonic())
        self.asked.set()
        self.answer.wait(10)
        return {(t, p): self.ends.get(t, 0) for t, p in tps}


def port(fake: object) -> Any:
    """A fake where the room expects the real thing (it uses only what the fake has)."""
    return fake


class Fixture:
    """A stream clock of one active partition, its sequencer, and a fake broker."""

    def __init__(self, tmp_path: Path, linger: float = 0.0, grace: float | None = None) -> None:
        settings = Settings(data_dir=tmp_path, batch_linger=linger, commit_grace=grace)
        self.topics = {role: settings.topic(role.value) for role in Role}
        self.sequencer = Sequencer()
        ctx = context(settings)
        self.wake = ctx.wake
        self.ends = Ends({self.topics[Role.REQUESTS]: 1})
        self.punctuator = StreamClock(ctx, self.sequencer, PartitionBook(), port(None),
                                      port(self.ends), active=lambda: {0})
        start = {role: 0 for role in INPUT_ROLES}
        self.sequencer.assign(0, start, 0)
        self.sequencer.probed(1_000, [(role, 0, 0) for role in INPUT_ROLES])  # all empty
        self.rec = InputRecord(Role.REQUESTS, self.topics[Role.REQUESTS], 0, 0, b"k", b"{}",
                               2_000, True)  # appended after that probe
        self.sequencer.add(self.rec, 2_000)


def test_a_record_held_for_a_quiet_topic_is_released_after_the_background_probe(
        tmp_path: Path) -> None:
    f = Fixture(tmp_path)
    assert f.sequencer.release(10) == []  # the replies and commands topics: older ones?
    assert f.sequencer.wants_probe()

    async def probe() -> None:
        f.punctuator.probe_soon()
        assert f.punctuator._background is not None
        await f.punctuator._background

    asyncio.run(probe())
    assert f.ends.calls == 1
    assert f.wake.is_set()  # the applier looks again
    assert f.sequencer.release(10) == [f.rec]


def test_one_background_probe_at_a_time_and_not_more_often_than_the_least_interval(
        tmp_path: Path) -> None:
    f = Fixture(tmp_path)
    ends = f.ends
    f.sequencer.release(10)
    punctuator = f.punctuator

    async def probes() -> None:
        ends.answer.clear()  # the first request hangs until answered
        punctuator.probe_soon()
        first = punctuator._background
        # In flight once its thread has sent it (a busy machine starts that thread late).
        assert await asyncio.to_thread(ends.asked.wait, 10), "the first probe was never sent"
        punctuator.probe_soon()  # one is in flight: no second one
        assert punctuator._background is first and ends.calls == 1
        ends.answer.set()
        assert first is not None
        await first
        for _ in range(2):  # back to back: each waits out PROBE_MIN_S since the last sent
            punctuator.probe_soon()
            assert punctuator._background is not None
            await punctuator._background
            began.append(punctuator._last_probe)

    began: list[float] = []
    asyncio.run(probes())
    assert ends.calls == 3
    # When each probe began, in the event loop.  `sent`, stamped in the probe thread after
    # the hand-over to it, varies with that hand-over: at load 75 two probes were 4.4 ms
    # apart there.  Back to back without the wait they begin well under a millisecond apart.
    assert began[1] - began[0] >= TUNING.probe_min_s


def test_with_a_batch_linger_the_applier_probes_no_more_often_than_batches_start(
        tmp_path: Path) -> None:
    """Records released by a probe wait for the next batch anyway (`XWAIT_BATCH_LINGER`):
    a probe each 10 ms for them was 90 requests a second at 100 waits/s."""
    f = Fixture(tmp_path, linger=0.3)
    f.sequencer.release(10)

    async def probes() -> None:
        for _ in range(2):
            f.punctuator.probe_soon()
            assert f.punctuator._background is not None
            await f.punctuator._background

    asyncio.run(probes())
    assert f.ends.calls == 2
    # Stamped in the probe thread: the first one's start-up may stamp it late (see above).
    assert f.ends.sent[1] - f.ends.sent[0] >= 0.3 * 0.5


def test_records_taken_since_the_last_probe_are_probed_for_at_once_whatever_the_linger(
        tmp_path: Path) -> None:
    """A fetch just taken is probed for at once, not a linger after the last probe: the
    applier decides its records once that probe proves their quiet topics (so about one
    probe a fetch, the fetch paced by the linger at the broker)."""
    f = Fixture(tmp_path, linger=1.0)  # the most it may be; a probe that waited it is late
    f.sequencer.release(10)
    began: list[float] = []

    async def probes() -> None:
        for offset in (1, 2):
            f.punctuator.probe_soon()
            assert f.punctuator._background is not None
            await f.punctuator._background
            began.append(f.punctuator._last_probe)
            later = replace(f.rec, offset=offset, timestamp=wall_ms() + 50)
            f.sequencer.add(later, wall_ms())  # the next fetch, appended after the probe
            f.sequencer.release(10)
        assert f.punctuator.covered == 2  # sent after the second record was taken
        f.punctuator.probe_soon()
        assert f.punctuator._background is not None
        await f.punctuator._background

    asyncio.run(probes())
    assert f.ends.calls == 3
    assert began[1] - began[0] < 1.0
    assert f.punctuator.covered == f.sequencer.taken == 3


def quiet_partition_time(f: Fixture) -> tuple[int, int, int]:
    """A probe of a partition with nothing in it: (sent no earlier, stream time, no later)."""
    f.sequencer.assign(1, {role: 0 for role in INPUT_ROLES}, 0)
    f.ends.ends = {}  # every input empty
    before = wall_ms()
    asyncio.run(f.punctuator.probe({1}))
    after = wall_ms()
    stream_time = f.sequencer.time(1)
    assert stream_time is not None
    return before, stream_time, after


def test_a_probe_proves_its_inputs_only_up_to_the_commit_grace_before_it_was_sent(
        tmp_path: Path) -> None:
    """A record appended shortly before a probe may not be committed yet: Kafka shows it
    only then (XWAIT_COMMIT_GRACE); the timers of a quiet partition wait that long."""
    before, stream_time, after = quiet_partition_time(Fixture(tmp_path, grace=0.5))
    assert before - 500 <= stream_time <= after - 500
    before, stream_time, after = quiet_partition_time(Fixture(tmp_path, grace=0.0))
    assert before <= stream_time <= after


def test_the_automatic_grace_is_the_replicated_one_unless_every_input_has_one_replica(
        tmp_path: Path) -> None:
    replicated = clock_module.REPLICATED_GRACE_MS
    assert replicated == 200
    for replicas, grace in ((3, replicated), (1, 0)):
        f = Fixture(tmp_path)
        f.ends.replica_count = replicas
        before, stream_time, after = quiet_partition_time(f)
        assert f.punctuator.grace_ms == grace
        assert before - grace <= stream_time <= after - grace
    # Replicas unknown (the broker away): the replicated grace, the safe side, until known.
    f = Fixture(tmp_path)
    f.ends.replica_count = KafkaException(KafkaError(KafkaError._TRANSPORT, "away"))  # noqa: SLF001
    before, stream_time, after = quiet_partition_time(f)
    assert f.punctuator.grace_ms is None
    assert before - replicated <= stream_time <= after - replicated
