"""A bulk operation's steps against a model of the workers: select, skip, send at the rate,
confirm, resume.  The real thing runs in tests/e2e/test_bulk.py."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from streams.client import DeliveryFailed, InvalidRequest
from streams.client.bulk import (
    BulkCommand,
    BulkKind,
    NotAnswered,
    Operation,
    Summary,
    new_operation_id,
)
from streams.client.where import Where
from streams.core.operations import by, carries

OP = "cancel-20261207T101500-3f9a1c"


class Clock:
    """Time that moves only when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.now += seconds


@dataclass
class World:
    """Waits as the console API shows them, and a worker that decides each command
    `delay` seconds after it was sent, in order, as rules/commands.py does: a command of
    an operation the trace already names is refused duplicate."""

    clock: Clock
    waits: dict[str, dict[str, Any]] = field(default_factory=dict)
    delay: float = 0.1
    deciding: bool = True
    queue: list[tuple[float, str, str, str | None]] = field(default_factory=list)
    rejected: list[tuple[str, str, str, str]] = field(default_factory=list)
    sent: list[tuple[str, str, str | None]] = field(default_factory=list)
    refuse: dict[str, str] = field(default_factory=dict)  # key -> reason
    fail_after: int | None = None  # Kafka stops taking commands after this many
    unanswered: bool = False

    def add(self, key: str, **fields: Any) -> None:
        self.waits[key] = {"key": key, "state": "parked", "definition": "d", "tenant": "acme",
                           "parkedAt": 1, "nextDueAt": 99, "definitionVersion": "v1",
                           "trace": [{"event": "requested", "detail": "definition d"}],
                           **fields}

    # -- Waits ---------------------------------------------------------------------
    def page(self, query: Mapping[str, str]) -> Mapping[str, Any]:
        self._decide()
        where = Where(definition=query.get("definition"), state=query.get("state"),
                      tenant=query.get("tenant"))
        keys = sorted(k for k, w in self.waits.items() if where.matches(w))
        after = query.get("after")
        keys = [k for k in keys if after is None or k > after]
        limit = int(query["limit"])
        page = keys[:limit]
        return {"waits": [self.waits[k] for k in page], "unavailable": [],
                "next": page[-1] if len(page) == limit else None}

    def status(self, key: str) -> Mapping[str, Any] | None:
        if self.unanswered:
            raise NotAnswered("no worker")
        self._decide()
        w = self.waits.get(key)
        return None if w is None else {**w, "trace": list(w["trace"])}

    # -- the SDK's client ------------------------------------------------------------
    def _send(self, key: str, kind: str, operation: str | None) -> None:
        if self.fail_after is not None and len(self.sent) >= self.fail_after:
            raise DeliveryFailed([(key, "broker gone")], 0)
        self.sent.append((key, kind, operation))
        self.queue.append((self.clock() + self.delay, key, kind, operation))

    def cancel(self, correlation_key: str, reason: str, *, operator: str | None = None,
               force: bool = False, operation: str | None = None) -> None:
        self._send(correlation_key, "cancel", operation)

    def suspend(self, correlation_key: str, reason: str, *, operator: str | None = None,
                force: bool = False, operation: str | None = None) -> None:
        self._send(correlation_key, "suspend", operation)

    def resume(self, correlation_key: str, *, reason: str | None = None,
               operator: str | None = None, force: bool = False,
               operation: str | None = None) -> None:
        self._send(correlation_key, "resume", operation)

    def migrate(self, correlation_key: str, *, version: str | None = None,
                reason: str | None = None, operator: str | None = None, force: bool = False,
                operation: str | None = None) -> None:
        self._send(correlation_key, "migrate", operation)

    def reschedule(self, correlation_key: str, *, deadline: str | None = None,
                   move_by: str | None = None, reason: str | None = None,
                   operator: str | None = None, force: bool = False,
                   operation: str | None = None) -> None:
        self._send(correlation_key, "reschedule", operation)

    # -- Rejections --------------------------------------------------------------
    def poll(self) -> list[tuple[str, str, str, str]]:
        self._decide()
        found, self.rejected = self.rejected, []
        return found

    # -- the worker ----------------------------------------------------------------
    def _decide(self) -> None:
        while self.deciding and self.queue and self.queue[0][0] <= self.clock():
            _, key, kind, operation = self.queue.pop(0)
            w = self.waits[key]
            details = [e["detail"] for e in w["trace"]]
            if operation and carries(details, operation):
                self.rejected.append((key, operation, "duplicate", "Expected ..., but ..."))
            elif key in self.refuse:
                self.rejected.append((key, operation or "", self.refuse[key], "Expected, but"))
            else:
                w["trace"].append({"event": kind, "detail": by("r", "ann", operation)})
                w["state"] = {"cancel": "done", "suspend": "suspended",
                              "resume": "parked"}.get(kind, w["state"])

    def marks(self, key: str, operation: str = OP) -> int:
        return sum(carries((e["detail"],), operation) for e in self.waits[key]["trace"])


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def world(clock: Clock) -> World:
    w = World(clock)
    for i in range(20):
        w.add(f"k{i:02d}")
    return w


def operation(world: World, clock: Clock, where: str = "definition=d",
              command: BulkCommand | None = None, *, rate: float = 10.0,
              confirm_timeout: float = 5.0, op: str = OP) -> Operation:
    return Operation(world, Where.parse(where), command or BulkCommand(
        BulkKind.CANCEL, reason="cleanup", operator="ann"), op, rate=rate,
        confirm_timeout=confirm_timeout, clock=clock, sleep=clock.sleep)


def run(world: World, clock: Clock, op: Operation, **kw: Any) -> Summary:
    return op.run(list(op.select()), world, world, **kw)


def test_every_selected_wait_is_commanded_once_and_confirmed_applied(
        world: World, clock: Clock) -> None:
    world.add("other", definition="e")
    summary = run(world, clock, operation(world, clock))
    assert [k for k, _, _ in world.sent] == [f"k{i:02d}" for i in range(20)]
    assert {op for _, _, op in world.sent} == {OP}
    assert (summary.selected, summary.applied, summary.complete) == (20, 20, True)
    assert all(world.marks(k) == 1 for k in world.waits if k != "other")
    assert world.waits["other"]["state"] == "parked"


def test_the_rate_bounds_how_many_waits_a_second_are_commanded(
        world: World, clock: Clock) -> None:
    times: list[float] = []
    original = world._send

    def timed(key: str, kind: str, operation: str | None) -> None:
        times.append(clock())
        original(key, kind, operation)

    world._send = timed  # type: ignore[method-assign]
    start = clock()
    run(world, clock, operation(world, clock, rate=4.0))
    assert len(times) == 20
    assert times[-1] - start >= 19 / 4.0
    for i in range(len(times) - 4):
        assert times[i + 4] - times[i] >= 1.0 - 1e-9, "more than 4 in a second"


def test_a_run_again_skips_what_the_operation_did_and_goes_on(
        world: World, clock: Clock) -> None:
    """The first run dies after 8 waits; the last command it sent is still in flight when
    the second run reads that wait, so the second sends it again: the worker refuses it
    (duplicate), and every wait ends with exactly one mark."""
    world.delay = 5.0  # the worker lags: commands stay in flight a while

    def die(done: int, total: int, summary: Summary) -> None:
        if done == 8:
            raise SystemExit("killed")

    first = operation(world, clock, "definition=d,state=all")
    with pytest.raises(SystemExit):
        first.run(list(first.select()), world, world, on_progress=die)
    assert len(world.sent) == 8
    # The first 7 are decided; the 8th is still in flight when the run again reads its
    # wait (at 0.7 s), and is decided just after (0.75 s), before the second command.
    in_flight = world.queue.pop()
    clock.now += 10
    world.poll()
    world.queue.append((clock.now + 0.75, *in_flight[1:]))
    world.delay = 0.1
    second = run(world, clock, operation(world, clock, "definition=d,state=all"))
    assert second.skipped == {"already done by this operation": 7}
    assert second.applied == 13 and second.complete
    assert sum(1 for k, _, _ in world.sent if k == "k07") == 2
    assert all(world.marks(k) == 1 for k in world.waits)


def test_a_refused_command_is_counted_with_the_worker_s_reason(
        world: World, clock: Clock) -> None:
    world.refuse["k03"] = "late"
    summary = run(world, clock, operation(world, clock))
    assert [(r.key, r.reason) for r in summary.refused] == [("k03", "late")]
    assert summary.applied == 19 and not summary.complete


def test_a_command_no_worker_decides_is_reported_unconfirmed(
        world: World, clock: Clock) -> None:
    world.deciding = False
    summary = run(world, clock, operation(world, clock, confirm_timeout=3.0, rate=100.0))
    assert len(summary.unconfirmed) == 20 and summary.applied == 0
    assert not summary.complete


def test_waits_that_changed_since_the_selection_are_skipped_not_commanded(
        world: World, clock: Clock) -> None:
    op = operation(world, clock, "definition=d,state=parked",
                   BulkCommand(BulkKind.SUSPEND, reason="audit", operator="ann"))
    keys = list(op.select())
    world.waits["k01"]["state"] = "in_review"
    world.waits["k02"]["state"] = "done"
    del world.waits["k03"]
    summary = op.run(keys, world, world)
    assert summary.skipped == {"no longer matching": 1, "ended": 1, "gone": 1}
    assert {k for k, _, _ in world.sent}.isdisjoint({"k01", "k02", "k03"})
    assert summary.applied == 17


@pytest.mark.parametrize(("command", "state", "why"), [
    (BulkCommand(BulkKind.SUSPEND, reason="audit"), "suspended", "already suspended"),
    (BulkCommand(BulkKind.RESUME), "parked", "not suspended"),
    (BulkCommand(BulkKind.MIGRATE, version="v1"), "parked", "already on version v1"),
])
def test_a_command_that_would_change_nothing_is_skipped(
        world: World, clock: Clock, command: BulkCommand, state: str, why: str) -> None:
    for w in world.waits.values():
        w["state"] = state
    summary = run(world, clock, operation(world, clock, "definition=d,state=all", command))
    assert summary.skipped == {why: 20} and world.sent == []


def test_kafka_failing_mid_run_stops_it_and_names_what_was_not_reached(
        world: World, clock: Clock) -> None:
    world.fail_after = 5
    summary = run(world, clock, operation(world, clock))
    assert summary.applied == 5
    assert summary.left == [f"k{i:02d}" for i in range(5, 20)]
    assert summary.stopped is not None and "broker gone" in summary.stopped


def test_an_incomplete_list_stops_the_operation_before_any_command(
        world: World, clock: Clock) -> None:
    def partial(query: Mapping[str, str]) -> Mapping[str, Any]:
        return {"waits": [], "unavailable": ["http://w2:6066"], "next": None}

    world.page = partial  # type: ignore[method-assign]
    with pytest.raises(NotAnswered, match="w2"):
        operation(world, clock).select()


def test_a_dry_run_counts_every_page_and_shows_a_sample(world: World, clock: Clock) -> None:
    import streams.client.bulk as bulk

    op = operation(world, clock)
    pages = []
    real = world.page

    def counted(query: Mapping[str, str]) -> Mapping[str, Any]:
        pages.append(dict(query))
        return real({**query, "limit": "7"})  # small pages: the cursor is followed

    world.page = counted  # type: ignore[method-assign]
    count, sample = op.preview(sample=3)
    assert (count, [w["key"] for w in sample]) == (20, ["k00", "k01", "k02"])
    assert len(pages) == 3 and pages[0]["limit"] == str(bulk.PAGE)
    assert world.sent == []


@pytest.mark.parametrize(("command", "says"), [
    (BulkCommand(BulkKind.CANCEL), "cancel needs a reason"),
    (BulkCommand(BulkKind.MIGRATE), "needs --to VERSION"),
    (BulkCommand(BulkKind.RESCHEDULE, deadline="PT1H", move_by="PT1H"), "exactly one"),
    (BulkCommand(BulkKind.RESCHEDULE, move_by="soon"), "reschedule: Expected"),
])
def test_a_command_no_wait_could_take_is_refused_before_selecting(
        world: World, clock: Clock, command: BulkCommand, says: str) -> None:
    with pytest.raises(InvalidRequest, match=says):
        operation(world, clock, command=command)


def test_operation_ids_say_what_and_when_and_are_valid() -> None:
    made = new_operation_id("cancel")
    assert made.startswith("cancel-2") and len(made) == len(OP)
    assert made != new_operation_id("cancel")
    with pytest.raises(InvalidRequest, match="operation"):
        Operation(World(Clock()), Where.parse("tenant=a"),
                  BulkCommand(BulkKind.RESUME), "no spaces please")
