"""The broker's clock decides the race, however far behind the worker is.

The worker is stopped while requests arrive, then replies - some before
their deadline, some after it - and it starts only once every deadline has
passed.  A reply appended before the deadline wins; one appended after it
loses and is rejected as late.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from streams.testing.load import first_appends
from tests.e2e.harness import Client, Watcher, WorkerProcess, new_key, until_time

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.rule2]

DEADLINE_S = 2.0  # the "race" definition


def test_replies_appended_before_their_deadline_win_after_a_long_outage(
    workers: Callable[..., WorkerProcess], client: Client, watcher: Watcher
) -> None:
    in_time = [new_key() for _ in range(20)]
    too_late = [new_key() for _ in range(20)]
    for key in in_time + too_late:
        client.start(key, "race")
    requested = time.time()  # the last requestedAt: every deadline is due by 2 s after it
    client.flush()
    for key in in_time:
        client.reply(key, {"ok": True})
    client.flush()  # appended well within the 2 s deadline
    until_time(requested + DEADLINE_S + 0.5)  # every deadline has passed
    for key in too_late:
        client.reply(key, {"ok": True})
    client.flush()  # every deadline is past when the worker starts

    workers("w1")
    seen = watcher.until(lambda s: all(s.for_key("outcomes", k) for k in in_time + too_late),
                         90, "an outcome for every wait")
    # The broker's clock judges, not the test's: on a loaded machine (load 60) one reply
    # of the 20 sent "in time" was appended after its deadline and rightly lost.
    appended = first_appends(client.settings, client.settings.topic("replies"))
    won = 0
    for key in in_time:
        [outcome] = seen.for_key("outcomes", key)
        due = outcome["parkedAt"] + int(DEADLINE_S * 1000)
        if appended[key] < due:
            assert outcome["outcome"] == "RECEIVED", (key, appended[key], due)
            won += 1
        elif appended[key] > due:
            assert (outcome["outcome"], outcome["reason"]) == (
                "ESCALATED", "deadline_exhausted"), (key, appended[key], due)
    assert won, "some replies were appended before their deadline (what the test is for)"
    for key in too_late:
        [outcome] = seen.for_key("outcomes", key)
        assert (outcome["outcome"], outcome["reason"]) == ("ESCALATED", "deadline_exhausted")
        # decided at the deadline, not when the worker got to it
        assert outcome["endedAt"] == outcome["parkedAt"] + int(DEADLINE_S * 1000)
    watcher.until(lambda s: all(any(r["reason"] == "late" for r in s.for_key("rejected", k))
                                for k in too_late), 30, "the late replies rejected")

