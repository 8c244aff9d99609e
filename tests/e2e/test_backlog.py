"""A deep backlog is read once, through the fetch, every topic of every partition in turn.

A worker starting behind holds a topic that is ahead by the broker's clock
(here the replies, appended after every request) until the topics before it
are decided, and pauses its fetching once HELD_MAX records are held.
faust 0.15 dropped the records fetched for a partition paused while the
fetch waited: every pause left a gap of thousands of records that the worker
read again from the broker, with a warning (2,000-4,000 records in this
test, before `faust_glue.deliver_what_was_fetched`).  The inputs are now
fetched by the worker's own reader (`streams.processor.reader`), whose pause
drops nothing.

With several partitions the fetch serves one topic-partition after another
from one queue, in chunks, several megabytes ahead of the worker: with
HELD_MAX at 5,000 a topic a partition waited for did not come for seconds
while the queue delivered topics that were only held, and the worker read
it directly after STUCK_S (about 24,000 of the 42,000 records of a drain
of 20,000 waits, with the worker idle for seconds at a time).  Pausing a topic that holds a few
hundred lets the fetch serve the ones waited for.  Nothing is lost either
way; what a user notices is the time and the warnings.

Since the reader learns its topics before the takeover and refetches a
drained partition after 20 ms (not 1 s), the fetch brings a backlog this
size in within a fraction of a second, often before any partition is seen
waiting: so the replies here all go to one partition, more of them than
HELD_MAX, which pauses that partition whatever the timing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Producer

from streams.config import Settings
from streams.partitioning import partition_for
from streams.processor.tuning import TUNING
from tests.e2e.conftest import new_e2e
from tests.e2e.harness import Client, Watcher, WorkerProcess, new_key

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

PARTITIONS = 4
REQUESTS = 8000
REPLIES = 6000  # all on partition 0, behind its requests: more than HELD_MAX


@pytest.fixture(scope="module")
def e2e(kafka_bootstrap: str, e2e_folder: Path) -> Settings:
    return new_e2e(kafka_bootstrap, e2e_folder, "b", partitions=PARTITIONS)


def test_a_backlog_that_pauses_the_fetch_is_read_once_and_every_reply_wins(
    workers: Callable[..., WorkerProcess], client: Client, watcher: Watcher
) -> None:
    # Produced as a service catching up would: in one burst, in batches of
    # hundreds of kilobytes (more than one turn of the worker's fetch).
    client.producer = Producer(client.settings.confluent(
        partitioner="murmur2_random", **{"linger.ms": 500, "batch.size": 1_000_000}))
    replied = _keys_of_partition(0, REPLIES)
    keys = replied + [new_key() for _ in range(REQUESTS - REPLIES)]
    for key in keys:
        client.start(key, "slow-approval")
    client.flush()
    for key in replied:
        client.reply(key, {"decision": "approved"})
    client.flush()

    worker = workers("w1")
    deadline = time.monotonic() + 180
    counters: dict[str, int] = {}
    while time.monotonic() < deadline:
        counters = ((worker.stats() or {}).get("counters") or {})
        # The replies all sit on one partition: they can be done while the
        # other partitions' requests are still being read.
        if (counters.get("processed.replies", 0) >= REPLIES
                and counters.get("processed.requests", 0) >= REQUESTS):
            break
        time.sleep(0.5)
    assert counters.get("processed.requests") == REQUESTS, counters
    assert counters.get("processed.replies") == REPLIES, counters

    seen = watcher.until(lambda s: len(s.outcomes) >= REPLIES, 60, "an outcome per reply")
    assert sorted(o["correlationKey"] for o in seen.outcomes) == sorted(replied)
    assert {o["outcome"] for o in seen.outcomes} == {"RECEIVED"}
    # The scenario did pause the fetch (else it shows nothing) ...
    assert REPLIES > TUNING.held_max
    assert counters.get("inputs.paused", 0) >= 1, counters
    assert counters.get("inputs.resumed", 0) >= 1, counters
    # ... the records fetched before the pause were delivered, and no topic
    # waited for the fetch so long that the worker read it itself: none was
    # read a second time by a direct read.
    assert counters.get("inputs.gap_records", 0) == 0, counters
    assert counters.get("inputs.stall_records", 0) == 0, counters
    log = worker.log_path.read_text(errors="replace")
    assert "the fetch skipped them" not in log
    assert "the fetch did not deliver them" not in log
    # A tick that takes longer than the tick while the worker is busy is
    # normal (its durations are in /xwait/stats); it is no warning.
    assert "is overlapping" not in log, [ln for ln in log.splitlines() if "overlapping" in ln][:3]


def _keys_of_partition(partition: int, count: int) -> list[str]:
    keys: list[str] = []
    while len(keys) < count:
        key = new_key()
        if partition_for(key.encode(), PARTITIONS) == partition:
            keys.append(key)
    return keys
