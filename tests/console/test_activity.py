"""The diagram's counts of the last hour: read from the stored rows with the list's own
filters, on the node each belongs to, in the tone of its exit.

A count and the list a click on it opens must agree: here both are computed
over the same rows, through the timer index and through a scan of the table,
for any mix of finished and live waits around the window's edges.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.console import static
from streams.console.activity import WINDOW_MS, Window, ended_counts, ended_key
from streams.console.diagram import exits, node_counts, tone
from streams.console.waits import REASONS, first_waits
from streams.core import (
    ArmedTimer,
    OutcomeKind,
    OutcomeReason,
    Slot,
    TimerKind,
    Wait,
    WaitStatus,
    encode_slot,
)
from streams.core.definition import DefinitionSet
from streams.processor.envelope import Row, encode_row
from streams.processor.model import RowHead
from tests.bpmn.conftest import shipped

DEFINITIONS = {d.name: d for d in shipped()}
NOW = 1_800_000_000_000
WINDOW = Window.ending(NOW + 123)
APPROVAL = DEFINITIONS["expense-approval"]
# Two versions of one definition that keep finished waits for different times.
OLD = replace(APPROVAL, version="old", retention_ms=2 * WINDOW_MS)
NEW = replace(APPROVAL, version="new", retention_ms=7 * 24 * WINDOW_MS)
VERSIONS = DefinitionSet({APPROVAL.name: NEW}, kept=[OLD])
ENDS = [(OutcomeKind.RECEIVED, OutcomeReason.REPLY_VALID),
        (OutcomeKind.RECEIVED, OutcomeReason.REVIEW_ACCEPTED),
        (OutcomeKind.ESCALATED, OutcomeReason.DEADLINE_EXHAUSTED),
        (OutcomeKind.ESCALATED, OutcomeReason.SEND_FAILED),
        (OutcomeKind.CANCELLED, OutcomeReason.CANCELLED_BY_OPERATOR)]


@dataclass
class Census:
    heads: list[tuple[int, RowHead]]

    def totals(self, partitions: Iterable[int]) -> Counter[tuple[str, str]]:
        raise NotImplementedError

    def by_version(self, partitions: Iterable[int]
                   ) -> Counter[tuple[str, tuple[str, str | None]]]:
        wanted = set(partitions)
        return Counter((h.state.value, (h.definition or "", h.version))
                       for p, h in self.heads if p in wanted and h.state is not None)


@dataclass
class Index:
    rows: list[tuple[int, bytes, bytes, RowHead]]
    ready: bool = True

    def armed_in_order(self, partitions: Iterable[int], start: int = 0
                       ) -> Iterator[tuple[int, str, int]] | None:
        if not self.ready:
            return None
        wanted = set(partitions)
        return iter(sorted((t.due_at, k.decode(), p) for p, k, _, h in self.rows
                           for t in h.timers if p in wanted and t.due_at >= start))


@dataclass
class Host:
    """The parts of a worker the counts read: its rows, census, timer index, versions."""

    rows: list[tuple[int, bytes, bytes, RowHead]]
    index_ready: bool = True
    owned: set[int] = field(default_factory=lambda: {0, 1, 2})
    definitions: Any = field(default_factory=lambda: VERSIONS)

    @property
    def census(self) -> Census:
        return Census([(p, h) for p, _, _, h in self.rows])

    @property
    def index(self) -> Index:
        return Index(self.rows, self.index_ready)

    def owned_partitions(self) -> set[int]:
        return set(self.owned)

    def owned_rows(self) -> Iterator[tuple[int, bytes, bytes]]:
        return iter([(p, k, v) for p, k, v, _ in self.rows if p in self.owned])

    def read_row(self, key: bytes, partition: int) -> bytes | None:
        return next((v for p, k, v, _ in self.rows if (p, k) == (partition, key)), None)


def finished(i: int, version: str, ended_at: int, end: int, live: bool = False,
             definition: str = APPROVAL.name) -> tuple[int, bytes, bytes, RowHead]:
    """The stored row of a wait that ended at `ended_at` (purge due after its version's
    retention), or of a live one with a deadline then (`live`)."""
    key = f"w-{i:03d}"
    d = VERSIONS.version(APPROVAL.name, version) or NEW
    kind, reason = ENDS[end]
    if live:
        timers = (ArmedTimer(TimerKind.DEADLINE, ended_at, 1),)
        wait = Wait(key=key, definition=definition, tenant=None, parked_at=0,
                    definition_version=version, timers=timers)
        head = RowHead(WaitStatus.PARKED, definition, None, timers, 0, version)
    else:
        timers = (ArmedTimer(TimerKind.RETENTION, ended_at + d.retention_ms, 1),)
        wait = Wait(key=key, definition=definition, tenant=None, parked_at=0,
                    status=WaitStatus.DONE, outcome=kind, reason=reason, ended_at=ended_at,
                    definition_version=version, timers=timers)
        head = RowHead(WaitStatus.DONE, definition, None, timers, 0, version)
    value = encode_row(Row(encode_slot(Slot(wait=wait)), head=head))
    return i % 3, key.encode(), value, head


def counted(host: Host) -> dict[str, int]:
    """The diagram's counts of the hour from this worker's rows."""
    worker: Any = host  # the parts of ConsoleHost the counts read
    ended = asyncio.run(ended_counts(worker, APPROVAL.name, WINDOW))
    assert ended.complete
    return ended.counts


def listed(host: Host, outcome: str, reason: str) -> int:
    """How many waits the console's list shows for a badge's query (one page, big)."""
    filters = WINDOW.filters(APPROVAL.name, outcome, reason)
    return len(asyncio.run(first_waits(host.owned_rows(), filters, 1000)))


# Ends around the window's two edges, and far from it.
around = st.sampled_from([WINDOW.since - 1, WINDOW.since, WINDOW.since + 1, NOW - 60_000,
                          WINDOW.until, WINDOW.until + 1, NOW - 2 * WINDOW_MS,
                          NOW - 3 * 24 * WINDOW_MS])
waits_ = st.lists(st.tuples(st.sampled_from(["old", "new"]), around,
                            st.integers(0, len(ENDS) - 1), st.booleans(),
                            st.sampled_from([APPROVAL.name, "vendor-quote"])), max_size=40)


@settings(max_examples=120, deadline=None)
@given(waits_)
def test_each_count_is_what_its_list_shows_through_the_index_or_a_scan(
        found: list[tuple[str, int, int, bool, str]]) -> None:
    rows = [finished(i, v, at, end, live, name)
            for i, (v, at, end, live, name) in enumerate(found)]
    by_index = counted(Host(rows))
    by_scan = counted(Host(rows, index_ready=False))
    assert by_index == by_scan
    for kind, reason in ENDS:
        assert by_index.get(ended_key(kind.value, reason.value), 0) == \
            listed(Host(rows), kind.value, reason.value)
    expected = Counter(ended_key(ENDS[end][0].value, ENDS[end][1].value)
                       for v, at, end, live, name in found
                       if not live and name == APPROVAL.name
                       and WINDOW.since <= at <= WINDOW.until)
    assert by_index == dict(expected)


def test_the_window_includes_both_edges() -> None:
    assert WINDOW.until == NOW + 123 and WINDOW.until - WINDOW.since == WINDOW_MS
    rows = [finished(0, "new", WINDOW.since, 0), finished(1, "old", WINDOW.until, 2),
            finished(2, "new", WINDOW.since - 1, 0), finished(3, "new", WINDOW.until + 1, 0)]
    assert counted(Host(rows)) == {
        "RECEIVED|reply_valid": 1, "ESCALATED|deadline_exhausted": 1}
    assert WINDOW.query("ESCALATED", "send_failed") == {
        "state": "done", "endedFrom": str(WINDOW.since), "endedTo": str(WINDOW.until),
        "outcome": "ESCALATED", "reason": "send_failed"}


def test_a_version_not_loaded_is_counted_by_a_scan() -> None:
    # Its retention is unknown, so the index cannot say where its purge is due.
    rows = [finished(0, "new", NOW - 1000, 0)]
    stranger = rows[0][3]
    rows.append((1, b"w-x", rows[0][2], replace(stranger, version="gone")))
    host = Host(rows, definitions=DefinitionSet({APPROVAL.name: NEW}))
    assert counted(host) == {"RECEIVED|reply_valid": 2}


def test_counts_land_on_the_end_events_in_the_tone_of_their_exit() -> None:
    nodes = node_counts(APPROVAL, {"parked": 4, "in_review": 1, "suspended": 2}, {
        "RECEIVED|reply_valid": 3, "ESCALATED|deadline_exhausted": 1,
        "ESCALATED|send_failed": 2, "CANCELLED|cancelled_by_operator": 1}, WINDOW)
    assert nodes["wait"][0] == {"label": "parked (all stages and levels)", "count": 4,
                                "tone": "now", "list": {"state": "parked"}}
    assert nodes["wait"][1]["list"] == {"state": "suspended"}
    assert nodes["review_reply"] == [{"label": "in review", "count": 1, "tone": "now",
                                      "list": {"state": "in_review"}}]
    assert nodes["end_received"] == [{"label": "reply_valid (1 h)", "count": 3,
                                      "tone": "received",
                                      "list": WINDOW.query("RECEIVED", "reply_valid")}]
    assert [(b["label"], b["tone"]) for b in nodes["end_escalated"]] == [
        ("deadline_exhausted (1 h)", "escalated"), ("send_failed (1 h)", "send_failed")]
    # Actions have no counts: the rows do not say when each went out.
    assert set(nodes) == {"wait", "review_reply", "end_received", "end_escalated"}
    assert not any("cancelled" in b["label"] for bs in nodes.values() for b in bs)
    legend = {b["label"]: (b["count"], b["tone"], b["list"]) for b in exits(
        {"ESCALATED|deadline_exhausted": 1, "ESCALATED|send_failed": 2,
         "CANCELLED|cancelled_by_operator": 1}, WINDOW)}
    assert legend == {
        "received (1 h)": (0, "received", WINDOW.query("RECEIVED")),
        "escalated (1 h)": (3, "escalated", WINDOW.query("ESCALATED")),
        "cancelled (1 h)": (1, "cancelled", WINDOW.query("CANCELLED")),
        "send failed (1 h)": (2, "send_failed", WINDOW.query("ESCALATED", "send_failed"))}


def test_an_exit_with_nothing_in_the_hour_still_says_what_it_counts() -> None:
    probe = node_counts(DEFINITIONS["probe"], {"parked": 1}, {}, WINDOW)
    assert probe["poll_timer"][0]["label"] == "parked"
    assert probe["end_received"] == [{"label": "received (1 h)", "count": 0,
                                      "tone": "received", "list": WINDOW.query("RECEIVED")}]
    chained = node_counts(DEFINITIONS["two-stage-approval"], {}, {}, WINDOW)
    assert chained["manager_wait"][0]["label"] == "parked (all stages and levels)"
    assert chained["end_escalated"][0]["tone"] == "escalated"
    assert [tone(o, r) for o, r in [("RECEIVED", "delivered"), ("ESCALATED", "send_failed"),
                                    ("ESCALATED", None), ("CANCELLED", None)]] == \
        ["received", "send_failed", "escalated", "cancelled"]


def test_past_its_budget_a_worker_says_its_counts_are_a_lower_bound() -> None:
    rows = [finished(i, "new", NOW - 1000 * i, 0) for i in range(5)]
    worker: Any = Host(rows)
    ended = asyncio.run(ended_counts(worker, APPROVAL.name, WINDOW, budget=3))
    assert ended.counts == {"RECEIVED|reply_valid": 3} and not ended.complete
    assert asyncio.run(ended_counts(worker, APPROVAL.name, WINDOW, budget=5)).complete


def test_the_pages_reason_filter_offers_every_reason_the_list_accepts() -> None:
    html = (Path(static.__file__).parent / "console.html").read_text()
    select = html[html.index('<select id="f-reason">'):]
    options = re.findall(r"<option>([a-z_]+)</option>", select[:select.index("</select>")])
    assert options == list(REASONS)
