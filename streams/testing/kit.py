"""The test kit: a real worker, the definitions under test, and a clock the test moves.

A test of code built on xwait (an adapter, the handling of reminders,
escalations and reviews) needs a worker to decide, and the definitions'
durations to pass: three days for a deadline.  The kit runs one `xwait
worker` process per test session against a real broker, on topics of its
own, with the definitions folder under test, and a test clock
(``XWAIT_CLOCK=file:PATH``, `streams.testing.clock`) instead of the wall
clock.  A test starts waits and replies through the SDK, then says
``kit.advance("P3D")``; the worker's stream time, its timers and the time of
its decisions follow the clock, and when ``advance`` returns, every reminder,
escalation and outcome due by then has been decided, stored, and can be read
(``kit.actions``, ``kit.outcome``).  The decisions are the production code's;
only the source of ``now`` differs.

How time reaches the worker.  The kit writes the clock file; the worker
reads it for its end-offset probes (its stream time) and for the time of each
decision.  The kit's input topics are stamped by producers (``CreateTime``),
whose records a worker decides at its own time, when it takes them: the time
of the test when the record was sent, since the kit moves the clock only
once the worker has decided everything sent before.  (On production topics,
stamped by the broker's wall clock, a worker refuses a test clock.)

The clock starts at Monday 2000-01-03 09:00 UTC, the same every run, and
only goes forward: one worker serves the whole session, so each test starts
where the previous one stopped (``kit.started_at``), and tests compare times
with ``kit.elapsed``.  A clock in the past keeps the times producers stamp
from their own clocks (a request's ``requestedAt``: the SDK's, a user's
code's) later than the test's now, so a wait parks at the test's now (a
wait's park time is the earlier of the two, docs/concepts/race.md).

What "settled" means (`Kit.settle`, run by every reader and around every
advance), read from the worker's ``/xwait/stats``: its stream time reached
the test's now in every partition (everything sent before now is released,
and every timer due by now is due by stream time); the input positions
stored with its state reached the end of every input partition (every record
sent is decided, and its outputs were acknowledged before the state was
stored); and no armed timer due by stream time is left unstored
(``timersDue``).  Then the kit reads the output topics to their end (their
high watermarks, not the last stable offsets: see `KitSession._ends`), and
the fake adapter answers the new actions of the test's waits at once, which
may settle again.  ``advance`` stops the clock at each due time of the
test's waits on the way, so that the adapter answers each action at the
time it went out, before the next timer, as the outside world would.

Each test sees its own waits: those whose keys its input records named
(a request, a reply, a command sent during the test, by the kit or by the
code under test), and their outputs from the test's start on.  An earlier
test's waits still run (their timers fire as the clock moves) but are not
shown.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import yaml
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from streams import codec
from streams.client import Action, ActionKind, Outcome, Rejected, XwaitClient, _console
from streams.config import PACKAGED_TOPOLOGY, Guarantee, Settings
from streams.core.durations import parse_duration_ms
from streams.errors import XwaitError
from streams.processor.sequencer import CLOCKED_ROLES
from streams.testing.clock import TIMESTAMP_TYPE, write_clock
from streams.testing.fake_adapter import DELIVERED, FakeAdapter, SendResult, action_kind, failed
from streams.testing.workers import WorkerProcess

log = logging.getLogger(__name__)

KIT_START_MS = 946_890_000_000
"""Where the session's clock starts: Monday 2000-01-03 09:00 UTC (the same every run; in the
past, so producers' own clocks never stamp a request earlier than the test's now)."""

TIMER_TICK_S = 0.05
"""The kit's worker probes its inputs this often (XWAIT_TIMER_TICK; production's is 0.1 s):
after the clock moves, stream time follows within a tick.  Shorter costs the broker a
request per input partition per tick for little: an advance takes about two ticks."""

SETTLE_TIMEOUT_S = 60.0
"""How long a settle may take before the kit gives up and shows the worker's log: on an
idle machine it takes tens of milliseconds; a busy shared one was seen 100 times slower."""

POLL_S = 0.01
"""Between two looks at the worker's stats while settling."""

WORKER_START_S = 180.0
"""How long the session's worker may take to own its partitions (a busy machine: ~30 s)."""

SENDS = frozenset({ActionKind.SEND_REQUEST, ActionKind.SEND_REMINDER,
                   ActionKind.RUN_ESCALATION})
"""The actions a channel adapter reports results for (rule 12)."""

_OUTPUT_TYPES: dict[str, type[Action | Outcome | Rejected]] = {
    "actions": Action, "outcomes": Outcome, "rejected": Rejected}
_INPUTS = tuple(role.value for role in CLOCKED_ROLES)
_R = TypeVar("_R", Action, Outcome, Rejected)


class KitError(XwaitError):
    """The kit could not do what a test asked (the worker did not settle, or exited)."""


# -- the session: topics, worker, clock, readers ------------------------------------------

def kit_topology(folder: Path, definitions: Path) -> Path:
    """A topology folder for the kit's worker: the packaged topics.yaml with input topics
    stamped by producers (CreateTime), and ``waits`` linked to the definitions under test."""
    if not definitions.is_dir():
        raise KitError(f"{definitions}: expected a folder of wait definitions (*.yaml)")
    folder.mkdir(parents=True, exist_ok=True)
    doc = yaml.safe_load((PACKAGED_TOPOLOGY / "topics.yaml").read_text())
    for role in _INPUTS:
        doc["topics"][role]["config"][TIMESTAMP_TYPE] = "CreateTime"
    (folder / "topics.yaml").write_text(
        "# Written by streams.testing.kit: the input topics are stamped by producers, so\n"
        "# that the kit's worker decides them by its test clock (XWAIT_CLOCK).\n"
        + yaml.safe_dump(doc, sort_keys=False))
    waits = folder / "waits"
    if waits.is_symlink() or waits.exists():
        waits.unlink()
    waits.symlink_to(definitions.resolve(), target_is_directory=True)
    return folder


@dataclass
class _Seen:
    """Every record of the kit's topics read so far, per topic role (each partition's in
    offset order)."""

    records: dict[str, list[tuple[int, int, bytes, bytes | None]]] = field(
        default_factory=dict)  # role -> [(partition, offset, key, value)]
    next_offset: dict[tuple[str, int], int] = field(default_factory=dict)


class KitSession:
    """One worker, its topics and its clock, for a whole test session (see the module
    docstring); each test gets a `Kit` from `new_test`."""

    def __init__(self, bootstrap: str, definitions: Path, folder: Path, *,
                 partitions: int = 1, guarantee: Guarantee = Guarantee.AT_LEAST_ONCE,
                 timer_tick: float = TIMER_TICK_S, start_ms: int = KIT_START_MS,
                 prefix: str | None = None) -> None:
        self.folder = folder
        self.now = start_ms
        self.clock_file = folder / "clock"
        write_clock(self.clock_file, start_ms)
        self.prefix = prefix or f"kit{uuid.uuid4().hex[:10]}"
        base = Settings(bootstrap=bootstrap, topic_prefix=self.prefix, partitions=partitions,
                        topology=kit_topology(folder / "topology", definitions),
                        data_dir=folder / "data", guarantee=guarantee, timer_tick=timer_tick,
                        batch_linger=0.0, commit_grace=0.0, clock=f"file:{self.clock_file}")
        self.worker = WorkerProcess(base, folder, "kit")
        # The SDK's key checks and the kit's status reads ask this worker.
        self.settings = replace(base, console_url=self.worker.url)
        self.client: XwaitClient | None = None
        self._consumer: Consumer | None = None
        self._admin: AdminClient | None = None
        self._seen = _Seen()
        self._codec = codec.for_settings(self.settings)
        self._tests = 0

    # -- life -----------------------------------------------------------------------------
    def start(self) -> KitSession:
        """Start the worker (it makes the topics) and the kit's readers."""
        started = time.monotonic()
        self.worker.start(wait_owned=True, timeout=WORKER_START_S)
        self.client = XwaitClient(self.settings)
        self._consumer = Consumer(self.settings.confluent(**{
            "group.id": f"{self.prefix}-kit", "enable.auto.commit": False,
            "enable.partition.eof": True, "isolation.level": "read_committed",
            "fetch.wait.max.ms": 10}))
        self._consumer.assign([TopicPartition(self.settings.topic(role), p, OFFSET_BEGINNING)
                               for role in (*_INPUTS, *_OUTPUT_TYPES)
                               for p in range(self.settings.partitions)])
        log.info("test kit ready in %.1f s: worker %s, topics %s.*, clock %s",
                 time.monotonic() - started, self.worker.url, self.prefix, _iso(self.now))
        return self

    def close(self) -> None:
        """Stop the worker and delete the kit's topics."""
        try:
            self.worker.stop()
        finally:
            if self._consumer is not None:
                self._consumer.close()
            if self.client is not None:
                self.client.close()
            self._delete_topics()

    def _delete_topics(self) -> None:
        admin = AdminClient(self.settings.confluent())
        try:
            names = [t for t in admin.list_topics(timeout=10).topics
                     if t.startswith((f"{self.prefix}.", f"{self.settings.app_id}-"))]
            for future in admin.delete_topics(names, operation_timeout=30).values():
                future.result(timeout=60)
        except Exception as exc:  # noqa: BLE001 - a test session's end must not fail on it
            log.warning("test kit: topics of %s not deleted: %s", self.prefix, exc)

    def new_test(self) -> Kit:
        """A `Kit` for one test: the clock goes on from where it is, the key space is new."""
        self._tests += 1
        self.settle()
        return Kit(self, self._tests)

    # -- time -------------------------------------------------------------------------------
    def set_clock(self, ms: int) -> None:
        if ms < self.now:
            raise KitError(f"the test clock only goes forward: {_iso(ms)} is before "
                           f"{_iso(self.now)}")
        if ms > time.time() * 1000:
            # Beyond the wall clock, producers' clocks (requestedAt) would be earlier
            # than the test's now, and waits would park in the test's past.
            raise KitError(f"the test clock would pass the wall clock ({_iso(ms)}): a "
                           f"session's clock starts at {_iso(KIT_START_MS)} and has until "
                           "now; split the session")
        write_clock(self.clock_file, ms)
        self.now = ms

    # -- settling ---------------------------------------------------------------------------
    def settle(self, respond: Callable[[], bool] | None = None,
               timeout: float = SETTLE_TIMEOUT_S) -> None:
        """Until the worker has decided and stored everything due by the test's now, and the
        kit has read its outputs (module docstring); `respond` (the fake adapter's turn)
        says whether it sent anything, which is then settled too."""
        deadline = time.monotonic() + timeout
        while True:
            # The inputs' ends before the worker's stats: everything sent so far is below
            # them.  The outputs' ends after: what the stats call stored was acknowledged
            # before, so it is below them.
            inputs = self._ends(_INPUTS)
            why = self._unsettled(inputs)
            if why is None:
                self._read_to({**inputs, **self._ends(tuple(_OUTPUT_TYPES))}, deadline)
                if respond is None or not respond():
                    return
                continue
            # Alike in shape with topics.wait_visible (duplicates lists the pair),
            # deliberately: two polls until a deadline, each with its own error.
            if time.monotonic() > deadline:
                raise KitError(f"the worker did not settle at {_iso(self.now)} within "
                               f"{timeout:g} s: {why}\n--- {self.worker.log_path} ---\n"
                               f"{self.worker.log_tail()}")
            time.sleep(POLL_S)

    def _unsettled(self, inputs: Mapping[tuple[str, int], int]) -> str | None:
        """Why the worker has not settled at the test's now; None once it has."""
        if not self.worker.running:
            raise KitError(f"the kit's worker exited:\n{self.worker.log_tail()}")
        stats = self.worker.stats()
        if stats is None:
            return "its /xwait/stats does not answer"
        owned = stats.get("ownedPartitions") or []
        if not stats.get("ready") or len(owned) < self.settings.partitions:
            return f"it owns partitions {owned} of {self.settings.partitions} (rebalancing)"
        times = stats.get("streamTime", {})
        behind = {p: times.get(str(p)) for p in owned if (times.get(str(p)) or 0) < self.now}
        if behind:
            return (f"stream time {', '.join(f'{p}: {_iso(t)}' for p, t in behind.items())} "
                    f"is before the test's now")
        durable = stats.get("durablePositions", {})
        roles = {self.settings.topic(role): role for role in _INPUTS}
        for (topic, p), end in inputs.items():
            stored = int(durable.get(str(p), {}).get(roles[topic], 0))
            if stored < end:
                return f"{topic}[{p}] is decided and stored up to offset {stored}, of {end}"
        if stats.get("timersDue"):
            return f"{stats['timersDue']} timers due by stream time are not stored yet"
        return None

    def _ends(self, roles: tuple[str, ...]) -> dict[tuple[str, int], int]:
        """The end offsets of the roles' topics (high watermarks), in one request.

        Not the last stable offsets: a transaction is committed before its markers
        are written (the coordinator writes them after answering the producer), so
        right after an exactly_once commit the last stable offset may still be below
        the outputs committed.  The kit's read_committed reader reads up to the high
        watermark, which it passes once those markers are written.
        """
        if self._admin is None:
            self._admin = AdminClient(self.settings.confluent())
        spec: Any = OffsetSpec  # its class methods are not typed
        asked = {TopicPartition(self.settings.topic(role), p): spec.latest()
                 for role in roles for p in range(self.settings.partitions)}
        futures = self._admin.list_offsets(asked, request_timeout=10)
        return {(tp.topic, tp.partition): int(f.result().offset) for tp, f in futures.items()}

    def _reader(self) -> Consumer:
        if self._consumer is None:
            raise KitError("the kit session is not started (KitSession.start)")
        return self._consumer

    def _read_to(self, ends: Mapping[tuple[str, int], int], deadline: float) -> None:
        """Read the kit's topics up to `ends`."""
        consumer, seen = self._reader(), self._seen
        roles = {self.settings.topic(role): role for role in (*_INPUTS, *_OUTPUT_TYPES)}
        while any(seen.next_offset.get(tp, 0) < end for tp, end in ends.items()):
            if time.monotonic() > deadline:
                raise KitError(f"the kit's topics were not read to their end: {dict(ends)} "
                               f"(read up to {seen.next_offset})")
            msg = consumer.poll(0.05)
            if msg is None:
                continue
            topic, p, offset = str(msg.topic()), int(msg.partition() or 0), int(msg.offset() or 0)
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:  # noqa: SLF001 - public constant
                    # The end, past transaction markers no message stands for.
                    tp = (topic, p)
                    seen.next_offset[tp] = max(seen.next_offset.get(tp, 0), offset)
                    continue
                raise KitError(f"reading {topic}[{p}]: {err.str()}")
            seen.records.setdefault(roles[topic], []).append(
                (p, offset, msg.key() or b"", msg.value()))
            tp = (topic, p)
            seen.next_offset[tp] = max(seen.next_offset.get(tp, 0), offset + 1)

    def records(self, role: str) -> list[tuple[int, int, bytes, bytes | None]]:
        return self._seen.records.get(role, [])

    def decode(self, kind: type[_R], value: bytes | None) -> _R:
        return kind.from_record(self._codec.decode(kind.record_type, value))

    def marks(self) -> dict[str, int]:
        """How many records of each topic the kit has read (a test starts after them)."""
        return {role: len(self.records(role)) for role in (*_INPUTS, *_OUTPUT_TYPES)}


# -- one test -----------------------------------------------------------------------------

class Kit:
    """What a test holds (the ``xwait_kit`` fixture): send, advance the clock, read.

    Everything sent is decided at the test's now (`now`); every reader and
    `advance` first waits until the worker has settled (module docstring).
    """

    def __init__(self, session: KitSession, number: int) -> None:
        self.session = session
        self.number = number
        if session.client is None:
            raise KitError("the kit session is not started (KitSession.start)")
        self.client: XwaitClient = session.client
        """The SDK's client on the kit's topics and worker: commands (``review``,
        ``cancel``, ``reschedule``...), results, anything the kit has no shortcut for."""
        self.settings: Settings = session.settings
        """The kit's settings: give them to your own code's `XwaitClient`."""
        self.adapter = FakeAdapter()
        self.started_at = session.now
        """The test's clock when it started (epoch ms)."""
        self._marks = session.marks()
        self._definitions: dict[str, str] = {}  # wait key -> definition, of waits started here
        self._answered = 0  # actions of this test the fake adapter has seen

    @property
    def now(self) -> int:
        """The test's clock (epoch ms): what the worker decides at."""
        return self.session.now

    def elapsed(self, at: int) -> timedelta:
        """How long after the test's start ``at`` (epoch ms: an action's ``at``) is."""
        return timedelta(milliseconds=at - self.started_at)

    def key(self, name: str) -> str:
        """A readable wait key of this test's own (``name`` plus the test's number)."""
        return f"{name}-{self.session.prefix}-{self.number}"

    # -- sending ----------------------------------------------------------------------------
    def start_wait(self, definition: str, **kwargs: Any) -> str:
        """Park a wait (`XwaitClient.start_wait`'s arguments); returns its key once the
        worker parked it and its first actions are readable."""
        key = self.client.start_wait(definition, **kwargs)
        self._definitions[key] = definition
        self.settle()
        return key

    def reply(self, key: str, response_data: Any, *, channel: str | None = None,
              **kwargs: Any) -> None:
        """Answer a wait (`XwaitClient.reply`) now; ``channel`` defaults to the first channel
        of the definition of a wait this kit started.  Returns once it is decided."""
        if channel is None:
            channel = self._channel_of(key)
        self.client.reply(key, response_data, channel=channel, **kwargs)
        self.settle()

    def _channel_of(self, key: str) -> str:
        name = self._definitions.get(key.partition("~")[0])
        definition = self.client.definitions.get(name) if name is not None else None
        if definition is None or not definition.channels:
            raise KitError(f"which channel does the reply to {key!r} come on? Give channel=")
        return definition.channels[0]

    # -- time -------------------------------------------------------------------------------
    def advance(self, duration: str | timedelta | int) -> None:
        """Move the clock forward (ISO 8601 such as ``"P3D"``, a timedelta, or ms) and wait
        until everything due by then is decided, stored and readable.

        The clock stops at each due time of the test's waits on the way (a reminder,
        a deadline, a send's retry), and the fake adapter answers what went out
        there, at that time, before the clock goes on: as the outside world would,
        between one timer and the next.
        """
        ms = _duration_ms(duration)
        self.settle()  # what was sent before is decided before the clock moves
        target = self.session.now + ms
        while (due := self._next_due(before=target)) is not None:
            self.session.set_clock(due)
            self.settle()
        self.session.set_clock(target)
        self.settle()

    def _next_due(self, before: int) -> int | None:
        """The earliest due time of the test's waits after now and before `before`."""
        due = []
        for key in self.keys():
            code, body = _console.get(self.session.worker.url, _console.wait_path(key))
            at = body.get("nextDueAt") if code == 200 and isinstance(body, dict) else None
            if isinstance(at, int) and self.now < at < before:
                due.append(at)
        return min(due, default=None)

    def advance_to(self, at: int) -> None:
        """Move the clock to ``at`` (epoch ms, e.g. ``kit.started_at + ...``)."""
        self.advance(at - self.now)

    def settle(self) -> None:
        """Wait until the worker decided and stored everything due by now, the outputs are
        read, and the fake adapter answered (readers and `advance` call it)."""
        self.session.settle(respond=self._respond)

    def _respond(self) -> bool:
        """The fake adapter's turn: each new action of the test's waits is received; a send it
        has a result for is reported at once.  Whether there was a new action: its handler
        (your code) may have sent something too, which is then settled as well."""
        actions = self._actions()
        new = actions[self._answered:]
        self._answered = len(actions)
        for action in new:
            self.adapter.received.append(action)
            result = self.adapter.result_for(action) if action.action in SENDS else None
            if result is None:
                continue
            if result.delivered:
                self.client.report_delivered(action.correlation_key, action.action_id,
                                             at=self.now)
            else:
                self.client.report_failed(action.correlation_key, action.action_id,
                                          result.error or "send failed",
                                          permanent=result.permanent, at=self.now)
        return bool(new)

    # -- reading ----------------------------------------------------------------------------
    def actions(self, key: str | None = None, kind: ActionKind | str | None = None
                ) -> list[Action]:
        """The actions of this test's waits (of ``key``; of ``kind``), in the order decided."""
        self.settle()
        wanted = action_kind(kind)
        return [a for a in self._actions(key) if wanted is None or a.action is wanted]

    def outcome(self, key: str) -> Outcome | None:
        """The wait's outcome, or None while it has not ended."""
        self.settle()
        found = self._outputs("outcomes", Outcome, key)
        return found[0] if found else None

    def outcomes(self) -> list[Outcome]:
        """The outcomes of this test's waits, in the order they ended."""
        self.settle()
        return self._outputs("outcomes", Outcome)

    def rejected(self, key: str | None = None) -> list[Rejected]:
        """What the worker refused of this test's input (of ``key``), with reasons."""
        self.settle()
        return self._outputs("rejected", Rejected, key)

    def status(self, key: str) -> dict[str, Any] | None:
        """The wait as the worker stores it (the console's status: state, trace, stage...);
        None for a key no wait has (or one purged after its retention)."""
        self.settle()
        code, body = _console.get(self.session.worker.url, _console.wait_path(key))
        if code == 404:
            return None
        if code != 200 or not isinstance(body, dict):
            raise KitError(f"the worker answered {code} for {key!r}: {body}")
        return body

    def keys(self) -> set[str]:
        """The wait keys this test's input named (its waits)."""
        return {k.decode(errors="replace") for role in _INPUTS
                for _, _, k, _ in self.session.records(role)[self._marks[role]:]}

    def _actions(self, key: str | None = None) -> list[Action]:
        return self._outputs("actions", Action, key)

    def _outputs(self, role: str, kind: type[_R], key: str | None = None) -> list[_R]:
        """This test's records of an output topic (of `key`'s wait), by the time they carry
        (each partition's in the order decided)."""
        keys = self.keys() if key is None else {key.partition("~")[0]}
        found = [self.session.decode(kind, value) for _, _, k, value in
                 self.session.records(role)[self._marks[role]:]
                 if k.decode(errors="replace") in keys]
        return sorted(found, key=_time_of)


def _time_of(record: Action | Outcome | Rejected) -> int:
    if isinstance(record, Action):
        return record.at
    if isinstance(record, Outcome):
        return record.ended_at
    return record.rejected_at


def _duration_ms(duration: str | timedelta | int) -> int:
    if isinstance(duration, timedelta):
        ms = round(duration.total_seconds() * 1000)
    elif isinstance(duration, str):
        ms = parse_duration_ms(duration)
    else:
        ms = int(duration)
    if ms <= 0:
        raise ValueError(f"the test clock only goes forward: {duration!r}")
    return ms


def _iso(ms: int | None) -> str:
    if ms is None:
        return "none"
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def kit_environment(settings: Settings) -> Mapping[str, str]:
    """The XWAIT_* variables that point code under test at the kit (its topics, its worker
    and its definitions): for code that builds its clients from the environment."""
    return {"XWAIT_BOOTSTRAP": settings.bootstrap, "XWAIT_TOPIC_PREFIX": settings.topic_prefix,
            "XWAIT_PARTITIONS": str(settings.partitions), "XWAIT_TOPOLOGY": str(settings.topology),
            "XWAIT_CONSOLE_URL": settings.console_url}


__all__ = ["DELIVERED", "KIT_START_MS", "FakeAdapter", "Kit", "KitError", "KitSession",
           "SendResult", "failed", "kit_environment", "kit_topology"]
