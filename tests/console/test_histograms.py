"""The event loop's histograms expose what prometheus_client's `Histogram` does, to the byte."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from streams.console.histograms import LoopHistogram

BUCKETS = (0.005, 0.05, 0.1, 1.0, 60.0)
values = st.lists(st.tuples(st.sampled_from(["requests", "replies"]),
                            st.floats(min_value=0, max_value=1e4) | st.sampled_from(BUCKETS)),
                  max_size=40)


@given(values)
def test_the_same_observations_render_the_same_series(observed: list[tuple[str, float]]) -> None:
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    reference = Histogram("xwait_x_seconds", "Doc.", ["topic"], buckets=BUCKETS,
                          registry=theirs)
    loop = LoopHistogram("xwait_x_seconds", "Doc.", ["topic"], buckets=BUCKETS, registry=ours)
    reference.labels("commands")  # asked for, never observed: exported at 0 by both
    loop.labels("commands")
    for topic, value in observed:
        reference.labels(topic).observe(value)
        loop.labels(topic).observe(value)
    assert generate_latest(ours) == _without_created(generate_latest(theirs))


def _without_created(text: bytes) -> bytes:
    """The worker's registry exports no `_created` series (`disable_created_metrics`)."""
    return b"".join(line for line in text.splitlines(keepends=True)
                    if b"_created" not in line)
