"""The stored timer index mirrors the rows, however records fall into batches.

Found in an open run at 300 waits/s: a wait parked and answered within one
batch left its reminder and deadline in the index (the batch's deletes were
written before its puts). Each such entry was emitted again on every start and
held the punctuator's scan back to it, so a tick walked every timer deleted
since: 1 ms at the start of a minute's run, 11 ms (33 ms at worst) at its end.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams.core import ArmedTimer, TimerKind
from streams.processor.batch import build_batch
from streams.processor.envelope import decode_row
from streams.processor.model import InputRecord, Role
from streams.processor.positions import Positions
from streams.processor.state import StateStores
from streams.timers.stored import due_entries, index_changes
from tests.processor.test_records import NOW, PART, handler, record, reply, request
from tests.processor.test_records import _timer as timer_of


def _stores(folder: Path) -> StateStores:
    stores = StateStores(folder)
    stores.open(PART)
    return stores


def stamped(rec: InputRecord, at: int) -> InputRecord:
    return replace(rec, timestamp=at, log_append_time=True)


def decide_and_write(store: StateStores, records: list[InputRecord]) -> None:
    """One batch, written as the worker writes it (rows, then the index key by key)."""
    batch = build_batch(handler, records, lambda p, key: store.get(p, key), {}, {}, NOW)
    for p, part in batch.parts.items():
        store[p].write(part.rows, Positions({}, 0), None, part.index)


Entries = set[tuple[str, str, int]]


def index_and_heads(store: StateStores) -> tuple[Entries, Entries]:
    """(index entries, timers the stored rows list), as (wait key, kind, due_at)."""
    db = store.db(PART)
    indexed = {(e.wait_key, e.kind.value, e.due_at)
               for e in due_entries(db, -(2**62), 2**62)}
    listed = set()
    for key, value in db.items(from_key=b"\x01"):
        if isinstance(key, bytes):
            listed |= {(key.decode(), t.kind.value, t.due_at)
                       for t in decode_row(value).head.timers}
    return indexed, listed


def test_a_wait_parked_and_answered_in_one_batch_leaves_only_its_retention_timer(
        tmp_path: Path) -> None:
    store = _stores(tmp_path)
    decide_and_write(store, [stamped(request(0), NOW),
                             stamped(reply(0, {"decision": "approved"}), NOW + 50)])

    indexed, listed = index_and_heads(store)
    assert {kind for _, kind, _ in listed} == {"retention"}
    assert indexed == listed


def test_a_stale_timer_record_deletes_an_index_entry_its_row_does_not_list(
        tmp_path: Path) -> None:
    # Databases written before the fix hold such entries: the first record
    # the punctuator emits for one is decided stale and takes the entry away.
    store = _stores(tmp_path)
    decide_and_write(store, [stamped(request(0), NOW)])
    _, listed = index_and_heads(store)
    key, _, due = min(listed)
    leaked = ArmedTimer(TimerKind.DEADLINE, due + 7, 9)
    ((entry, generation),) = index_changes(key, (), [leaked])[1]
    store.db(PART).put(entry, generation)  # what the old batch write left behind
    indexed, listed = index_and_heads(store)
    assert indexed - listed == {(key, "deadline", leaked.due_at)}

    decide_and_write(store, [stamped(timer_of(1, "deadline", leaked.due_at, 9), NOW + 1)])

    indexed, listed = index_and_heads(store)
    assert indexed == listed


_RECORDS = st.lists(st.tuples(st.sampled_from(["request", "valid", "invalid", "timer"]),
                              st.integers(0, 4_000)), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=_RECORDS, cuts=st.sets(st.integers(1, 11)))
def test_the_index_lists_exactly_the_rows_timers_whatever_the_batches(
        tmp_path_factory: Any, steps: list[tuple[str, int]], cuts: set[int]) -> None:
    store = _stores(tmp_path_factory.mktemp("db"))
    records: list[InputRecord] = []
    at = NOW
    for offset, (what, step) in enumerate(steps):
        at += step
        if what == "request":
            rec = request(offset)
        elif what == "timer":  # a timer record of whatever the row holds now, or a stale one
            rec = record(Role.TIMERS, b"", offset)
        else:
            rec = reply(offset, {"approved": True} if what == "valid" else {"nope": 1})
        records.append(stamped(rec, at))
    batch: list[InputRecord] = []
    for i, rec in enumerate(records):
        if rec.role is Role.TIMERS:  # decided against the rows as stored now
            if batch:
                decide_and_write(store, batch)
                batch = []
            stored = store.get(PART, b"k-0123456789abcdef")
            timers = decode_row(stored).head.timers if stored is not None else ()
            t = timers[0] if timers else None
            rec = stamped(timer_of(rec.offset, t.kind.value if t else "deadline",
                                   t.due_at if t else NOW, t.generation if t else 1),
                          rec.timestamp or NOW)
        batch.append(rec)
        if i + 1 in cuts:
            decide_and_write(store, batch)
            batch = []
    if batch:
        decide_and_write(store, batch)

    indexed, listed = index_and_heads(store)
    assert indexed == listed
