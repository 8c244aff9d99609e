"""The record path's workloads without Kafka or RocksDB, for the benches that time it
(bench/decide_bench.py: the collector and the batch size; bench/path_bench.py: the
Python rules against the native ones, by CPU and by instruction count).

The drain is `compare.py`'s (W1 requests on bench-long, replies 90% valid, a review
for each invalid one); the storm is silent requests on bench-storm, then the due
timer the applier fires for each (its deadline).  Rows are kept in a dict;
`decide` decides one batch of them at a stream time far past every due time.
"""

from __future__ import annotations

import json
import random
import uuid
from collections import Counter
from typing import Any

from streams.partitioning import partition_for
from streams.processor.batch import Batch, build_batch
from streams.processor.model import InputRecord, Role
from streams.processor.records import RecordHandler
from streams.timers.firing import FiredTimer

__all__ = ["BATCH", "DRAIN_DEFINITION", "PARTITIONS", "STORM_DEFINITION", "STREAM_TIMES", "T0",
           "Item", "Rows", "decide", "drain_records", "storm_records"]

PARTITIONS = 8
BATCH = 500
T0 = 1_800_000_000_000
DRAIN_DEFINITION = "bench-long"
STORM_DEFINITION = "bench-storm"  # the kit's `bench` (W1: PT1S reminders, limit 2, PT3S deadline)
# Stream time far past every due time: a timer record is decided, not put off.
STREAM_TIMES = {p: T0 + 10**9 for p in range(PARTITIONS)}

Item = InputRecord | FiredTimer
Rows = dict[tuple[int, bytes], bytes]  # (partition, wait key) -> stored row


class _Offsets:
    """The next offset of each input topic-partition, as a broker would give them."""

    def __init__(self) -> None:
        self.next: Counter[tuple[Role, int]] = Counter()

    def record(self, role: Role, key: str, value: dict[str, Any], at: int) -> InputRecord:
        p = partition_for(key.encode(), PARTITIONS)
        offset = self.next[(role, p)]
        self.next[(role, p)] += 1
        return InputRecord(role, f"bench.{role.value}", p, offset, key.encode(),
                           json.dumps(value).encode(), at, True)

    def request(self, key: str, definition: str, i: int) -> InputRecord:
        return self.record(Role.REQUESTS, key, {
            "correlationKey": key, "definition": definition, "tenant": "acme",
            "payload": json.dumps({"amount": 42}), "parties": [], "deadline": None,
            "requestedAt": T0 + i}, T0 + i)


def _keys(waits: int, seed: int) -> tuple[random.Random, list[str]]:
    rng = random.Random(seed)  # noqa: S311 - a reproducible load
    return rng, [uuid.UUID(int=rng.getrandbits(128)).hex for _ in range(waits)]


def drain_records(waits: int, seed: int) -> list[InputRecord]:
    """Requests, then a reply each (10% invalid), then a review of each invalid one."""
    rng, keys = _keys(waits, seed)
    o = _Offsets()
    out = [o.request(k, DRAIN_DEFINITION, i) for i, k in enumerate(keys)]
    invalid = []
    for i, k in enumerate(keys):
        valid = rng.random() < 0.9
        if not valid:
            invalid.append(k)
        data = {"approved": True, "by": "bench"} if valid else {"approved": "maybe"}
        out.append(o.record(Role.REPLIES, k, {
            "correlationKey": k, "tenant": "acme", "channel": "portal",
            "responseData": json.dumps(data), "replyId": f"r-{i}", "sentAt": T0 + waits + i},
            T0 + waits + i))
    out += [o.record(Role.COMMANDS, k, {
        "correlationKey": k, "command": "REVIEW", "reason": None, "reviewOutcome": "Accept",
        "reviewNote": "bench accepts", "responseData": None, "operator": "bench"},
        T0 + 2 * waits + i) for i, k in enumerate(invalid)]
    return out


def storm_records(handler: RecordHandler, waits: int, seed: int) -> list[Item]:
    """Silent requests, then the due timer the applier fires for each: the storm.

    The applier takes one timer per wait from the index, the last of its due
    timers (its deadline); deciding it fires both reminders first and then
    the deadline, as in `compare.py --workloads storm`.  The timers are taken
    from the rows the requests leave (each a `FiredTimer`, decided as `fired`).
    """
    _, keys = _keys(waits, seed)
    o = _Offsets()
    requests = [o.request(k, STORM_DEFINITION, i) for i, k in enumerate(keys)]
    rows: Rows = {}
    timers: list[FiredTimer] = []
    for i in range(0, len(requests), BATCH):
        batch = build_batch(handler, requests[i:i + BATCH], lambda p, key: rows.get((p, key)),
                            {}, {}, T0)
        for part in batch.parts.values():
            for change in part.changes:
                last = max(change.after.timers, key=lambda t: t.due_at)
                timers.append(FiredTimer(part.partition, change.wait_key, last.kind,
                                         last.due_at, last.generation))
    return [*requests, *timers]


def decide(handler: RecordHandler, chunk: list[Item], rows: Rows) -> Batch:
    """One batch of `chunk` decided against `rows`, whose changes it then holds."""
    batch = build_batch(handler, [r for r in chunk if isinstance(r, InputRecord)],
                        lambda p, key: rows.get((p, key)), {}, STREAM_TIMES, T0 + 10**9,
                        [r for r in chunk if isinstance(r, FiredTimer)])
    for p, part in batch.parts.items():
        for key, row in part.rows.items():
            if row is None:
                rows.pop((p, key), None)
            else:
                rows[(p, key)] = row
    return batch
