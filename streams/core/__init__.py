"""The pure decision core of xwait: ``decide(slot, event, now, definitions)``.

Imports nothing from faust, Kafka clients, rocksdict, fastavro or aiohttp (a
test enforces it), so every rule of the wait is tested here without a broker.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streams.core.definition import (
        DEFAULT_EARLY_REPLY_TTL_MS,
        DEFAULT_RETENTION_MS,
        DefinitionSet,
        EscalationLevel,
        InvalidReplyRoute,
        ReminderPolicy,
        SendFailurePolicy,
        SendFailureRoute,
        Stage,
        Variant,
        WaitDefinition,
        definition_for,
    )
    from streams.core.durations import (
        format_span_ms,
        format_utc_ms,
        parse_cycle_ms,
        parse_duration_ms,
        parse_signed_duration_ms,
    )
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
        ActionResult,
        Command,
        CommandKind,
        Event,
        Origin,
        Reply,
        ResultStatus,
        ReviewOutcome,
        StartWait,
        TimerFired,
        TimerKind,
        split_correlation_key,
    )
    from streams.core.rules import (
        MAX_CATCH_UP,
        OPERATOR_CHANNEL,
        Decision,
        action_id,
        catch_up,
        decide,
        outcome_id,
    )
    from streams.core.state import (
        KEPT_PAYLOAD_BYTES,
        ArmedTimer,
        HeldCommand,
        HeldReply,
        HeldResult,
        Send,
        SendState,
        Slot,
        Suspension,
        Wait,
        WaitStatus,
    )
    from streams.core.state_codec import STATE_VERSION, StateDecodeError, decode_slot, encode_slot

# Each name is imported from its module when first asked for (PEP 562), so
# that `from streams.core.durations import ...` (the SDK, the CLI) does not
# load the decision function and jsonschema: 0.1-0.2 s of a CLI command's
# start-up.  The processor asks for `decide` and gets the same object.
_HOME = {
    "MAX_CATCH_UP": "rules", "OPERATOR_CHANNEL": "rules", "Decision": "rules",
    "action_id": "rules", "catch_up": "rules", "decide": "rules", "outcome_id": "rules",
    "DEFAULT_EARLY_REPLY_TTL_MS": "definition", "DEFAULT_RETENTION_MS": "definition",
    "EscalationLevel": "definition", "InvalidReplyRoute": "definition",
    "ReminderPolicy": "definition", "Stage": "definition", "Variant": "definition",
    "WaitDefinition": "definition", "DefinitionSet": "definition",
    "SendFailurePolicy": "definition", "SendFailureRoute": "definition",
    "definition_for": "definition",
    "format_span_ms": "durations", "format_utc_ms": "durations", "parse_cycle_ms": "durations",
    "parse_duration_ms": "durations", "parse_signed_duration_ms": "durations",
    "ActionKind": "effects", "ArmTimer": "effects", "BufferEarlyCommand": "effects",
    "BufferEarlyReply": "effects", "DisarmTimer": "effects", "Discard": "effects",
    "DiscardReason": "effects", "Effect": "effects", "EmitAction": "effects",
    "EmitOutcome": "effects", "OutcomeKind": "effects", "OutcomeReason": "effects",
    "Purge": "effects", "Reject": "effects", "RejectReason": "effects", "TraceEntry": "effects",
    "DefinitionError": "errors", "XwaitError": "errors",
    "PARTY_SEPARATOR": "events", "Command": "events", "CommandKind": "events",
    "Event": "events", "Origin": "events", "Reply": "events", "ReviewOutcome": "events",
    "StartWait": "events", "TimerFired": "events", "TimerKind": "events",
    "split_correlation_key": "events", "ActionResult": "events", "ResultStatus": "events",
    "KEPT_PAYLOAD_BYTES": "state", "ArmedTimer": "state", "HeldCommand": "state",
    "HeldReply": "state", "Slot": "state", "Suspension": "state", "Wait": "state",
    "WaitStatus": "state", "HeldResult": "state", "Send": "state", "SendState": "state",
    "STATE_VERSION": "state_codec", "StateDecodeError": "state_codec",
    "decode_slot": "state_codec", "encode_slot": "state_codec",
}


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"streams.core.{module}"), name)
    globals()[name] = value  # asked once
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])


__all__ = [
    "DEFAULT_EARLY_REPLY_TTL_MS",
    "DEFAULT_RETENTION_MS",
    "KEPT_PAYLOAD_BYTES",
    "MAX_CATCH_UP",
    "OPERATOR_CHANNEL",
    "PARTY_SEPARATOR",
    "STATE_VERSION",
    "ActionKind",
    "ActionResult",
    "ArmTimer",
    "ArmedTimer",
    "BufferEarlyCommand",
    "BufferEarlyReply",
    "Command",
    "CommandKind",
    "Decision",
    "DefinitionError",
    "DefinitionSet",
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
    "HeldResult",
    "InvalidReplyRoute",
    "OutcomeKind",
    "Origin",
    "OutcomeReason",
    "Purge",
    "Reject",
    "RejectReason",
    "ReminderPolicy",
    "Reply",
    "ResultStatus",
    "ReviewOutcome",
    "Send",
    "SendFailurePolicy",
    "SendFailureRoute",
    "SendState",
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
    "catch_up",
    "decide",
    "decode_slot",
    "definition_for",
    "encode_slot",
    "format_span_ms",
    "format_utc_ms",
    "outcome_id",
    "parse_cycle_ms",
    "parse_duration_ms",
    "parse_signed_duration_ms",
    "split_correlation_key",
]
