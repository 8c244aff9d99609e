"""Streams of input records and fired timers that take every path of the record path.

A seeded driver plays waits of every shipped definition (and the bench's):
requests (some with deadlines, parties, unknown definitions, keys no wait can
have), replies (valid, invalid, late, duplicated, from the wrong tenant or
party, early, not JSON, in Avro), commands of every kind with right and wrong
fields, results of the actions the waits sent (delivered, failed, for good),
and the timers each wait arms, fired when due - with the clock jumping from
seconds to days.  The driver reads what the reference (the Python path)
decided to write its next records, so the stream follows real waits; both
implementations are fed the same stream (`tests/processor/test_native_records.py`).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from streams import codec
from streams.codec import RecordType
from streams.definitions import load_definitions
from streams.partitioning import partition_for
from streams.processor.envelope import read_head
from streams.processor.model import Handled, InputRecord, Role, RowWrite
from streams.timers.firing import FiredTimer

REPO = Path(__file__).resolve().parents[2]
PARTITIONS = 4
T0 = 1_800_000_000_000
SECOND, MINUTE, HOUR, DAY = 1000, 60_000, 3_600_000, 86_400_000


def definitions() -> dict[str, object]:
    found: dict[str, object] = {}
    found.update(load_definitions(REPO / "topology" / "waits"))
    found.update(load_definitions(REPO / "bench" / "waits"))
    return found


DATA = [
    '{"decision": "approved", "by": "sam"}', '{"decision": "maybe"}', '{"approved": true}',
    '{"approved": "maybe"}', '{"price": 12.5}', '{"price": 9, "replyAcceptable": false}',
    '{"price": -1}', '{"resultReady": true, "result": {"n": 1}}', '{"resultReady": false}',
    '{"resultReady": "soon"}', '{"amount": 100, "currency": "EUR"}',
    '{"amount": 100, "currency": "euro"}', "not json", "", "{\"decision\": \"approved\", "
    "\"comment\": \"gr\\u00fc\\u00df \\\"q\\\" \\\\ \\n ok\"}",
    '{"decision": "rejected", "by": "Zoë"}',
    "[1, 2, 3]", '{"deep": ' * 30 + "1" + "}" * 30,
]
CHANNELS = ["portal", "email", "webhook", "sms", "operator", ""]
TENANTS = ["acme", "acme", "acme", "globex", None]
COMMANDS = ["SUSPEND", "RESUME", "CANCEL", "DELIVER", "REVIEW", "RESCHEDULE", "MIGRATE",
            "PAUSE"]
DURATIONS = ["PT5M", "PT1H", "P2D", "-PT30M", "-P10D", "P1M", "PT0S", "soon", ""]
# Bulk operations' ids: a few that repeat (a second command of one is refused), and
# malformed ones (refused as invalid).
OPERATIONS = ["op-1", "op-2", "cancel-20261207T101500-3f9a1c", "", "has space", "x" * 65,
              "a,b", "\u00e9t\u00e9"]


@dataclass
class Driver:
    seed: int
    handler: Callable[[InputRecord | FiredTimer, int], Handled]
    """Decides one item at a time with the reference, keeping its rows."""
    rng: random.Random = field(init=False)
    # The definitions' names, read once: loading them (YAML, schema checks) for each
    # request took 97% of the comparison's time.
    names: list[str] = field(init=False)
    now: int = T0
    keys: list[str] = field(default_factory=list)
    offsets: Counter[tuple[Role, int]] = field(default_factory=Counter)
    actions: dict[str, list[str]] = field(default_factory=dict)  # key -> action ids sent
    rows: dict[bytes, bytes] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)  # noqa: S311 - a reproducible stream
        self.names = sorted(definitions())

    def key(self) -> str:
        r = self.rng.random()
        if self.keys and r < 0.8:
            return self.rng.choice(self.keys)
        stem = self.rng.choice(["k", "kä", "k'q", 'k"d', "k\\b", "ké'\""])
        key = f"{stem}-{self.rng.getrandbits(40):x}"
        self.keys.append(key)
        return key

    def record(self, role: Role, key: str, value: bytes | None, *,
               misroute: bool = False) -> InputRecord:
        p = partition_for(key.encode(), PARTITIONS)
        if misroute:
            p = (p + 1) % PARTITIONS
        offset = self.offsets[(role, p)]
        self.offsets[(role, p)] += 1
        # Headers (streams.headers): a trace on many records, kept with the wait a request
        # parks; a receipt asked for now and then (decided by the Python path alone).
        traceparent = (f"00-{self.rng.getrandbits(128):032x}-{self.rng.getrandbits(64):016x}-01"
                       if self.rng.random() < 0.4 else None)
        receipt = f"rc-{offset}" if self.rng.random() < 0.05 else None
        return InputRecord(role, f"t.{role.value}", p, offset, key.encode(), value, self.now, True,
                           traceparent=traceparent, receipt=receipt)

    def encode(self, kind: RecordType, fields: dict[str, object]) -> bytes:
        if self.rng.random() < 0.25:
            return codec.encode(kind, fields)  # Avro single-object encoding
        return json.dumps(fields).encode()

    def request(self, key: str) -> InputRecord:
        names = self.names
        definition = self.rng.choice([*names, *names, "no-such-definition"])
        fields: dict[str, object] = {"correlationKey": key, "definition": definition,
                                     "requestedAt": self.now - self.rng.choice([0, 0, 5000, 10**9]),
                                     "tenant": self.rng.choice(TENANTS)}
        if self.rng.random() < 0.3:
            fields["payload"] = self.rng.choice(['{"amount": 42}', "x" * 70_000, "ünï"])
        if self.rng.random() < 0.15:
            fields["deadline"] = self.rng.choice(DURATIONS)
        if self.rng.random() < 0.15:
            fields["parties"] = self.rng.choice([["a", "b"], ["a", "a"], ["a~b"], [""]])
        return self.record(Role.REQUESTS, key, self.encode(RecordType.START_WAIT, fields))

    def reply(self, key: str) -> InputRecord:
        party = self.rng.choice([None, None, "carrier-a", "carrier-b", "nobody"])
        fields: dict[str, object] = {
            "correlationKey": key if party is None else f"{key}~{party}",
            "responseData": self.rng.choice(DATA), "tenant": self.rng.choice(TENANTS),
            "channel": self.rng.choice(CHANNELS)}
        if self.rng.random() < 0.5:
            fields["replyId"] = f"r-{self.rng.randrange(6)}"
        if self.rng.random() < 0.3:
            fields["sentAt"] = self.now
        return self.record(Role.REPLIES, key, self.encode(RecordType.REPLY, fields))

    def command(self, key: str) -> InputRecord:
        kind = self.rng.choice(COMMANDS)
        fields: dict[str, object] = {"correlationKey": key, "command": kind}
        for name, values in (("reason", ["late", None, ""]), ("operator", ["ann", None]),
                             ("reviewOutcome", ["Accept", "Submit Correction", "Nope", None]),
                             ("reviewNote", ["fine", None, ""]),
                             ("responseData", [*DATA[:4], None]),
                             ("deadline", [*DURATIONS, None, None]),
                             ("moveBy", [*DURATIONS, None, None]),
                             ("version", [None, None, "v0", "no-such-version"]),
                             ("operationId", OPERATIONS)):
            if self.rng.random() < 0.5:
                fields[name] = self.rng.choice(values)
        if kind == "PAUSE":  # not a command this build knows: refused by the Python path
            return self.record(Role.COMMANDS, key, json.dumps(fields).encode())
        return self.record(Role.COMMANDS, key, self.encode(RecordType.COMMAND, fields))

    def result(self, key: str) -> InputRecord | None:
        sent = self.actions.get(key)
        if not sent:
            return None
        fields: dict[str, object] = {
            "correlationKey": key, "actionId": self.rng.choice([*sent, "no-such-action"]),
            "status": self.rng.choice(["delivered", "failed", "failed"]),
            "permanent": self.rng.random() < 0.2}
        if self.rng.random() < 0.6:
            fields["error"] = self.rng.choice(["timeout", "410 gone", ""])
        return self.record(Role.REPLIES, key, self.encode(RecordType.ACTION_RESULT, fields))

    def hostile(self, key: str) -> InputRecord:
        choice = self.rng.randrange(6)
        if choice == 0:
            return self.record(Role.REPLIES, key, b"{not json", misroute=False)
        if choice == 1:
            return self.record(Role.REQUESTS, key, b"")
        if choice == 2:
            return self.record(Role.REPLIES, key, json.dumps(
                {"correlationKey": "someone-else", "responseData": "{}",
                 "channel": "portal"}).encode())
        if choice == 3:
            return self.record(Role.REPLIES, key, json.dumps(
                {"correlationKey": key, "responseData": "{}", "channel": "portal",
                 "extra": 1}).encode())
        if choice == 4:
            return self.record(Role.REQUESTS, key, json.dumps(
                {"correlationKey": key, "definition": "bench-long", "requestedAt": 1.5}
            ).encode())
        return self.record(Role.REPLIES, key, json.dumps(
            {"correlationKey": key, "responseData": "{}", "channel": "portal"}).encode(),
            misroute=True)

    def due_timer(self) -> FiredTimer | None:
        """A timer armed in some row, fired at (or after) its due time."""
        if not self.rows:
            return None
        key = self.rng.choice(sorted(self.rows))
        head = read_head(self.rows[key])
        if not head.timers:
            return None
        t = self.rng.choice(head.timers)
        if self.rng.random() < 0.1:  # a stale one: its arming moved on
            t = type(t)(t.kind, t.due_at, t.generation + 1)
        self.now = max(self.now, t.due_at + self.rng.choice([0, 1, 2000]))
        return FiredTimer(partition_for(key, PARTITIONS), key.decode(), t.kind, t.due_at,
                          t.generation)

    def learn(self, item: InputRecord | FiredTimer, handled: Handled) -> None:
        if handled.wait_key is not None:
            key = handled.wait_key.encode()
            if isinstance(handled.row, bytes):
                self.rows[key] = handled.row
            elif handled.row is RowWrite.DELETE:
                self.rows.pop(key, None)
        for out in handled.out:
            if out.role is Role.ACTIONS:
                action = codec.decode(RecordType.ACTION, out.value)
                self.actions.setdefault(out.key.decode(), []).append(str(action["actionId"]))

    def items(self, count: int) -> Iterator[InputRecord | FiredTimer]:
        for _ in range(count):
            self.now += self.rng.choice([1, 10, SECOND, MINUTE, HOUR, 6 * HOUR, 2 * DAY])
            r = self.rng.random()
            key = self.key()
            item: InputRecord | FiredTimer | None
            if r < 0.22:
                item = self.request(key)
            elif r < 0.45:
                item = self.reply(key)
            elif r < 0.58:
                item = self.command(key)
            elif r < 0.68:
                item = self.result(key)
            elif r < 0.93:
                item = self.due_timer()
            else:
                item = self.hostile(key)
            if item is None:
                continue
            self.learn(item, self.handler(item, self.now))
            yield item
