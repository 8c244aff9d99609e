"""The census of waits by state and definition, kept as records are applied.

It replaces a walk of the whole table per metrics scrape, so it must agree
with such a walk after any sequence of records.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.definitions import load_definitions
from streams.partitioning import partition_for
from streams.processor.census import Census, census_key
from streams.processor.envelope import read_head
from streams.processor.model import InputRecord, Role, RowWrite
from streams.processor.records import RecordHandler

DEFS = load_definitions(Path(__file__).resolve().parents[2] / "topology" / "waits")
PARTITIONS = 4
NOW = 1_800_000_000_000
KEYS = [f"w-{i:02d}-census" for i in range(6)]


def _record(role: Role, key: str, value: dict[str, object], offset: int) -> InputRecord:
    return InputRecord(role, f"xwait.{role.value}", partition_for(key.encode(), PARTITIONS),
                       offset, key.encode(), json.dumps(value).encode())


def _input(op: tuple[str, int], offset: int) -> InputRecord:
    kind, i = op
    key = KEYS[i]
    if kind == "start":
        return _record(Role.REQUESTS, key, {"correlationKey": key, "requestedAt": NOW,
                                            "definition": "expense-approval"}, offset)
    if kind == "reply":
        return _record(Role.REPLIES, key, {"correlationKey": key, "channel": "portal",
                                           "responseData": '{"decision": "approved"}'}, offset)
    return _record(Role.COMMANDS, key, {"correlationKey": key, "command": kind}, offset)


ops = st.lists(st.tuples(st.sampled_from(["start", "reply", "SUSPEND", "RESUME", "CANCEL"]),
                         st.integers(0, len(KEYS) - 1)), max_size=40)


@settings(max_examples=100, deadline=None)
@given(ops)
def test_the_census_agrees_with_a_walk_of_the_table(script: list[tuple[str, int]]) -> None:
    handler = RecordHandler(DEFS, PARTITIONS)
    rows: dict[str, bytes] = {}
    census = Census()
    for offset, op in enumerate(script):
        rec = _input(op, offset)
        handled = handler.handle(rec, rows.get, NOW + offset)
        assert handled.wait_key is not None
        if handled.row is RowWrite.DELETE:
            rows.pop(handled.wait_key, None)
        elif isinstance(handled.row, bytes):
            rows[handled.wait_key] = handled.row
        census.move(rec.partition, handled.head_before, handled.head_after)
    walked: Counter[tuple[str, str]] = Counter()
    by_version: Counter[tuple[str, tuple[str, str | None]]] = Counter()
    for value in rows.values():
        head = read_head(value)
        key = census_key(head)
        if key is not None and head.definition is not None:
            walked[(key[0], head.definition)] += 1
            by_version[(key[0], (head.definition, head.version))] += 1
    assert census.totals(range(PARTITIONS)) == walked
    assert census.by_version(range(PARTITIONS)) == by_version
    assert all(version == DEFS[name].version for (_, (name, version)) in by_version)


def test_a_rebuilt_partition_replaces_its_counts_and_others_stay() -> None:
    handler = RecordHandler(DEFS, PARTITIONS)
    rows: dict[str, bytes] = {}
    census = Census()
    for offset, key in enumerate(KEYS):
        rec = _input(("start", KEYS.index(key)), offset)
        handled = handler.handle(rec, rows.get, NOW)
        assert isinstance(handled.row, bytes)
        rows[key] = handled.row
        census.move(rec.partition, handled.head_before, handled.head_after)
    by_partition = Counter(partition_for(k.encode(), PARTITIONS) for k in KEYS)
    p = next(iter(by_partition))
    census.replace_partition(p, Counter())
    assert sum(census.totals(range(PARTITIONS)).values()) == len(KEYS) - by_partition[p]
    census.drop_partition(p)
    assert p not in census.partitions()
