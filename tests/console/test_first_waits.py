"""The console list keeps the first N matching waits in order, reading heads only, and
pages through them with cursors that neither skip nor repeat a wait."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.console.waits import Filters, cursor_of, first_waits, parse_cursor
from streams.core import ArmedTimer, OutcomeKind, Slot, TimerKind, Wait, WaitStatus, encode_slot
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
FILTERS = [Filters(), Filters(state="suspended"), Filters(tenant="acme"),
           Filters(definition="vendor-quote"), Filters(state="all"), Filters(state="done"),
           Filters(key_prefix="key-01"), Filters(parked_from=10, parked_to=30),
           Filters(outcome="CANCELLED"), Filters(state="all", outcome="RECEIVED")]
OUTCOMES = list(OutcomeKind)


def _row(i: int, head: RowHead) -> tuple[int, bytes, bytes]:
    slot = None
    if head.state is not None:
        done = head.state is WaitStatus.DONE
        wait = Wait(key=f"key-{i:03d}", definition=head.definition or "", tenant=head.tenant,
                    parked_at=head.parked_at, status=head.state,
                    outcome=OUTCOMES[i % 3] if done else None)
        slot = encode_slot(Slot(wait=wait))
    return i % 4, f"key-{i:03d}".encode(), encode_row(Row(slot, head=head))


def _expected(found: list[RowHead], filters: Filters) -> list[int]:
    def sort_key(i: int) -> tuple[int, int, str]:
        h = found[i]
        due = h.next_due
        return (0 if due is not None else 1, due if due is not None else h.parked_at,
                f"key-{i:03d}")

    def outcome_ok(i: int) -> bool:
        return filters.outcome is None or OUTCOMES[i % 3].value == filters.outcome

    matching = [i for i, h in enumerate(found)
                if filters.match(f"key-{i:03d}".encode(), h) and outcome_ok(i)]
    return sorted(matching, key=sort_key)


@settings(max_examples=150, deadline=None)
@given(st.lists(heads, max_size=60), st.integers(1, 70), st.sampled_from(FILTERS))
def test_the_first_n_are_those_a_full_sort_would_give(
    found: list[RowHead], limit: int, filters: Filters
) -> None:
    rows = [_row(i, h) for i, h in enumerate(found)]
    got = asyncio.run(first_waits(rows, filters, limit))
    expected = _expected(found, filters)[:limit]
    assert [(k, p) for k, p, _ in got] == [(f"key-{i:03d}".encode(), i % 4) for i in expected]
    if filters.state is None and filters.outcome is None:
        assert all(found[i].state is not WaitStatus.DONE for i in expected)
    if filters.outcome is not None:
        assert all(found[i].state is WaitStatus.DONE for i in expected)


@settings(max_examples=100, deadline=None)
@given(st.lists(heads, max_size=60), st.integers(1, 9), st.sampled_from(FILTERS))
def test_pages_after_a_cursor_cover_every_match_once_in_order(
    found: list[RowHead], page: int, filters: Filters
) -> None:
    rows = [_row(i, h) for i, h in enumerate(found)]
    seen: list[bytes] = []
    after = None
    for _ in range(len(found) + 1):
        got = asyncio.run(first_waits(rows, filters, page, after))
        seen += [k for k, _, _ in got]
        if len(got) < page:
            break
        after = parse_cursor(cursor_of(got[-1][2]))  # the cursor survives its text form
    assert seen == [f"key-{i:03d}".encode() for i in _expected(found, filters)]
