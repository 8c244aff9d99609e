"""The console list keeps the first N matching waits in order, reading heads only, and
pages through them with cursors that neither skip nor repeat a wait."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Iterator
from pathlib import Path

import rocksdict
from hypothesis import event, given, settings
from hypothesis import strategies as st

from streams.console.waits import (
    Filters,
    SortKey,
    cursor_of,
    first_waits,
    first_waits_by_due,
    index_start,
    parse_cursor,
)
from streams.core import ArmedTimer, OutcomeKind, Slot, TimerKind, Wait, WaitStatus, encode_slot
from streams.processor.envelope import Row, encode_row
from streams.processor.model import RowHead
from streams.processor.tuning import TUNING
from streams.timers.due import DueTimers
from streams.timers.stored import index_changes

heads = st.builds(
    RowHead,
    st.none() | st.sampled_from(list(WaitStatus)),
    st.sampled_from(["expense-approval", "vendor-quote"]),
    st.sampled_from(["acme", "globex", None]),
    st.lists(st.builds(ArmedTimer, st.just(TimerKind.DEADLINE), st.integers(0, 50),
                       st.integers(1, 9)), max_size=1).map(tuple),
    st.integers(0, 50),
    st.sampled_from([None, "v1", "v2"]),
)
FILTERS = [Filters(), Filters(state="suspended"), Filters(tenant="acme"),
           Filters(definition="vendor-quote"), Filters(state="all"), Filters(state="done"),
           Filters(key_prefix="key-01"), Filters(parked_from=10, parked_to=30),
           Filters(outcome="CANCELLED"), Filters(state="all", outcome="RECEIVED"),
           Filters(version="v1"), Filters(due_from=10, due_to=25), Filters(due_to=12),
           Filters(state="all", due_from=20), Filters(definition="vendor-quote", version="v2",
                                                       due_from=5)]
OUTCOMES = list(OutcomeKind)


def _key(i: int) -> str:
    """The key of the i-th wait of a test's table."""
    return f"key-{i:03d}"


def _row(i: int, head: RowHead) -> tuple[int, bytes, bytes]:
    slot = None
    if head.state is not None:
        done = head.state is WaitStatus.DONE
        wait = Wait(key=_key(i), definition=head.definition or "", tenant=head.tenant,
                    parked_at=head.parked_at, status=head.state,
                    outcome=OUTCOMES[i % 3] if done else None)
        slot = encode_slot(Slot(wait=wait))
    return i % 4, _key(i).encode(), encode_row(Row(slot, head=head))


def _rows(found: list[RowHead]) -> list[tuple[int, bytes, bytes]]:
    return [_row(i, h) for i, h in enumerate(found)]


def _expected(found: list[RowHead], filters: Filters) -> list[int]:
    def sort_key(i: int) -> tuple[int, int, str]:
        h = found[i]
        due = h.next_due
        return (0 if due is not None else 1, due if due is not None else h.parked_at,
                _key(i))

    def outcome_ok(i: int) -> bool:
        return filters.outcome is None or OUTCOMES[i % 3].value == filters.outcome

    matching = [i for i, h in enumerate(found)
                if filters.match(_key(i).encode(), h) and outcome_ok(i)]
    return sorted(matching, key=sort_key)


@settings(max_examples=150, deadline=None)
@given(st.lists(heads, max_size=60), st.integers(1, 70), st.sampled_from(FILTERS))
def test_the_first_n_are_those_a_full_sort_would_give(
    found: list[RowHead], limit: int, filters: Filters
) -> None:
    got = asyncio.run(first_waits(_rows(found), filters, limit))
    expected = _expected(found, filters)[:limit]
    assert [(k, p) for k, p, _ in got] == [(_key(i).encode(), i % 4) for i in expected]
    if filters.state is None and filters.outcome is None:
        assert all(found[i].state is not WaitStatus.DONE for i in expected)
    if filters.outcome is not None:
        assert all(found[i].state is WaitStatus.DONE for i in expected)


@settings(max_examples=100, deadline=None)
@given(st.lists(heads, max_size=60), st.integers(1, 9), st.sampled_from(FILTERS))
def test_pages_after_a_cursor_cover_every_match_once_in_order(
    found: list[RowHead], page: int, filters: Filters
) -> None:
    rows = _rows(found)
    seen: list[bytes] = []
    after = None
    for _ in range(len(found) + 1):
        got = asyncio.run(first_waits(rows, filters, page, after))
        seen += [k for k, _, _ in got]
        if len(got) < page:
            break
        after = parse_cursor(cursor_of(got[-1][2]))  # the cursor survives its text form
    assert seen == [_key(i).encode() for i in _expected(found, filters)]


timers = st.builds(ArmedTimer, st.sampled_from(list(TimerKind)), st.integers(0, 30),
                   st.integers(1, 9))
timed_heads = st.builds(
    RowHead,
    st.none() | st.sampled_from(list(WaitStatus)),
    st.sampled_from(["expense-approval", "vendor-quote"]),
    st.sampled_from(["acme", "globex", None]),
    # four in five waits with a timer armed, as in a table of parked waits
    st.tuples(st.integers(0, 4), st.lists(timers, min_size=1, max_size=2)).map(
        lambda n_ts: tuple(sorted(n_ts[1], key=lambda t: (t.due_at, t.generation)))
        if n_ts[0] else ()),
    st.integers(0, 50),
    st.sampled_from([None, "v1", "v2"]),
)


class Indexed:
    """Rows in four partitions with the timer index the worker keeps beside them."""

    def __init__(self, found: list[RowHead], where: Path) -> None:
        self.rows = _rows(found)
        self.by_key = {(k, p): v for p, k, v in self.rows}
        self.dbs = {p: rocksdict.Rdict(str(where / f"p{p}"),
                                       options=rocksdict.Options(raw_mode=True))
                    for p in range(4)}
        for (p, key, _), head in zip(self.rows, found, strict=True):
            for k, v in index_changes(key.decode(), (), head.timers)[1]:
                self.dbs[p].put(k, v)
        self.index = DueTimers(self.dbs.__getitem__, scan_slack=TUNING.timer_scan_slack)
        for p in range(4):
            self.index.own(p, low=0)
        self.reads = 0

    def read_row(self, key: bytes, partition: int) -> bytes | None:
        self.reads += 1
        return self.by_key.get((key, partition))

    def by_due(self, filters: Filters, limit: int, after: SortKey | None
               ) -> list[tuple[bytes, int, SortKey]] | None:
        armed = self.index.armed_in_order(range(4), index_start(filters, after))
        assert armed is not None
        return asyncio.run(first_waits_by_due(armed, self.read_row, filters, limit, after))

    def close(self) -> None:
        for db in self.dbs.values():
            db.close()


def indexed(found: list[RowHead]) -> Iterator[Indexed]:
    with tempfile.TemporaryDirectory() as where:
        table = Indexed(found, Path(where))
        try:
            yield table
        finally:
            table.close()


@settings(max_examples=120, deadline=None)
@given(st.lists(timed_heads, min_size=10, max_size=50), st.integers(1, 6), st.sampled_from(FILTERS),
       st.integers(0, 3))
def test_a_page_read_from_the_timer_index_is_the_page_a_full_scan_gives(
    found: list[RowHead], limit: int, filters: Filters, pages_in: int
) -> None:
    """Whenever the index answers, its page is the scan's, cursors included; when it
    cannot (a page reaching the waits with no timer), it says so and the scan answers."""
    for table in indexed(found):
        after: SortKey | None = None
        for _ in range(pages_in + 1):
            scanned = asyncio.run(first_waits(table.rows, filters, limit, after))
            from_index = table.by_due(filters, limit, after)
            if from_index is None:
                assert len(scanned) < limit or scanned[-1][2][0] == 1
                event("the scan answers")
                break
            event("the index answers")
            assert from_index == scanned
            if len(scanned) < limit:
                break  # a `due_to` bound ends the walk early, with the last page
            after = scanned[-1][2]


def test_the_first_page_reads_the_waits_on_it_not_the_table() -> None:
    """At a thousand parked waits a page of ten costs about ten row reads; waits due at
    one instant are listed by key, whatever their timers' kinds."""
    kinds = [TimerKind.POLL, TimerKind.DEADLINE, TimerKind.REMINDER]
    found = [RowHead(WaitStatus.PARKED, "vendor-quote", "acme",
                     (ArmedTimer(kinds[i % 3], 1000 + i % 97, 1),
                      ArmedTimer(TimerKind.DEADLINE, 5000 + i, 1)), i)
             for i in range(1000)]
    for table in indexed(found):
        page = table.by_due(Filters(), 10, None)
        assert page is not None
        assert page == asyncio.run(first_waits(table.rows, Filters(), 10))
        assert table.reads == 10
        following = table.by_due(Filters(), 10, page[-1][2])
        assert following == asyncio.run(first_waits(table.rows, Filters(), 10, page[-1][2]))
        assert table.reads < 10 + 10 + 20, "the next page seeks to its cursor's due time"
        table.index.drop(3)
        assert table.index.armed_in_order(range(4)) is None, "a partition not taken yet: scan"


def test_a_due_filter_takes_waits_not_done_by_their_earliest_timer() -> None:
    armed = (ArmedTimer(TimerKind.DEADLINE, 100, 1),)
    parked = RowHead(WaitStatus.PARKED, "d", None, armed, 5, "v2")
    suspended = RowHead(WaitStatus.SUSPENDED, "d", None, (), 5, "v2")
    done = RowHead(WaitStatus.DONE, "d", None, (ArmedTimer(TimerKind.RETENTION, 100, 1),), 5)
    window = Filters(state="all", due_from=100, due_to=100)
    assert window.match(b"k", parked)
    assert not window.match(b"k", suspended), "nothing is due while suspended"
    assert not window.match(b"k", done), "a finished wait's purge is not a due time"
    assert not Filters(due_to=99).match(b"k", parked)
    assert not Filters(due_from=101).match(b"k", parked)
    assert Filters(version="v2").match(b"k", parked)
    assert not Filters(version="v1").match(b"k", parked)


def test_a_page_bounded_by_due_time_walks_the_index_from_and_to_the_bounds() -> None:
    """"Due in the next hour" out of a thousand parked waits reads the few due then."""
    found = [RowHead(WaitStatus.PARKED, "vendor-quote", "acme",
                     (ArmedTimer(TimerKind.DEADLINE, 1000 + i, 1),), i) for i in range(1000)]
    for table in indexed(found):
        window = Filters(due_from=1500, due_to=1504)
        page = table.by_due(window, 100, None)
        assert page == asyncio.run(first_waits(table.rows, window, 100))
        assert [k for k, _, _ in page] == [_key(i).encode() for i in range(500, 505)]
        assert table.reads == 5
