"""The pure decision core of xwait: ``decide(slot, event, now, definitions)``.

Imports nothing from faust, Kafka clients, rocksdict, fastavro or aiohttp (a
test enforces it), so every rule of the wait is tested here without a broker.
"""

from __future__ import annotations

from streams.core.decide import OPERATOR_CHANNEL, Decision, action_id, decide, outcome_id
from streams.core.definition import (
    DEFAULT_EARLY_REPLY_TTL_MS,
    DEFAULT_RETENTION_MS,
    EscalationLevel,
    InvalidReplyRoute,
    ReminderPolicy,
    Stage,
    Variant,
    WaitDefinition,
)
from streams.core.durations import parse_cycle_ms, parse_duration_ms
from streams.core.effects import (
    ActionKind,
    ArmTimer,
    BufferEarlyCommand,
    BufferEarlyReply,
    DisarmTimer,
    Discard,
    DiscardReason,
    Effect,
    EmitAction,
    EmitOutcome,
    OutcomeKind,
    OutcomeReason,
    Purge,
    Reject,
    RejectReason,
    TraceEntry,
)
from streams.core.errors import DefinitionError, XwaitError
from streams.core.events import (
    PARTY_SEPARATOR,
    Command,
    CommandKind,
    Event,
    Reply,
    ReviewOutcome,
    StartWait,
    TimerFired,
    TimerKind,
    split_correlation_key,
)
from streams.core.state import (
    ArmedTimer,
    HeldCommand,
    HeldReply,
    Slot,
    Suspension,
    Wait,
    WaitStatus,
)
from streams.core.state_codec import STATE_VERSION, StateDecodeError, decode_slot, encode_slot

__all__ = [
    "DEFAULT_EARLY_REPLY_TTL_MS",
    "DEFAULT_RETENTION_MS",
    "OPERATOR_CHANNEL",
    "PARTY_SEPARATOR",
    "STATE_VERSION",
    "ActionKind",
    "ArmTimer",
    "ArmedTimer",
    "BufferEarlyCommand",
    "BufferEarlyReply",
    "Command",
    "CommandKind",
    "Decision",
    "DefinitionError",
    "Discard",
    "DiscardReason",
    "DisarmTimer",
    "Effect",
    "EmitAction",
    "EmitOutcome",
    "EscalationLevel",
    "Event",
    "HeldCommand",
    "HeldReply",
    "InvalidReplyRoute",
    "OutcomeKind",
    "OutcomeReason",
    "Purge",
    "Reject",
    "RejectReason",
    "ReminderPolicy",
    "Reply",
    "ReviewOutcome",
    "Slot",
    "Stage",
    "StartWait",
    "StateDecodeError",
    "Suspension",
    "TimerFired",
    "TimerKind",
    "TraceEntry",
    "Variant",
    "Wait",
    "WaitDefinition",
    "WaitStatus",
    "XwaitError",
    "action_id",
    "decide",
    "decode_slot",
    "encode_slot",
    "outcome_id",
    "parse_cycle_ms",
    "parse_duration_ms",
    "split_correlation_key",
]
