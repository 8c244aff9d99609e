"""Counting and judging what a run left on its topics: an open run's outcomes by the broker's
clock, a storm's actions by kind and its first escalation after the last park."""

from __future__ import annotations

import json
from typing import Any

from confluent_kafka import Message

from streams import codec
from streams.codec import RecordType
from streams.config import Settings
from streams.testing.harness.kafka import key_text, topic_records

AVRO_MAGIC = b"\xc3\x01"  # Avro single-object encoding; the peers write JSON


def wrong_by_broker_clock(requested: dict[str, int], replied: dict[str, int],
                          ended: dict[str, str], deadline_ms: int) -> int:
    """Waits whose first outcome is not what the broker's clock says.

    The contract: a reply appended before the request's `requestedAt` plus the
    deadline is received (an invalid one too: the bench's reviews accept it),
    otherwise the wait escalates.  The load generator judges by when it meant
    to send each reply; on a loaded machine it sends some late, and then calls
    a correct escalation wrong (1,940 of 60,000 in one open round).
    """
    wrong = 0
    for key, at in requested.items():
        if key not in ended:
            continue  # missing: counted as such by the load generator
        reply = replied.get(key)
        expected = "RECEIVED" if reply is not None and reply < at + deadline_ms else "ESCALATED"
        wrong += ended[key] != expected
    return wrong


def judge_open_run(settings: Settings, partitions: int, deadline_ms: int) -> int:
    """`wrong_by_broker_clock` of an open run's topics (requests, replies, outcomes)."""
    requested: dict[str, int] = {}
    replied: dict[str, int] = {}
    ended: dict[str, str] = {}

    def request(m: Message) -> None:
        requested[key_text(m)] = int(codec.decode(RecordType.START_WAIT,
                                                  m.value())["requestedAt"])

    def reply(m: Message) -> None:
        at = m.timestamp()[1]
        replied[key_text(m)] = min(at, replied.get(key_text(m), at))

    def outcome(m: Message) -> None:
        ended.setdefault(key_text(m), str(codec.decode(RecordType.OUTCOME,
                                                       m.value())["outcome"]))

    conf = settings.confluent()
    for role, visit in (("requests", request), ("replies", reply), ("outcomes", outcome)):
        topic_records(conf, settings.topic(role), partitions, each=visit)
    return wrong_by_broker_clock(requested, replied, ended, deadline_ms)


def action_kind(value: bytes) -> str:
    """An action record's kind, from xwait's Avro or a peer's JSON."""
    try:
        if value[:2] == AVRO_MAGIC:
            return str(codec.decode(RecordType.ACTION, value)["action"])
        return str(json.loads(value)["action"])
    except (codec.CodecError, ValueError, KeyError, TypeError):
        return "<undecodable>"


class ActionTimes:
    """When a storm's waits were parked and escalated, from the action records' timestamps.

    The issue's storm target is "the first escalation <= 5 s after the last
    wait parked"; the load generator times the first outcome from the process
    start, which for a processor that escalates only once its backlog of
    requests is stored (xwait's stream time) is mostly the time to park them.
    Both are reported.
    """

    def __init__(self) -> None:
        self.last_parked: int | None = None
        self.first_escalated: int | None = None

    def __call__(self, m: Any) -> None:
        kind, at = action_kind(m.value() or b""), m.timestamp()[1]
        if kind == "SEND_REQUEST":
            self.last_parked = max(at, self.last_parked or at)
        elif kind == "RUN_ESCALATION":
            self.first_escalated = min(at, self.first_escalated or at)

    def first_escalation_after_last_park_s(self) -> float | None:
        """Negative when escalations began before the last wait was parked."""
        if self.last_parked is None or self.first_escalated is None:
            return None
        return round((self.first_escalated - self.last_parked) / 1000, 2)


def storm_actions(conf: dict[str, str], topic: str, partitions: int,
                  record: dict[str, Any]) -> None:
    """A storm run's actions by kind, and its first escalation after the last park."""
    times = ActionTimes()
    _, record["actions_by_kind"] = topic_records(conf, topic, partitions, action_kind,
                                                 each=times)
    record["first_escalation_after_last_park_s"] = times.first_escalation_after_last_park_s()


__all__ = ["AVRO_MAGIC", "ActionTimes", "action_kind", "judge_open_run", "storm_actions",
           "wrong_by_broker_clock"]
