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

from typing import TYPE_CHECKING

from streams.lazy import exports

# What mypy sees: each module's public names, of which `__all__` exports the
# package's.  At run time each is imported on first use (below).
# ruff: noqa: F403, F405 (those star imports, and the names of __all__ they give)
if TYPE_CHECKING:
    from streams.client.client import *
    from streams.client.consumer import *
    from streams.client.errors import *
    from streams.client.records import *
    from streams.client.waits import *

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

# Each public name is imported from its module when first asked for (`streams.lazy`):
# the CLI's `status` reads only `streams.client._console` and must not pay for
# confluent-kafka, fastavro and the decision core (0.3 s of imports).  Lightest first.
__getattr__, __dir__ = exports(__name__, ("errors", "waits", "records", "consumer", "client"),
                               __all__)
