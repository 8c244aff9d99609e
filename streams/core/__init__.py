"""The pure decision core of xwait: ``decide(slot, event, now, definitions)``.

Imports nothing from faust, Kafka clients, rocksdict, fastavro or aiohttp (a
test enforces it), so every rule of the wait is tested here without a broker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streams.lazy import exports

# What mypy sees: each module's public names, of which `__all__` exports the
# package's.  At run time each is imported on first use (below).
# ruff: noqa: F403, F405 (those star imports, and the names of __all__ they give)
if TYPE_CHECKING:
    from streams.core.definition import *
    from streams.core.durations import *
    from streams.core.effects import *
    from streams.core.errors import *
    from streams.core.events import *
    from streams.core.rules import *
    from streams.core.state import *
    from streams.core.state_codec import *

# The package's public names, listed and tested (house style 9); alike with the
# modules' own __all__ (duplicates lists the pair with effects.py's), deliberately.
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

# Each name is imported from its module when first asked for (`streams.lazy`), so
# that `from streams.core.durations import ...` (the SDK, the CLI) does not load
# the decision function and jsonschema: 0.1-0.2 s of a CLI command's start-up.
# The processor asks for `decide` and gets the same object.  Lightest first.
__getattr__, __dir__ = exports(__name__, ("errors", "durations", "definition", "events",
                                          "effects", "state", "state_codec", "rules"), __all__)
