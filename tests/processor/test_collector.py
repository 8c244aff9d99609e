"""The worker's garbage-collector setting and the timing of its passes."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from streams.processor.collector import GcWatch, tune
from streams.processor.latency import Latencies


@pytest.fixture
def restored() -> Iterator[None]:
    """Whatever a test does to the collector, the next test finds Python's setting."""
    threshold = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


class Cycle:
    def __init__(self) -> None:
        self.me = self


@pytest.mark.usefixtures("restored")
def test_tune_freezes_what_exists_and_raises_only_the_young_threshold() -> None:
    _, older, oldest = gc.get_threshold()
    tune(12_345)
    assert gc.get_threshold() == (12_345, older, oldest)
    assert gc.get_freeze_count() > 1000  # the modules and objects alive now


@pytest.mark.usefixtures("restored")
def test_cyclic_garbage_made_after_tuning_is_still_collected() -> None:
    tune(12_345)
    cycle = Cycle()
    gone = weakref.ref(cycle)
    del cycle  # unreachable now, but its reference to itself keeps it: only a pass frees it
    assert gone() is not None
    gc.collect()
    assert gone() is None


def test_a_watch_times_each_pass_by_generation_until_removed() -> None:
    latency = Latencies()
    watch = GcWatch(latency)
    watch.install()
    watch.install()  # twice is once
    try:
        gc.collect(0)
        gc.collect(0)
        gc.collect()
    finally:
        watch.remove()
    assert watch.passes[0] >= 2 and watch.passes[2] >= 1
    counted = latency.summary()["gc_us"]["n"]
    assert counted == sum(watch.passes)
    gc.collect()
    assert latency.summary()["gc_us"]["n"] == counted
