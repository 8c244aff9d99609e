"""The flood's records: every kind of hostile record the processor refuses, and how each
must end (`Fate`), built from one seeded random source (no clock, no I/O).

`plan_flood` gives the records in the order they are produced: every kind
once first, then kinds drawn by weight, a valid reply to a parked wait after
every `reply_every` hostile records, a share through compressing producers.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from streams import codec
from streams.codec import RecordType
from streams.core.state import MAX_HELD_REPLIES
from streams.partitioning import partition_for

# The valid waits: a shipped single-channel definition whose reminder (a day)
# and deadline (three days) never fall due during a run.
DEFINITION = "expense-approval"
CHANNEL = "portal"
VALID_DATA = '{"decision": "approved", "by": "flood-bench"}'
INPUTS = ("requests", "replies", "commands", "timers")
RECORD_TYPES = {"requests": RecordType.START_WAIT, "replies": RecordType.REPLY,
                "commands": RecordType.COMMAND, "timers": RecordType.TIMER}
COMPRESSIONS = ("gzip", "lz4", "zstd", "snappy")
# A StartWait payload this large makes the wait's row and its SEND_REQUEST
# action larger than the processor's 900,000-byte limit (`too_large`), while
# the record itself stays under the broker's default 1 MB message limit.
OVERSIZE_PAYLOAD = 950_000
# Replies in one burst to one key no wait has: MAX_HELD_REPLIES are held, the
# one repeating the first reply id is a `duplicate`, the rest `overflow`.
BURST = MAX_HELD_REPLIES + 4
DAY_MS = 86_400_000
# Odd text from tests/processor/test_records.py's hostile strategy: lone
# surrogates (JSON escapes them), overflowing durations, NUL, long digits.
HOSTILE_TEXT = ("\ud800", "a\udfffb", "\ud83d", "P99999999999D", "P36501D", "PT-1S",
                "R99999999999/PT1S", "", "\x00", "P1Y", "9" * 400, '{"decision": "\ud800"}')
# The fields of each JSON input without a default: leaving one out is refused.
REQUIRED = {"requests": ("correlationKey", "definition", "requestedAt"),
            "replies": ("correlationKey", "channel", "responseData"),
            "commands": ("correlationKey", "command")}
# Deadline overrides every one of which the processor must refuse (parse errors).
BAD_DEADLINES = ("P1Y", "P1M", "PT-1S", "banana", "", "PT", "PT0S", "P99999999999D",
                 "P36501D", "R2/PT1H")


class Fate(StrEnum):
    """What the worker must do with a record, and how the run accounts for it."""

    REJECTED = "rejected"
    """A Rejected record at the record's coordinates, when it is decided."""
    HELD = "held"
    """Held for the early-reply TTL (no wait has its key), then Rejected `unmatched`."""
    IGNORED = "ignored"
    """No record: counted by the worker's ignore counter for its kind (IGNORE_COUNTER)."""
    REJECTED_OR_IGNORED = "rejected_or_ignored"
    """Ignored (counted) while its wait is parked; Rejected `late` once it is done."""
    FORWARDED = "forwarded"
    """Misrouted: forwarded to its key's partition, Rejected there (found by its key)."""
    VALID = "valid"
    """A valid reply to a parked wait: it ends the wait RECEIVED."""


@dataclass(frozen=True)
class Kind:
    """One kind of hostile record: the fate of its records and the reasons it may get."""

    fate: Fate
    reasons: frozenset[str]
    doc: str
    weight: float = 1.0
    # False for kinds whose records must keep their order on one producer
    # (bursts, repeats), or whose size is the point (oversize).
    compressible: bool = True


def _kind(fate: Fate, reasons: str, doc: str, weight: float = 1.0,
          compressible: bool = True) -> Kind:
    return Kind(fate, frozenset(reasons.split()), doc, weight, compressible)


R, H, IG, RI, F = Fate.REJECTED, Fate.HELD, Fate.IGNORED, Fate.REJECTED_OR_IGNORED, Fate.FORWARDED
KINDS: dict[str, Kind] = {
    # -- bytes that are not a record (any input topic) --------------------------------
    "random_bytes": _kind(R, "undecodable", "1-200 random bytes"),
    "empty_value": _kind(R, "undecodable", "an empty value or a tombstone"),
    "avro_truncated": _kind(R, "undecodable", "single-object Avro, body cut short"),
    "avro_header_cut": _kind(R, "undecodable", "C3 01 and less than the 10-byte header"),
    "avro_trailing": _kind(R, "undecodable", "single-object Avro with bytes after the record"),
    "avro_unknown_fingerprint": _kind(R, "undecodable", "C3 01 and a fingerprint nobody knows"),
    "avro_wrong_type": _kind(R, "undecodable", "a valid record of another input's type"),
    "avro_bad_union": _kind(R, "undecodable", "a Reply whose tenant union index is 7"),
    "confluent_frame": _kind(R, "undecodable", "Confluent framing (00 + schema id), no registry"),
    "confluent_cut": _kind(R, "undecodable", "00 and less than the 5-byte Confluent header"),
    "invalid_json": _kind(R, "undecodable", "starts like JSON, is not a JSON object"),
    "json_not_utf8": _kind(R, "undecodable", "JSON with bytes that are not UTF-8"),
    "json_schema_mismatch": _kind(R, "undecodable", "JSON with missing, mistyped or extra fields"),
    "timer_json": _kind(R, "undecodable", "a Timer as JSON (only Avro is accepted)"),
    "timer_unknown_kind": _kind(R, "undecodable", "an Avro Timer of a kind nobody knows"),
    # -- keys ------------------------------------------------------------------------------
    "no_key": _kind(R, "no_key", "a reply or request with no key, or an empty one"),
    "invalid_key_nul": _kind(R, "invalid_key", "a key with a NUL character"),
    "key_not_utf8": _kind(R, "undecodable", "a key that is not UTF-8"),
    "key_mismatch": _kind(R, "key_mismatch", "a record key other than its correlation key's"),
    # -- requests ----------------------------------------------------------------------------
    "unknown_definition": _kind(R, "unknown_definition", "a request naming no definition"),
    "invalid_deadline": _kind(R, "invalid_request undecodable", "a deadline override that is "
                              "no duration, odd text in tenant and payload"),
    "invalid_parties": _kind(R, "invalid_request", "repeated, empty or '~' parties, or '~' key"),
    "duplicate_request": _kind(R, "duplicate", "a second request for a parked wait's key"),
    "oversize_request": _kind(R, "too_large", "a request whose wait would not fit in Kafka",
                              weight=0.017, compressible=False),
    # -- replies -----------------------------------------------------------------------------
    "unmatched_reply": _kind(H, "unmatched", "a reply for a key no wait has"),
    "hostile_text_reply": _kind(H, "unmatched undecodable", "such a reply with odd text in "
                                "every field (refused at once with a lone surrogate)"),
    "reply_wrong_party": _kind(R, "unmatched", "a reply naming a party a parked wait lacks"),
    "reply_tenant_mismatch": _kind(R, "tenant_mismatch", "a reply to a parked wait, wrong tenant"),
    "reply_repeat": _kind(R, "duplicate", "a valid reply sent again (same reply id)",
                          compressible=False),
    "overflow_burst": _kind(H, "unmatched duplicate overflow",
                            f"{BURST} replies to one key no wait has", weight=0.05,
                            compressible=False),
    # -- commands ----------------------------------------------------------------------------
    "unmatched_command": _kind(H, "unmatched", "a command for a key no wait has"),
    "command_not_applicable": _kind(R, "invalid_command deadline_passed late undecodable",
                                    "REVIEW, DELIVER without data, bad RESCHEDULE, unknown "
                                    "command, to a parked wait"),
    "command_resume_parked": _kind(RI, "late", "RESUME of a wait that is not suspended"),
    # -- timers ------------------------------------------------------------------------------
    "timer_forged_future": _kind(IG, "", "a forged Timer due later (some exactly the wait's "
                                         "deadline or reminder): must be ignored, not obeyed"),
    "timer_forged_stale": _kind(IG, "", "a forged Timer due in the past that no wait armed"),
    # -- partitions --------------------------------------------------------------------------
    "misrouted": _kind(F, "undecodable", "random bytes on a partition its key does not hash to"),
}
# The worker's counter that says a record of this kind was ignored (Fate IGNORED,
# REJECTED_OR_IGNORED); each counter is bumped by no other kind of the flood.
IGNORE_COUNTER = {
    "timer_forged_future": "timers.not_yet_due",
    "timer_forged_stale": "discarded.stale_timer",
    "command_resume_parked": "discarded.not_suspended",
}


@dataclass(frozen=True)
class ParkedWait:
    key: str
    requested_at: int  # ms; also its parkedAt (the request is appended after it was made)


@dataclass(frozen=True)
class Planned:
    """One record of the flood, as it is produced."""

    kind: str  # a KINDS name, or "valid_reply"
    fate: Fate
    role: str  # one of INPUTS
    key: bytes | None
    value: bytes | None
    partition: int
    compression: str = "none"
    wait_key: str | None = None  # the parked wait it is about, if any


@dataclass(frozen=True)
class ExactTimer:
    """A timer every parked wait arms at park: forged records copy it exactly."""

    kind: str
    generation: int
    after_ms: int  # due this long after the wait's requestedAt


def parked_waits(seed: int, n: int, requested_at: int) -> list[ParkedWait]:
    """Wait i of the run with this seed (the keys are the same every time)."""
    return [ParkedWait(hashlib.blake2b(f"{seed}:park:{i}".encode(), digest_size=16).hexdigest(),
                       requested_at) for i in range(n)]


def start_request(wait: ParkedWait) -> bytes:
    return codec.encode(RecordType.START_WAIT, {
        "correlationKey": wait.key, "definition": DEFINITION, "requestedAt": wait.requested_at,
        "payload": '{"expense": 42, "amount": 120}'})


def valid_reply(key: str, now_ms: int) -> bytes:
    return codec.encode(RecordType.REPLY, {
        "correlationKey": key, "channel": CHANNEL, "responseData": VALID_DATA,
        "replyId": f"{key}-ok", "sentAt": now_ms})


def _surrogate(text: str) -> bool:
    return any("\ud800" <= c <= "\udfff" for c in text)


def _json(obj: Mapping[str, Any]) -> bytes:
    return json.dumps(obj).encode()  # lone surrogates become \\udXXX escapes: valid JSON


class _Mixer:
    """Builds the records of each kind from one seeded random source (no clock, no I/O)."""

    def __init__(self, rng: random.Random, waits: Sequence[ParkedWait], partitions: int,
                 now_ms: int, exact: Sequence[ExactTimer]) -> None:
        self.rng = rng
        self.waits = waits
        self.partitions = partitions
        self.now_ms = now_ms
        self.exact = exact
        self.replied: list[Planned] = []  # valid replies planned so far (for repeats)

    # -- helpers ---------------------------------------------------------------------------
    def fresh(self) -> str:
        """A key no wait has (128 random bits, as the SDK makes them)."""
        return f"{self.rng.getrandbits(128):032x}"

    def parked(self) -> ParkedWait:
        return self.rng.choice(self.waits)

    def role(self, *among: str) -> str:
        return self.rng.choice(among or INPUTS)

    def text(self) -> str:
        return self.rng.choice(HOSTILE_TEXT)

    def rec(self, kind: str, role: str, key: bytes | None, value: bytes | None,
            fate: Fate | None = None, wait_key: str | None = None,
            partition: int | None = None) -> Planned:
        if partition is None:
            partition = (partition_for(key, self.partitions) if key
                         else self.rng.randrange(self.partitions))
        return Planned(kind, fate or KINDS[kind].fate, role, key, value, partition,
                       wait_key=wait_key)

    def fields(self, role: str, key: str) -> dict[str, Any]:
        """The fields of a well-formed record of `role`'s type for `key`."""
        if role == "requests":
            return {"correlationKey": key, "definition": DEFINITION, "requestedAt": self.now_ms}
        if role == "replies":
            return {"correlationKey": key, "channel": CHANNEL, "responseData": VALID_DATA}
        if role == "commands":
            return {"correlationKey": key, "command": "CANCEL", "operator": "mallory"}
        return {"correlationKey": key, "kind": "deadline", "dueAt": self.now_ms,
                "generation": 1, "firedAt": self.now_ms}

    def valid_record(self, role: str, key: str) -> bytes:
        """Avro of a well-formed record of `role`'s type (the base of the corrupt frames)."""
        return codec.encode(RECORD_TYPES[role], self.fields(role, key))

    def reply_json(self, key: str, **extra: Any) -> bytes:
        return _json({"correlationKey": key, "channel": CHANNEL, "responseData": VALID_DATA,
                      **extra})

    def frame(self, kind: str, make: Callable[[bytes], bytes]) -> list[Planned]:
        """A record of a random input type for a fresh key, its Avro bytes made hostile."""
        role, key = self.role(), self.fresh()
        return [self.rec(kind, role, key.encode(), make(self.valid_record(role, key)))]

    # -- the kinds ---------------------------------------------------------------------------
    def random_bytes(self) -> list[Planned]:
        return [self.rec("random_bytes", self.role(), self.fresh().encode(),
                         self.rng.randbytes(self.rng.randint(1, 200)))]

    def empty_value(self) -> list[Planned]:
        return [self.rec("empty_value", self.role(), self.fresh().encode(),
                         self.rng.choice((b"", None)))]

    def avro_truncated(self) -> list[Planned]:
        return self.frame("avro_truncated", lambda v: v[:self.rng.randint(10, len(v) - 1)])

    def avro_header_cut(self) -> list[Planned]:
        return self.frame("avro_header_cut", lambda v: v[:self.rng.randint(2, 9)])

    def avro_trailing(self) -> list[Planned]:
        return self.frame("avro_trailing", lambda v: v + self.rng.randbytes(
            self.rng.randint(1, 8)))

    def avro_unknown_fingerprint(self) -> list[Planned]:
        return self.frame("avro_unknown_fingerprint",
                          lambda v: v[:2] + self.rng.randbytes(8) + v[10:])

    def avro_wrong_type(self) -> list[Planned]:
        role, key = self.role(), self.fresh()
        other = self.rng.choice([r for r in INPUTS if r != role])
        return [self.rec("avro_wrong_type", role, key.encode(), self.valid_record(other, key))]

    def avro_bad_union(self) -> list[Planned]:
        key = self.fresh().encode()
        header = codec.default_codec().header(RecordType.REPLY)
        body = bytes([len(key) * 2]) + key + b"\x0e"  # zig-zag length, key, union index 7
        return [self.rec("avro_bad_union", "replies", key, header + body)]

    def confluent_frame(self) -> list[Planned]:
        return [self.rec("confluent_frame", self.role(), self.fresh().encode(),
                         b"\x00" + self.rng.randbytes(4) + self.rng.randbytes(
                             self.rng.randint(0, 60)))]

    def confluent_cut(self) -> list[Planned]:
        return [self.rec("confluent_cut", self.role(), self.fresh().encode(),
                         b"\x00" + self.rng.randbytes(self.rng.randint(0, 3)))]

    def invalid_json(self) -> list[Planned]:
        key = self.fresh()
        value = self.rng.choice((
            f'{{"correlationKey": "{key}", '.encode(),
            b'{"correlationKey": }',
            f'{{"correlationKey": "{key}"}} and more'.encode(),
            b"  {{}",
            b"{" + bytes(self.rng.randint(0x20, 0x7e) for _ in range(self.rng.randint(1, 40))),
        ))
        return [self.rec("invalid_json", self.role("requests", "replies", "commands"),
                         key.encode(), value)]

    def json_not_utf8(self) -> list[Planned]:
        key = self.fresh()
        value = f'{{"correlationKey": "{key}", "channel": "'.encode() + b'\xff\xfe\xc3"}'
        return [self.rec("json_not_utf8", self.role("requests", "replies", "commands"),
                         key.encode(), value)]

    def json_schema_mismatch(self) -> list[Planned]:
        role, key = self.role("requests", "replies", "commands"), self.fresh()
        whole = self.fields(role, key)
        name = self.rng.choice(sorted(REQUIRED[role]))
        how = self.rng.randrange(3)
        if how == 0:  # a required field missing
            fields = {k: v for k, v in whole.items() if k != name}
        elif how == 1:  # a field of the wrong type (every one of these, for every field)
            fields = {**whole, name: self.rng.choice((1.5, True, [], {"a": 1}, None))}
        else:  # a field the schema does not have
            fields = {**whole, "admin": True}
        return [self.rec("json_schema_mismatch", role, key.encode(), _json(fields))]

    def timer_json(self) -> list[Planned]:
        w = self.parked()
        return [self.rec("timer_json", "timers", w.key.encode(), _json({
            "correlationKey": w.key, "kind": "deadline", "dueAt": self.now_ms - DAY_MS,
            "generation": 1, "firedAt": self.now_ms}), wait_key=w.key)]

    def timer_unknown_kind(self) -> list[Planned]:
        w = self.parked()
        return [self.rec("timer_unknown_kind", "timers", w.key.encode(), codec.encode(
            RecordType.TIMER, {"correlationKey": w.key, "kind": self.rng.choice(
                ("explode", "", "DEADLINE", "deadline ")), "dueAt": self.now_ms - DAY_MS,
                "generation": 1, "firedAt": self.now_ms}), wait_key=w.key)]

    def no_key(self) -> list[Planned]:
        w = self.parked()
        role = self.role("requests", "replies")
        value = (self.reply_json(w.key) if role == "replies" else _json(
            {"correlationKey": w.key, "definition": DEFINITION, "requestedAt": self.now_ms}))
        return [self.rec("no_key", role, self.rng.choice((None, b"")), value, wait_key=w.key)]

    def invalid_key_nul(self) -> list[Planned]:
        key = self.fresh() + "\x00" + self.fresh()[:4]
        return [self.rec("invalid_key_nul", "replies", key.encode(), self.reply_json(key))]

    def key_not_utf8(self) -> list[Planned]:
        key = b"\xff\xfe" + bytes(self.rng.randint(1, 255) for _ in range(14))  # no NUL
        return [self.rec("key_not_utf8", "replies", key, self.reply_json(self.fresh()))]

    def key_mismatch(self) -> list[Planned]:
        w, role = self.parked(), self.role()
        claimed = self.rng.choice((w.key, f"{w.key}~carrier-a"))
        record_key = self.rng.choice((self.fresh(), self.parked().key))
        if record_key == w.key:  # the claimed key's own wait: that would be no mismatch
            record_key = self.fresh()
        value = {
            "requests": lambda: _json({"correlationKey": claimed, "definition": DEFINITION,
                                       "requestedAt": self.now_ms}),
            "replies": lambda: self.reply_json(claimed),
            "commands": lambda: _json({"correlationKey": claimed, "command": "CANCEL",
                                       "operator": "mallory", "reason": "key mismatch"}),
            "timers": lambda: codec.encode(RecordType.TIMER, {
                "correlationKey": claimed, "kind": "deadline", "dueAt": self.now_ms - DAY_MS,
                "generation": 1, "firedAt": self.now_ms}),
        }[role]()
        return [self.rec("key_mismatch", role, record_key.encode(), value, wait_key=w.key)]

    def unknown_definition(self) -> list[Planned]:
        key = self.fresh()
        return [self.rec("unknown_definition", "requests", key.encode(), _json({
            "correlationKey": key, "definition": f"no-such-{self.rng.randrange(10**6)}",
            "requestedAt": self.now_ms}))]

    def invalid_deadline(self) -> list[Planned]:
        key = self.fresh()
        return [self.rec("invalid_deadline", "requests", key.encode(), _json({
            "correlationKey": key, "definition": DEFINITION, "requestedAt": self.now_ms,
            "deadline": self.rng.choice(BAD_DEADLINES), "tenant": self.text(),
            "payload": self.text()}))]

    def invalid_parties(self) -> list[Planned]:
        key = self.fresh()
        claimed, parties = self.rng.choice((
            (key, ["carrier-a", "carrier-a"]), (key, ["carrier-a", ""]), (key, ["x~y"]),
            (f"{key}~carrier-a", ["carrier-a"])))
        return [self.rec("invalid_parties", "requests", key.encode(), _json({
            "correlationKey": claimed, "definition": "first-valid", "requestedAt": self.now_ms,
            "parties": parties}))]

    def duplicate_request(self) -> list[Planned]:
        w = self.parked()
        value = self.rng.choice((start_request(w), _json({
            "correlationKey": w.key, "definition": "vendor-quote", "requestedAt": self.now_ms})))
        return [self.rec("duplicate_request", "requests", w.key.encode(), value,
                         wait_key=w.key)]

    def oversize_request(self) -> list[Planned]:
        key = self.fresh()
        return [self.rec("oversize_request", "requests", key.encode(), _json({
            "correlationKey": key, "definition": DEFINITION, "requestedAt": self.now_ms,
            "payload": "x" * OVERSIZE_PAYLOAD}))]

    def unmatched_reply(self) -> list[Planned]:
        key = self.fresh()
        return [self.rec("unmatched_reply", "replies", key.encode(),
                         self.reply_json(key, replyId=self.fresh()))]

    def hostile_text_reply(self) -> list[Planned]:
        key = self.fresh()
        fields = {"channel": self.text(), "responseData": self.text(), "replyId": self.text(),
                  "tenant": self.text()}
        # A lone surrogate is no Unicode text: the reply is refused as it is read.
        fate = Fate.REJECTED if any(map(_surrogate, fields.values())) else Fate.HELD
        return [self.rec("hostile_text_reply", "replies", key.encode(), _json({
            "correlationKey": key, **fields}), fate=fate)]

    def reply_wrong_party(self) -> list[Planned]:
        w = self.parked()
        return [self.rec("reply_wrong_party", "replies", w.key.encode(),
                         self.reply_json(f"{w.key}~eve"), wait_key=w.key)]

    def reply_tenant_mismatch(self) -> list[Planned]:
        w = self.parked()
        return [self.rec("reply_tenant_mismatch", "replies", w.key.encode(),
                         self.reply_json(w.key, tenant="mallory"), wait_key=w.key)]

    def reply_repeat(self) -> list[Planned]:
        if not self.replied:  # nothing to repeat yet: another reply its wait refuses
            return self.reply_tenant_mismatch()
        original = self.rng.choice(self.replied)
        return [Planned("reply_repeat", Fate.REJECTED, "replies", original.key, original.value,
                        original.partition, wait_key=original.wait_key)]

    def overflow_burst(self) -> list[Planned]:
        key = self.fresh()
        out = []
        for i in range(BURST):
            if i < MAX_HELD_REPLIES:
                reply_id, fate = f"r{i}", Fate.HELD
            else:  # the first repeats a held reply's id (duplicate), the rest overflow
                reply_id = "r0" if i == MAX_HELD_REPLIES else f"r{i}"
                fate = Fate.REJECTED
            out.append(self.rec("overflow_burst", "replies", key.encode(),
                                self.reply_json(key, replyId=reply_id), fate=fate))
        return out

    def unmatched_command(self) -> list[Planned]:
        key = self.fresh()
        command = self.rng.choice(("CANCEL", "SUSPEND", "RESUME", "DELIVER"))
        return [self.rec("unmatched_command", "commands", key.encode(), _json({
            "correlationKey": key, "command": command, "operator": "mallory",
            "reason": "flood", "responseData": VALID_DATA}))]

    def command_not_applicable(self) -> list[Planned]:
        w = self.parked()
        fields: dict[str, Any] = self.rng.choice((
            {"command": "REVIEW", "reviewOutcome": "Accept"},
            {"command": "REVIEW", "reviewOutcome": "Submit Correction",
             "responseData": VALID_DATA},
            {"command": "DELIVER"},
            {"command": "RESCHEDULE"},
            {"command": "RESCHEDULE", "moveBy": "-P30D"},
            {"command": "RESCHEDULE", "deadline": self.rng.choice(BAD_DEADLINES)},
            {"command": "RESCHEDULE", "deadline": "PT1H", "moveBy": "PT1H"},
            {"command": "EXPLODE"},
        ))
        return [self.rec("command_not_applicable", "commands", w.key.encode(), _json({
            "correlationKey": w.key, "operator": "mallory", **fields}), wait_key=w.key)]

    def command_resume_parked(self) -> list[Planned]:
        w = self.parked()
        return [self.rec("command_resume_parked", "commands", w.key.encode(), _json({
            "correlationKey": w.key, "command": "RESUME", "operator": "mallory"}),
            wait_key=w.key)]

    def timer(self, kind: str, key: str, timer_kind: str, due_at: int, generation: int,
              parked: bool = True) -> Planned:
        return self.rec(kind, "timers", key.encode(), codec.encode(RecordType.TIMER, {
            "correlationKey": key, "kind": timer_kind, "dueAt": due_at,
            "generation": generation, "firedAt": self.now_ms}),
            wait_key=key if parked else None)

    def timer_forged_future(self) -> list[Planned]:
        w = self.parked()
        if self.exact and self.rng.random() < 0.5:  # exactly the timer the wait armed
            t = self.rng.choice(self.exact)
            return [self.timer("timer_forged_future", w.key, t.kind,
                               w.requested_at + t.after_ms, t.generation)]
        return [self.timer("timer_forged_future", w.key, self.rng.choice(
            ("deadline", "reminder", "poll", "retention", "early_reply")),
            self.now_ms + self.rng.randint(DAY_MS, 30 * DAY_MS), self.rng.randint(0, 5))]

    def timer_forged_stale(self) -> list[Planned]:
        parked = self.rng.random() < 0.7  # most for parked waits, the rest for no wait
        key = self.parked().key if parked else self.fresh()
        due_at = self.rng.choice((0, self.now_ms - self.rng.randint(3_600_000, 30 * DAY_MS)))
        return [self.timer("timer_forged_stale", key, self.rng.choice(
            ("deadline", "reminder", "poll", "retention", "early_reply")), due_at,
            self.rng.randint(0, 5), parked)]

    def misrouted(self) -> list[Planned]:
        key = self.fresh().encode()
        right = partition_for(key, self.partitions)
        wrong = (right + self.rng.randrange(1, self.partitions)) % self.partitions
        return [self.rec("misrouted", self.role(), key, self.rng.randbytes(
            self.rng.randint(1, 64)), partition=wrong)]


def kinds_for(partitions: int) -> list[str]:
    """The kinds a flood over this many partitions holds (misrouting needs two)."""
    return [k for k in KINDS if k != "misrouted" or partitions > 1]


def plan_flood(seed: int, hostile: int, waits: Sequence[ParkedWait], partitions: int,
               now_ms: int, reply_every: int = 50, compressed_fraction: float = 0.1,
               exact: Sequence[ExactTimer] = ()) -> list[Planned]:
    """The flood, in the order it is produced: `hostile` hostile records and the valid replies.

    The same arguments give the same records (one `random.Random(seed)`, no
    clock).  Every kind comes once first, in a shuffled order, then kinds are
    drawn by weight.  After every `reply_every` hostile records comes a valid
    reply to the next parked wait of a shuffled order (at most one per wait).
    A record of a compressible kind goes through a compressing producer with
    probability `compressed_fraction`, the codec drawn from COMPRESSIONS.
    """
    if not waits:
        raise ValueError("Expected parked waits to aim the flood at, but got none")
    rng = random.Random(seed)  # noqa: S311 - a reproducible flood
    mixer = _Mixer(rng, waits, partitions, now_ms, exact)
    names = kinds_for(partitions)
    weights = [KINDS[k].weight for k in names]
    first = rng.sample(names, len(names))
    to_reply = rng.sample(list(waits), len(waits))
    out: list[Planned] = []
    made = draws = 0
    while made < hostile:
        name = first[draws] if draws < len(first) else rng.choices(names, weights)[0]
        draws += 1
        records = getattr(mixer, name)()[:hostile - made]
        for rec in records:
            if (rec.kind in KINDS and KINDS[rec.kind].compressible
                    and rng.random() < compressed_fraction):
                rec = Planned(rec.kind, rec.fate, rec.role, rec.key, rec.value, rec.partition,
                              rng.choice(COMPRESSIONS), rec.wait_key)
            out.append(rec)
            made += 1
            if made % reply_every == 0 and to_reply:
                w = to_reply.pop()
                key = w.key.encode()
                reply = Planned("valid_reply", Fate.VALID, "replies", key,
                                valid_reply(w.key, now_ms), partition_for(key, partitions),
                                wait_key=w.key)
                mixer.replied.append(reply)
                out.append(reply)
    return out


def mix_summary(plan: Sequence[Planned]) -> dict[str, Any]:
    """Counts of the flood by kind, topic, partition and compression (valid replies apart)."""
    hostile = [p for p in plan if p.fate is not Fate.VALID]
    valid = [p for p in plan if p.fate is Fate.VALID]
    return {
        "hostile": len(hostile),
        "valid_replies": len(valid),
        "by_kind": dict(sorted(Counter(p.kind for p in hostile).items())),
        "by_fate": dict(sorted(Counter(p.fate.value for p in hostile).items())),
        "by_topic": dict(sorted(Counter(p.role for p in hostile).items())),
        "by_partition": {str(k): v for k, v in sorted(Counter(
            p.partition for p in hostile).items())},
        "by_compression": dict(sorted(Counter(p.compression for p in hostile).items())),
        "valid_replies_by_partition": {str(k): v for k, v in sorted(Counter(
            p.partition for p in valid).items())},
        "bytes": sum(len(p.value or b"") for p in hostile),
    }
