"""A flood of hostile records against one real worker; write the figures to a JSON file.

Run: ``.venv/bin/python bench/flood_bench.py [--waits 5000] [--hostile 100000]
[--reply-every 50] [--compressed-fraction 0.1] [--early-reply-ttl PT30S]
[--partitions 8] [--seed 1] [--out bench/results/flood-<ts>.json]
[--bootstrap 127.0.0.1:9092]``.  See bench/README.md for what each figure means.

The target it measures (open issue): a flood of hostile records is rejected at
no less than the worker's drain rate, and valid replies in the same partitions
are not left minutes behind it.  One run, against the broker given (shared:
never started or stopped here; the run's own topics are deleted at the end):

1. creates its topics under a fresh prefix and a topology folder with the
   shipped definitions, their early-reply TTL set to ``--early-reply-ttl`` so
   that replies and commands held for keys no wait has are rejected
   ``unmatched`` within the run, and starts ONE ``xwait worker``;
2. parks ``--waits`` expense-approval waits and measures the worker's parks/s:
   the drain rate of this run on this machine, the like-for-like yardstick;
3. produces ``--hostile`` hostile records of every kind the processor refuses
   (`KINDS`), over the four input topics and every partition, with a valid
   reply to a parked wait after every ``--reply-every`` of them, a share
   through producers that compress (gzip, lz4, zstd, snappy);
4. measures hostile records/s from the first flood record's append until the
   worker has decided the last one (its positions in /xwait/stats) and
   published its rejection, the valid replies' reply->outcome latency, and
   accounts for every hostile record (`account`); checks that no hostile
   record ended, parked or changed a wait;
5. writes the JSON (also when it fails: ``"complete": false``, exit 1), prints
   a summary and deletes its topics.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import secrets
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from functools import partial
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

sys.path.insert(0, str(Path(__file__).resolve().parent))

from park_bench import (  # noqa: E402 - the sibling module, importable once on the path
    REPO,
    BenchError,
    RssSampler,
    check_alive,
    check_broker,
    delete_topics,
    machine,
    percentile,
    rnd,
    start_worker,
    versions,
)

from streams import codec  # noqa: E402
from streams.codec import RecordType  # noqa: E402
from streams.config import Settings  # noqa: E402
from streams.core.durations import parse_duration_ms  # noqa: E402
from streams.core.state import MAX_HELD_REPLIES  # noqa: E402
from streams.definitions import load_definitions  # noqa: E402
from streams.partitioning import partition_for  # noqa: E402
from streams.testing.workers import WorkerProcess  # noqa: E402

# The valid waits: a shipped single-channel definition whose reminder (a day)
# and deadline (three days) never fall due during a run.
DEFINITION = "expense-approval"
CHANNEL = "portal"
VALID_DATA = '{"decision": "approved", "by": "flood-bench"}'
INPUTS = ("requests", "replies", "commands", "timers")
RECORD_TYPES = {"requests": RecordType.START_WAIT, "replies": RecordType.REPLY,
                "commands": RecordType.COMMAND, "timers": RecordType.TIMER}
COMPRESSIONS = ("gzip", "lz4", "zstd", "snappy")
TIMER_TICK_S = 0.2
# Parking lasts seconds: poll often, or the poll interval is a visible share of it.
PARK_POLL_S = 0.1
# The flood lasts minutes: a slower poll costs the worker (which shares the CPU) less.
FLOOD_POLL_S = 0.2
# Accounting reads the whole plan (100,000 records: a tenth of a second): not more often.
SETTLE_POLL_S = 2.0
# How long the worker's positions may stay still before the run gives up.
STALL_S = 180.0
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
    rng = random.Random(seed)
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


# -- accounting (pure) --------------------------------------------------------------------

Coord = tuple[str, int, int]  # (input role, partition, offset)


@dataclass(frozen=True)
class Rejection:
    reason: str
    at_ms: int  # the Rejected record's timestamp: when the worker produced it
    key: bytes | None = None


def account(plan: Sequence[Planned], coords: Sequence[Coord | None],
            rejections: Mapping[Coord, Sequence[Rejection]],
            counters: Mapping[str, int]) -> dict[str, Any]:
    """Match every hostile record with what the worker did with it.

    `coords[i]` is where `plan[i]` was appended (None: not delivered);
    `rejections` are the Rejected records of the run by the coordinates they
    name; `counters` the worker's counters moved during the flood.  A record
    is accounted for by a Rejected record at its coordinates (a misrouted one:
    one under its key at coordinates no produced record has, since the worker
    forwarded it), or, for the kinds that may be ignored, by its kind's ignore
    counter.  Held records are accounted only once their `unmatched` came.
    """
    produced = {c for c in coords if c is not None}
    forwarded: dict[bytes, list[Rejection]] = {}
    for c, found in rejections.items():
        if c not in produced:
            for r in found:
                forwarded.setdefault(r.key or b"", []).append(r)
    by_kind: dict[str, dict[str, Any]] = {}
    reasons: Counter[str] = Counter()
    unexpected: dict[str, Counter[str]] = {}
    unrejected: Counter[str] = Counter()
    missing: Counter[str] = Counter()
    samples: list[dict[str, Any]] = []
    valid_rejected = duplicates = 0
    used_forwarded = 0
    last_immediate: int | None = None
    last_any: int | None = None
    for rec, where in zip(plan, coords, strict=True):
        if rec.fate is Fate.VALID:
            valid_rejected += bool(where is not None and rejections.get(where))
            continue
        row = by_kind.setdefault(rec.kind, {"produced": 0, "reasons": Counter(), "ignored": 0,
                                            "unaccounted": 0})
        row["produced"] += 1
        if rec.fate is Fate.FORWARDED:
            hits = forwarded.get(rec.key or b"", [])
            used_forwarded += len(hits)
        else:
            hits = list(rejections.get(where, ())) if where is not None else []
        if hits:
            duplicates += len(hits) - 1
            reason = hits[0].reason
            row["reasons"][reason] += 1
            reasons[reason] += 1
            if reason not in KINDS[rec.kind].reasons:
                unexpected.setdefault(rec.kind, Counter())[reason] += 1
            at = min(h.at_ms for h in hits)
            last_any = at if last_any is None else max(last_any, at)
            if rec.fate is not Fate.HELD:  # held ones are rejected a TTL later
                last_immediate = at if last_immediate is None else max(last_immediate, at)
        elif where is not None and rec.fate in (Fate.IGNORED, Fate.REJECTED_OR_IGNORED):
            unrejected[rec.kind] += 1
        else:
            missing[rec.kind] += 1
            row["unaccounted"] += 1
            if len(samples) < 20:
                samples.append({"kind": rec.kind, "fate": rec.fate.value, "role": rec.role,
                                "coordinates": where, "key": (rec.key or b"")[:40].decode(
                                    errors="replace")})
    ignored: dict[str, dict[str, int]] = {}
    for kind, n in sorted(unrejected.items()):
        counter = IGNORE_COUNTER[kind]
        have = int(counters.get(counter, 0))
        took = min(n, have)
        by_kind[kind]["ignored"] += took
        by_kind[kind]["unaccounted"] += n - took
        missing[kind] += n - took
        ignored[counter] = {"records": n, "counter": have}
    stray = sum(len(v) for v in forwarded.values()) - used_forwarded
    return {
        "hostile": sum(r["produced"] for r in by_kind.values()),
        "rejected": sum(reasons.values()),
        "ignored": sum(r["ignored"] for r in by_kind.values()),
        "unaccounted": sum(missing.values()),
        "unaccounted_by_kind": dict(sorted((k, v) for k, v in missing.items() if v)),
        "unaccounted_samples": samples,
        "reasons": dict(sorted(reasons.items())),
        "ignore_counters": ignored,
        "unexpected_reasons": {k: dict(v) for k, v in sorted(unexpected.items())},
        "by_kind": {k: {**v, "reasons": dict(sorted(v["reasons"].items()))}
                    for k, v in sorted(by_kind.items())},
        "valid_replies_rejected": valid_rejected,
        "duplicate_rejections": duplicates,
        "stray_rejections": stray,
        "internal_errors": reasons.get("internal_error", 0),
        "last_immediate_rejection_ms": last_immediate,
        "last_rejection_ms": last_any,
    }


def judge_outcomes(parked: Iterable[str], replied: Iterable[str],
                   outcomes: Mapping[str, Sequence[tuple[str, str]]]) -> dict[str, Any]:
    """Did every replied wait end RECEIVED (reply_valid) exactly once, and nothing else end?

    `outcomes` maps a wait key to its outcome records (outcome, reason).
    """
    parked_set, replied_set = set(parked), set(replied)
    once = missing = repeated = wrong = 0
    for key in replied_set:
        got = outcomes.get(key, ())
        if not got:
            missing += 1
            continue
        repeated += len(got) > 1
        if all(o == ("RECEIVED", "reply_valid") for o in got):
            once += len(got) == 1
        else:
            wrong += 1
    unreplied_ended = sum(1 for k in parked_set - replied_set if outcomes.get(k))
    strangers = sum(1 for k in outcomes if k not in parked_set)
    by_kind = Counter(f"{o}/{r}" for got in outcomes.values() for o, r in got)
    return {
        "replied": len(replied_set), "received_exactly_once": once, "missing": missing,
        "more_than_once": repeated, "wrong": wrong,
        "unreplied_waits_that_ended": unreplied_ended, "outcomes_of_other_keys": strangers,
        "outcomes_by_kind": dict(sorted(by_kind.items())),
        "ok": (once == len(replied_set) and not (missing or repeated or wrong
                                                  or unreplied_ended or strangers)),
    }


def latency(values: Sequence[float]) -> dict[str, Any]:
    """p50, p99 and max of milliseconds (None without values), and how many."""
    return {"p50": rnd(percentile(list(values), 50)), "p99": rnd(percentile(list(values), 99)),
            "max": rnd(max(values, default=None)), "count": len(values)}


def per_s(count: int, start_ms: int | None, end_ms: int | None) -> float | None:
    """count / seconds between two wall times in ms; None when the span is unknown or empty."""
    if start_ms is None or end_ms is None or end_ms <= start_ms or count <= 0:
        return None
    return round(count * 1000 / (end_ms - start_ms), 1)


def counter_delta(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, int]:
    """The counters that moved from `before` to `after` (both /xwait/stats `counters`)."""
    out = {}
    for name in sorted(set(before) | set(after)):
        moved = int(after.get(name, 0)) - int(before.get(name, 0))
        if moved:
            out[name] = moved
    return out


def flood_figures(hostile: int, records: int, parks_per_s: float | None,
                  first_append_ms: int | None, decided_ms: int | None,
                  last_immediate_ms: int | None, last_ms: int | None,
                  reply_latency_ms: Sequence[float]) -> dict[str, Any]:
    """The headline figures: the flood ends when the last record is decided and the last
    rejection that comes at once is out (held records' `unmatched` come after the TTL)."""
    ends = [t for t in (decided_ms, last_immediate_ms) if t is not None]
    end = max(ends) if ends else None
    hostile_rate = per_s(hostile, first_append_ms, end)
    return {
        "hostile_per_s": hostile_rate,
        "flood_records_per_s": per_s(records, first_append_ms, end),
        "valid_parks_per_s": parks_per_s,
        "hostile_to_parks_ratio": (round(hostile_rate / parks_per_s, 3)
                                   if hostile_rate and parks_per_s else None),
        "valid_reply_to_outcome_ms": latency(reply_latency_ms),
        "flood_seconds": (None if end is None or first_append_ms is None
                          else round((end - first_append_ms) / 1000, 2)),
        "decided_after_s": (None if decided_ms is None or first_append_ms is None
                            else round((decided_ms - first_append_ms) / 1000, 2)),
        "all_rejected_after_s": (None if last_ms is None or first_append_ms is None
                                 else round((last_ms - first_append_ms) / 1000, 2)),
    }


# -- talking to Kafka ------------------------------------------------------------------------


class Producers:
    """One producer per compression codec ("none" too), with delivery reports by record index.

    The partition of every record is given (the plan chose it), so the
    partitioner does not matter.  Input topics stamp records with the broker's
    clock: the delivery report carries that append time.
    """

    def __init__(self, settings: Settings) -> None:
        self.producers = {c: Producer(settings.confluent(**{
            "acks": "all", "enable.idempotence": True, "compression.type": c,
            # The producer must outrun the worker by far, so that the rate is the worker's.
            "linger.ms": 20, "batch.size": 1_000_000, "queue.buffering.max.messages": 500_000,
            "queue.buffering.max.kbytes": 1_048_576}))
            for c in ("none", *COMPRESSIONS)}
        self.coords: list[tuple[int, int] | None] = []  # (partition, offset) by index
        self.append_ms: list[int | None] = []
        self.log_append_time = True
        self.errors: list[str] = []

    def _delivered(self, index: int, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            if len(self.errors) < 100:
                self.errors.append(str(err))
            return
        self.coords[index] = (msg.partition() or 0, msg.offset() or 0)
        kind, ts = msg.timestamp()
        self.append_ms[index] = ts
        if kind != TIMESTAMP_LOG_APPEND_TIME:
            self.log_append_time = False

    def send(self, topic: str, key: bytes | None, value: bytes | None, partition: int,
             compression: str = "none") -> int:
        index = len(self.coords)
        self.coords.append(None)
        self.append_ms.append(None)
        producer = self.producers[compression]
        while True:
            try:
                producer.produce(topic, key=key, value=value, partition=partition,
                                 on_delivery=partial(self._delivered, index))
                break
            except BufferError:
                producer.poll(0.05)
        if index % 2000 == 0:
            for p in self.producers.values():
                p.poll(0)
        return index

    def flush(self, timeout: float) -> None:
        end = time.monotonic() + timeout
        for p in self.producers.values():
            left = p.flush(max(end - time.monotonic(), 1.0))
            if left:
                raise BenchError(f"{left} records not delivered within {timeout:.0f}s")
        if self.errors:
            raise BenchError(f"{len(self.errors)} records failed: {self.errors[0]}")


class Watch:
    """A read_committed consumer of the outcomes and rejected topics, from their start."""

    def __init__(self, settings: Settings) -> None:
        self.consumer = Consumer(settings.confluent(**{
            "group.id": f"{settings.topic_prefix}-watch-{secrets.token_hex(4)}",
            "enable.auto.commit": False, "isolation.level": "read_committed",
            "auto.offset.reset": "earliest", "fetch.wait.max.ms": 50}))
        self.outcomes_topic = settings.topic("outcomes")
        self.rejected_topic = settings.topic("rejected")
        self.roles = {settings.topic(r): r for r in INPUTS}
        self.consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING)
                              for t in (self.outcomes_topic, self.rejected_topic)
                              for p in range(settings.partitions)])
        # wait key -> [(outcome, reason, record timestamp ms)]
        self.outcomes: dict[str, list[tuple[str, str, int]]] = {}
        self.rejections: dict[Coord, list[Rejection]] = {}
        self.undecodable = 0

    def drain(self, timeout: float, most: int = 5000) -> int:
        got = 0
        for msg in self.consumer.consume(most, timeout=max(timeout, 0.0)):
            if msg.error() is not None:
                continue
            got += 1
            ts = msg.timestamp()[1]
            try:
                if msg.topic() == self.outcomes_topic:
                    o = codec.decode(RecordType.OUTCOME, msg.value())
                    self.outcomes.setdefault(str(o["correlationKey"]), []).append(
                        (str(o["outcome"]), str(o["reason"]), ts))
                else:
                    r = codec.decode(RecordType.REJECTED, msg.value())
                    where = (self.roles.get(str(r["topic"]), str(r["topic"])),
                             int(r["partition"]), int(r["offset"]))
                    self.rejections.setdefault(where, []).append(
                        Rejection(str(r["reason"]), ts, r["key"]))
            except codec.CodecError:
                self.undecodable += 1
        return got

    def close(self) -> None:
        with contextlib.suppress(KafkaException, RuntimeError):
            self.consumer.close()


# -- the run ----------------------------------------------------------------------------------


def make_topology(folder: Path, early_ttl: str | None) -> list[str]:
    """topics.yaml and every shipped definition, their early-reply TTL set to `early_ttl`."""
    (folder / "waits").mkdir(parents=True)
    shutil.copy(REPO / "topology" / "topics.yaml", folder / "topics.yaml")
    changes = []
    for src in sorted((REPO / "topology" / "waits").glob("*.yaml")):
        doc = yaml.safe_load(src.read_text(encoding="utf-8"))
        if early_ttl is not None and isinstance(doc, dict):
            was = doc.get("early_reply_ttl", "PT10M (default)")
            doc["early_reply_ttl"] = early_ttl
            changes.append(f"{doc.get('name', src.stem)}: early_reply_ttl {was} -> {early_ttl}")
        (folder / "waits" / src.name).write_text(yaml.safe_dump(doc, sort_keys=False),
                                                 encoding="utf-8")
    return changes


def exact_timers(topology: Path) -> list[ExactTimer]:
    """The deadline and reminder a DEFINITION wait arms when it parks.

    decide() arms the deadline first, then the reminder, from a new key's
    generation 1 (`_arm_phase`): forged records of exactly these look real.
    """
    stage = load_definitions(topology / "waits")[DEFINITION].stages[0]
    out = [ExactTimer("deadline", 1, stage.deadline_ms)]
    if stage.reminder is not None:
        out.append(ExactTimer("reminder", 2, stage.reminder.interval_ms))
    return out


def say(text: str) -> None:
    print(f"flood_bench {datetime.now(UTC).strftime('%H:%M:%S')} {text}", flush=True)


def wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class Run:
    args: argparse.Namespace
    settings: Settings
    worker: WorkerProcess
    producers: Producers
    watch: Watch
    waits: list[ParkedWait] = field(default_factory=list)
    plan: list[Planned] = field(default_factory=list)
    flood_index0: int = 0  # producer index of the flood's first record
    marks: dict[str, float] = field(default_factory=dict)  # wall ms of phases
    stats_before_flood: dict[str, Any] = field(default_factory=dict)
    stats_at_end: dict[str, Any] | None = None
    parks_per_s: float | None = None
    rss_kib: dict[str, int | None] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def stats(self) -> dict[str, Any]:
        check_alive(self.worker)
        return self.worker.stats() or {}

    def counters(self) -> dict[str, Any]:
        return dict(self.stats().get("counters", {}))


def park(run: Run) -> None:
    """Park the valid waits; parks/s from the first request's append to the worker's count."""
    n = run.args.waits
    topic = run.settings.topic("requests")
    before = int(run.counters().get("processed.requests", 0))
    run.waits = parked_waits(run.args.seed, n, wall_ms())
    for w in run.waits:
        key = w.key.encode()
        run.producers.send(topic, key, start_request(w), partition_for(key, run.args.partitions))
    run.producers.flush(120)
    first = min(t for t in run.producers.append_ms[:n] if t is not None)
    deadline = time.monotonic() + max(120.0, n / 50)
    while True:
        if int(run.counters().get("processed.requests", 0)) - before >= n:
            done = wall_ms()
            break
        if time.monotonic() > deadline:
            raise BenchError(f"timed out waiting for the worker to process {n} requests")
        time.sleep(PARK_POLL_S)
    run.parks_per_s = per_s(n, first, done)
    run.marks["park_first_append"], run.marks["parked"] = first, done
    # The flood starts on a settled worker: every wait counted, its action out.
    deadline = time.monotonic() + 120
    while int(run.stats().get("waits", {}).get("parked", 0)) < n:
        if time.monotonic() > deadline:
            raise BenchError(f"the worker's census did not reach {n} parked waits in 120 s")
        time.sleep(PARK_POLL_S)


def positions_cover(stats: Mapping[str, Any], ends: Mapping[tuple[str, int], int]) -> bool:
    """The worker has decided every record up to `ends` (role, partition) -> last offset."""
    positions = stats.get("positions", {})
    return all(int(positions.get(str(p), {}).get(role, -1)) > last
               for (role, p), last in ends.items())


def flood(run: Run) -> None:
    """Produce the plan, then wait until the worker has decided every record of it."""
    s = run.settings
    run.stats_before_flood = run.stats()
    run.flood_index0 = len(run.producers.coords)
    started = time.monotonic()
    for rec in run.plan:
        run.producers.send(s.topic(rec.role), rec.key, rec.value, rec.partition,
                           rec.compression)
    produced = time.monotonic()
    run.producers.flush(300)
    run.marks["produce_s"] = produced - started
    run.marks["flushed_s"] = time.monotonic() - started
    coords = run.producers.coords[run.flood_index0:]
    ends: dict[tuple[str, int], int] = {}
    for rec, c in zip(run.plan, coords, strict=True):
        if c is not None:
            ends[(rec.role, c[0])] = max(ends.get((rec.role, c[0]), -1), c[1])
    appended = [t for t in run.producers.append_ms[run.flood_index0:] if t is not None]
    run.marks["flood_first_append"] = min(appended)
    run.marks["flood_last_append"] = max(appended)
    say(f"produced {len(run.plan)} records in {run.marks['produce_s']:.1f}s; "
        "waiting for the worker to decide them")
    moved, last = time.monotonic(), -1
    give_up = time.monotonic() + max(600.0, len(run.plan) / 20)
    while True:
        stats = run.stats()
        if positions_cover(stats, ends):
            run.marks["decided"] = wall_ms()
            break
        mark = sum(int(o) for pos in stats.get("positions", {}).values() for o in pos.values())
        now = time.monotonic()
        if mark != last:
            last, moved = mark, now
        elif now - moved > STALL_S:
            raise BenchError(f"the worker's positions did not move for {STALL_S:.0f}s")
        if now > give_up:
            raise BenchError("timed out waiting for the worker to decide the flood")
        time.sleep(FLOOD_POLL_S)  # the stats request costs the worker too: not faster
        run.watch.drain(0)


def flood_coords(run: Run) -> list[Coord | None]:
    out: list[Coord | None] = []
    for rec, c in zip(run.plan, run.producers.coords[run.flood_index0:], strict=True):
        out.append(None if c is None else (rec.role, c[0], c[1]))
    return out


def settle(run: Run) -> dict[str, Any]:
    """Consume rejections and outcomes until every hostile record is accounted for.

    Held records are rejected `unmatched` once their early-reply TTL has
    passed (by the partition's stream time): up to the TTL after the flood.
    """
    coords = flood_coords(run)
    replied = sum(1 for p in run.plan if p.fate is Fate.VALID)
    ttl_s = parse_duration_ms(run.args.early_reply_ttl) / 1000
    give_up = time.monotonic() + ttl_s + 180
    while True:
        pause = time.monotonic() + SETTLE_POLL_S
        while time.monotonic() < pause:
            run.watch.drain(0.2)
        delta = counter_delta(run.stats_before_flood.get("counters", {}), run.counters())
        result = account(run.plan, coords, run.watch.rejections, delta)
        got = sum(1 for p in run.plan if p.fate is Fate.VALID and run.watch.outcomes.get(
            p.wait_key or ""))
        if result["unaccounted"] == 0 and got >= replied:
            return result
        if time.monotonic() > give_up:
            run.notes.append(f"gave up waiting: {result['unaccounted']} hostile records "
                             f"unaccounted, {replied - got} replied waits without an outcome")
            return result


def verdict(run: Run, accounting: Mapping[str, Any]) -> dict[str, Any]:
    """Correctness: outcomes, the census, the counters of the flood, the worker alive."""
    stats = run.stats_at_end or {}
    replied = [p.wait_key or "" for p in run.plan if p.fate is Fate.VALID]
    outcomes = {k: [(o, r) for o, r, _ in v] for k, v in run.watch.outcomes.items()}
    judged = judge_outcomes((w.key for w in run.waits), replied, outcomes)
    census = {k: int(v) for k, v in stats.get("waits", {}).items() if int(v)}
    expected = {k: v for k, v in (("parked", len(run.waits) - len(replied)),
                                  ("done", len(replied))) if v}
    delta = counter_delta(run.stats_before_flood.get("counters", {}),
                          stats.get("counters", {}))
    actions = {k: v for k, v in delta.items() if k.startswith("actions.")}
    ended = {k: v for k, v in delta.items() if k.startswith("outcomes.")}
    alive = run.worker.running
    ok = (judged["ok"] and census == expected and not actions
          and ended == ({"outcomes.reply_valid": len(replied)} if replied else {})
          and accounting["internal_errors"] == 0 and accounting["unaccounted"] == 0
          and accounting["valid_replies_rejected"] == 0 and alive)
    return {"ok": ok, "outcomes": judged, "census": census, "expected_census": expected,
            "actions_during_flood": actions, "outcomes_during_flood": ended,
            "internal_errors": accounting["internal_errors"], "worker_alive": alive}


def reply_latencies(run: Run) -> list[float]:
    """Reply append (broker) -> outcome record timestamp, ms, for every valid reply."""
    out = []
    appends = run.producers.append_ms[run.flood_index0:]
    for rec, appended in zip(run.plan, appends, strict=True):
        if rec.fate is not Fate.VALID or appended is None:
            continue
        got = run.watch.outcomes.get(rec.wait_key or "")
        if got:
            out.append(float(got[0][2] - appended))
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Park waits on one xwait worker, then flood it with hostile records; "
                    "write hostile records/s against parks/s, the valid replies' latency "
                    "and the account of every hostile record to a JSON file.")
    p.add_argument("--waits", type=int, default=5000,
                   help="valid waits parked before the flood (5000)")
    p.add_argument("--hostile", type=int, default=100_000,
                   help="hostile records in the flood (100000)")
    p.add_argument("--reply-every", type=int, default=50,
                   help="a valid reply to a parked wait after every N hostile records (50)")
    p.add_argument("--compressed-fraction", type=float, default=0.1,
                   help="share of hostile records sent compressed (gzip/lz4/zstd/snappy) (0.1)")
    p.add_argument("--early-reply-ttl", default="PT30S",
                   help="early-reply TTL of every definition, so that held records are "
                        "rejected unmatched within the run; 'shipped' keeps the definitions' "
                        "own (PT30S)")
    p.add_argument("--partitions", type=int, default=8, help="partitions of every topic (8)")
    p.add_argument("--seed", type=int, default=1, help="seed of the mix and the keys (1)")
    p.add_argument("--out", type=Path, default=None,
                   help="JSON file (default bench/results/flood-<timestamp>.json)")
    p.add_argument("--bootstrap", default=os.environ.get("XWAIT_BOOTSTRAP", "127.0.0.1:9092"),
                   help="Kafka bootstrap servers ($XWAIT_BOOTSTRAP or 127.0.0.1:9092)")
    args = p.parse_args(argv)
    if args.waits < 1:
        p.error("--waits: expected a number above zero")
    if args.hostile < len(KINDS):
        p.error(f"--hostile: expected at least {len(KINDS)}, one record of every kind")
    if args.reply_every < 1:
        p.error("--reply-every: expected a number above zero")
    if not 0.0 <= args.compressed_fraction <= 1.0:
        p.error("--compressed-fraction: expected a number from 0 to 1")
    if args.partitions < 1:
        p.error("--partitions: expected a number above zero")
    if args.early_reply_ttl == "shipped":
        args.early_reply_ttl = None
    else:
        try:
            parse_duration_ms(args.early_reply_ttl)
        except ValueError as exc:
            p.error(f"--early-reply-ttl: {exc}")
    return args


def summary(result: Mapping[str, Any]) -> str:
    f = result.get("figures") or {}
    a = result.get("accounting") or {}
    c = result.get("correctness") or {}
    lat = f.get("valid_reply_to_outcome_ms") or {}
    rss = result.get("worker_rss_mib") or {}
    par = result["parameters"]
    lines = [
        f"flood_bench: {par['hostile']} hostile records, {par['waits']} parked waits, "
        f"complete={result['complete']}",
        f"  hostile records/s          {f.get('hostile_per_s')}  (all flood records "
        f"{f.get('flood_records_per_s')}/s, over {f.get('flood_seconds')} s)",
        f"  valid parks/s (yardstick)  {f.get('valid_parks_per_s')}",
        f"  hostile/s / parks/s        {f.get('hostile_to_parks_ratio')}",
        f"  valid reply->outcome ms    p50 {lat.get('p50')}  p99 {lat.get('p99')}  "
        f"max {lat.get('max')}  (n={lat.get('count')})",
        f"  accounted                  rejected {a.get('rejected')}, ignored "
        f"{a.get('ignored')}, unaccounted {a.get('unaccounted')} (held ones all rejected "
        f"after {f.get('all_rejected_after_s')} s)",
        f"  worker RSS MiB             before flood {rss.get('before_flood')}, peak "
        f"{rss.get('peak_sampled')}, VmHWM {rss.get('vmhwm')}",
        f"  correct                    {c.get('ok')}  (internal_error "
        f"{c.get('internal_errors')}, worker alive {c.get('worker_alive')})",
        "  rejected by reason         " + ", ".join(
            f"{k} {v}" for k, v in (a.get("reasons") or {}).items()),
        "  ignored by counter         " + ", ".join(
            f"{k} {v['counter']}" for k, v in (a.get("ignore_counters") or {}).items()),
    ]
    for kind, reasons in (a.get("unexpected_reasons") or {}).items():
        lines.append(f"  note: {kind} got {reasons}")
    for note in result.get("notes", []):
        lines.append(f"  note: {note}")
    for err in result.get("errors", []):
        lines.append(f"  ERROR: {err}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = datetime.now(UTC)
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    out: Path = args.out or REPO / "bench" / "results" / f"flood-{stamp}.json"
    prefix = f"floodbench-{secrets.token_hex(4)}"
    folder = Path(tempfile.mkdtemp(prefix="flood-bench-"))
    changes = make_topology(folder / "topology", args.early_reply_ttl)
    settings = Settings(bootstrap=args.bootstrap, topic_prefix=prefix,
                        app_id=f"{prefix}-processor", partitions=args.partitions,
                        topology=folder / "topology", data_dir=folder / "data",
                        timer_tick=TIMER_TICK_S)
    ttl_label = args.early_reply_ttl or "shipped"
    if args.early_reply_ttl is None:
        # How long settle() waits for held records: the longest TTL of the shipped
        # definitions (the default, which most of them keep).
        args.early_reply_ttl = "PT10M"
    mach = machine()
    errors: list[str] = []
    admin = AdminClient(settings.confluent())
    worker = WorkerProcess(settings, folder, "flood", log_level="warning")
    run: Run | None = None
    rss: RssSampler | None = None
    accounting: dict[str, Any] | None = None
    correctness: dict[str, Any] | None = None
    reachable = False
    deleted: list[str] = []
    log_tail: list[str] = []
    try:
        check_broker(admin, args.bootstrap)
        reachable = True
        rss = start_worker(settings, worker)
        run = Run(args, settings, worker, Producers(settings), Watch(settings))
        say(f"worker up (pid {worker.pid}); parking {args.waits} waits")
        park(run)
        say(f"parked at {run.parks_per_s}/s; planning the flood")
        run.rss_kib["before_flood"] = worker.rss_kib()
        run.plan = plan_flood(args.seed, args.hostile, run.waits, args.partitions, wall_ms(),
                              args.reply_every, args.compressed_fraction,
                              exact_timers(settings.topology))
        flood(run)
        say("decided; accounting for every hostile record (held ones wait for their TTL)")
        accounting = settle(run)
        run.stats_at_end = run.stats()
        run.rss_kib["vmhwm"] = worker.peak_rss_kib()
        run.rss_kib["at_end"] = worker.rss_kib()
        correctness = verdict(run, accounting)
        if not run.producers.log_append_time:
            run.notes.append("the input topics did not report LogAppendTime: append times "
                             "are the producer's")
    except Exception as exc:  # any failure still writes an incomplete result
        errors.append(f"{type(exc).__name__}: {exc}")
    except KeyboardInterrupt:
        errors.append("interrupted")
    finally:
        if rss is not None:
            rss.stop()
        if run is not None and run.stats_at_end is None and worker.running:
            run.stats_at_end = worker.stats()
        if errors or (correctness is not None and not correctness["worker_alive"]):
            log_tail = worker.log_tail(40).splitlines()
        worker.stop()
        if run is not None:
            run.watch.close()
        deleted = delete_topics(admin, settings) if reachable else []
        shutil.rmtree(folder, ignore_errors=True)

    figures = None
    if run is not None and run.marks.get("flood_first_append") is not None:
        a = accounting or {}
        figures = flood_figures(
            sum(1 for p in run.plan if p.fate is not Fate.VALID), len(run.plan),
            run.parks_per_s, int(run.marks["flood_first_append"]),
            int(run.marks["decided"]) if "decided" in run.marks else None,
            a.get("last_immediate_rejection_ms"), a.get("last_rejection_ms"),
            reply_latencies(run))
        figures["produce_s"] = rnd(run.marks.get("produce_s"), 2)
        figures["producer_per_s"] = (round(len(run.plan) / run.marks["produce_s"], 1)
                                     if run.marks.get("produce_s") else None)
        figures["park_seconds"] = (round((run.marks["parked"] - run.marks[
            "park_first_append"]) / 1000, 2) if "parked" in run.marks else None)
    complete = (not errors and figures is not None and correctness is not None
                and correctness["ok"])
    result: dict[str, Any] = {
        "benchmark": "flood_bench",
        "complete": complete,
        "timestamp": started.isoformat(timespec="seconds"),
        "duration_s": round((datetime.now(UTC) - started).total_seconds(), 1),
        "parameters": {
            "waits": args.waits, "hostile": args.hostile, "reply_every": args.reply_every,
            "compressed_fraction": args.compressed_fraction,
            "early_reply_ttl": ttl_label, "partitions": args.partitions,
            "seed": args.seed, "bootstrap": args.bootstrap, "topic_prefix": prefix,
            "workers": 1, "guarantee": settings.guarantee.value, "timer_tick_s": TIMER_TICK_S,
            "definition": DEFINITION,
        },
        "figures": figures,
        "worker_rss_mib": None if run is None else {
            **{k: (round(v / 1024, 1) if v else None) for k, v in run.rss_kib.items()},
            "peak_sampled": (round(rss.peak_kib / 1024, 1) if rss and rss.peak_kib else None),
            "samples": len(rss.samples) if rss else 0},
        "mix": None if run is None or not run.plan else mix_summary(run.plan),
        "kinds": {k: {"fate": v.fate.value, "reasons": sorted(v.reasons), "doc": v.doc}
                  for k, v in KINDS.items()},
        "accounting": accounting,
        "correctness": correctness,
        "counters_during_flood": None if run is None or run.stats_at_end is None else
        counter_delta(run.stats_before_flood.get("counters", {}),
                      run.stats_at_end.get("counters", {})),
        "topology_changes": changes,
        "machine": mach,
        "loadavg_at_end": list(os.getloadavg()),
        "versions": versions(),
        "worker_stats_at_end": None if run is None else run.stats_at_end,
        "notes": [] if run is None else run.notes,
        "errors": errors,
        "worker_log_tail": log_tail,
        "topics_deleted": len(deleted),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    print(summary(result))
    print(f"flood_bench: wrote {out}")
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main())
