"""The console list keeps the first N matching waits by due time, reading heads only."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.console.waits import Filters, first_waits
from streams.core import ArmedTimer, TimerKind, WaitStatus
from streams.processor.envelope import Row, encode_row
from streams.processor.model import RowHead

heads = st.builds(
    RowHead,
    st.none() | st.sampled_from(list(WaitStatus)),
    st.sampled_from(["expense-approval", "vendor-quote"]),
    st.sampled_from(["acme", "globex", None]),
    st.lists(st.builds(ArmedTimer, st.just(TimerKind.DEADLINE), st.integers(0, 50),
                       st.integers(1, 9)), max_size=1).map(tuple),
    st.integers(0, 50),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(heads, max_size=60), st.integers(1, 70),
       st.sampled_from([Filters(), Filters(state="suspended"), Filters(tenant="acme"),
                        Filters(definition="vendor-quote")]))
def test_the_first_n_are_those_a_full_sort_would_give(
    found: list[RowHead], limit: int, filters: Filters
) -> None:
    rows = [(i % 4, f"key-{i:03d}".encode(), encode_row(Row(None, head=h)))
            for i, h in enumerate(found)]
    got = asyncio.run(first_waits(rows, filters, limit))

    def sort_key(i: int) -> tuple[int, int, str]:
        h = found[i]
        due = h.next_due
        return (0 if due is not None else 1, due if due is not None else h.parked_at,
                f"key-{i:03d}")

    matching = [i for i, h in enumerate(found) if filters.match(h)]
    expected = sorted(matching, key=sort_key)[:limit]
    assert got == [(f"key-{i:03d}".encode(), i % 4) for i in expected]
    assert all(found[i].state is not WaitStatus.DONE for i in expected) or filters.state
