"""Records held for proof are released by a probe the applier starts, not a tick later.

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
from pathlib import Path

from streams.config import Settings
from streams.definitions import load_definitions
from streams.processor import app as app_module
from streams.processor.app import Worker
from streams.processor.model import INPUT_ROLES, InputRecord, Role


class Ends:
    """A broker that answers ListOffsets: one request at a time, counted."""

    def __init__(self, ends: dict[str, int]) -> None:
        self.ends = ends
        self.calls = 0
        self.sent: list[float] = []
        self.answer = threading.Event()
        self.answer.set()

    def get(self, tps: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        self.calls += 1
        self.sent.append(time.monotonic())
        self.answer.wait(10)
        return {(t, p): self.ends.get(t, 0) for t, p in tps}


def _worker(tmp_path: Path) -> tuple[Worker, Ends, InputRecord]:
    settings = Settings(data_dir=tmp_path)
    worker = Worker(settings, load_definitions(settings.topology / "waits"))
    start = {role: 0 for role in INPUT_ROLES}
    worker.gate.assign(0, dict(start))
    worker.sequencer.assign(0, start, 0)
    worker.sequencer.probed(1_000, [(role, 0, 0) for role in INPUT_ROLES])  # all empty
    rec = InputRecord(Role.REQUESTS, worker.topic_names[Role.REQUESTS], 0, 0, b"k", b"{}",
                      2_000, True)  # appended after that probe
    worker.sequencer.add(rec, 2_000)
    ends = Ends({worker.topic_names[Role.REQUESTS]: 1})
    worker.end_offsets = ends  # type: ignore[assignment]
    return worker, ends, rec


def test_a_record_held_for_a_quiet_topic_is_released_after_the_background_probe(
        tmp_path: Path) -> None:
    worker, ends, rec = _worker(tmp_path)
    assert worker.sequencer.release(10) == []  # the replies and commands topics: older ones?
    assert worker.sequencer.wants_probe()

    async def probe() -> None:
        worker._probe_in_background()
        assert worker._background_probe is not None
        await worker._background_probe

    asyncio.run(probe())
    assert ends.calls == 1
    assert worker._wake.is_set()  # the applier looks again
    assert worker.sequencer.release(10) == [rec]


def test_one_background_probe_at_a_time_and_not_more_often_than_the_least_interval(
        tmp_path: Path) -> None:
    worker, ends, _ = _worker(tmp_path)
    worker.sequencer.release(10)

    async def probes() -> None:
        ends.answer.clear()  # the first request hangs until answered
        worker._probe_in_background()
        first = worker._background_probe
        await asyncio.sleep(0.05)
        worker._probe_in_background()  # one is in flight: no second one
        assert worker._background_probe is first and ends.calls == 1
        ends.answer.set()
        assert first is not None
        await first
        for _ in range(2):  # back to back: each waits out PROBE_MIN_S since the last sent
            worker._probe_in_background()
            assert worker._background_probe is not None
            await worker._background_probe

    asyncio.run(probes())
    assert ends.calls == 3
    # `sent` is stamped in the probe thread, after the hand-over to it, whose delay
    # varies (0.8 ms more for the second probe than the first failed a run at 0.99x);
    # back to back without the wait they are well under a millisecond apart.
    assert ends.sent[2] - ends.sent[1] >= app_module.PROBE_MIN_S * 0.5
