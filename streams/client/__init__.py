"""xwait's Python SDK: start waits, reply, command, and read outcomes, on confluent-kafka.

    >>> from streams.client import XwaitClient                       # doctest: +SKIP
    >>> with XwaitClient() as xw:                                    # doctest: +SKIP
    ...     key = xw.start_wait("expense-approval", payload={"amount": 120})
    ...     xw.reply(key, {"decision": "approved"}, channel="portal")
    ...     outcome = xw.result(key, timeout=30)      # this wait's outcome, nobody else's
    >>> with XwaitClient() as xw, xw.subscribe("outcomes", group_id="billing") as outcomes:
    ...     for outcome in outcomes:                                 # doctest: +SKIP
    ...         print(outcome.correlation_key, outcome.outcome, outcome.reason)

Settings come from the ``XWAIT_*`` environment (``streams.config``). Every
argument is checked against the wait definitions before anything is
produced; every record produced is confirmed by Kafka or reported in a
:class:`DeliveryFailed`. These names are the whole public surface; anything
else under ``streams.client`` may change.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streams.client.client import XwaitClient
    from streams.client.consumer import XwaitConsumer
    from streams.client.errors import (
        ClientError,
        DeliveryFailed,
        InvalidRequest,
        NoSuchWait,
        ReceiptTimeout,
        ResultTimeout,
        TopicMissing,
        UndecodableOutput,
        UnknownChannel,
        UnknownDefinition,
        UnknownVersion,
    )
    from streams.client.records import (
        Action,
        ActionKind,
        Outcome,
        OutcomeKind,
        Receipt,
        Rejected,
        TraceEntry,
        Verdict,
    )
    from streams.client.waits import WaitKey, WaitSpec, new_correlation_key
    from streams.errors import KafkaUnavailable

# Each public name is imported from its module when first asked for (PEP 562):
# the CLI's `status` reads only `streams.client._console` and must not pay
# for confluent-kafka, fastavro and the decision core (0.3 s of imports).
_HOME = {
    "WaitKey": "waits", "WaitSpec": "waits", "XwaitClient": "client",
    "new_correlation_key": "waits",
    "XwaitConsumer": "consumer",
    "ClientError": "errors", "DeliveryFailed": "errors", "InvalidRequest": "errors",
    "NoSuchWait": "errors", "ReceiptTimeout": "errors", "ResultTimeout": "errors",
    "TopicMissing": "errors",
    "UndecodableOutput": "errors", "UnknownChannel": "errors", "UnknownDefinition": "errors",
    "UnknownVersion": "errors",
    "Action": "records", "ActionKind": "records", "Outcome": "records",
    "OutcomeKind": "records", "Receipt": "records", "Rejected": "records",
    "TraceEntry": "records", "Verdict": "records",
}


# Alike with streams/core/__init__.py's lazy attributes (duplicates lists the pair),
# deliberately: each package resolves its own names; the core may import no SDK module.
def __getattr__(name: str) -> Any:
    if name == "KafkaUnavailable":
        from streams.errors import KafkaUnavailable

        return KafkaUnavailable
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"streams.client.{home}"), name)
    globals()[name] = value  # asked once
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])


__all__ = [
    "Action",
    "ActionKind",
    "ClientError",
    "DeliveryFailed",
    "InvalidRequest",
    "KafkaUnavailable",
    "NoSuchWait",
    "Outcome",
    "OutcomeKind",
    "Receipt",
    "ReceiptTimeout",
    "Rejected",
    "ResultTimeout",
    "TopicMissing",
    "TraceEntry",
    "UndecodableOutput",
    "UnknownChannel",
    "UnknownDefinition",
    "UnknownVersion",
    "Verdict",
    "WaitKey",
    "WaitSpec",
    "XwaitClient",
    "XwaitConsumer",
    "new_correlation_key",
]
