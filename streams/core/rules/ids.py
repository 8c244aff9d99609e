"""Outcome and action ids: deterministic, so consumers de-duplicate what a crash repeats.

Part of the contract: fixed forever (a test checks them against ``uuid.uuid5``).
"""

from __future__ import annotations

import hashlib
import uuid

from streams.core.effects import (
    ActionKind,
)

_ID_NAMESPACE = uuid.UUID("5f0c1d2e-8a57-4c1b-9a7e-3b6d2f0e9c41")
"""Fixed forever: changing it changes every outcome and action id."""


_ID_PREFIX = _ID_NAMESPACE.bytes


# The variant digit of an id: the hex digit with its two high bits set to 10.
_VARIANT_DIGIT = {d: "89ab"[int(d, 16) & 0x3] for d in "0123456789abcdef"}


def _uuid5(name: str) -> str:
    """``str(uuid.uuid5(_ID_NAMESPACE, name))``, from the hex digest: no UUID object, no bytes copy.

    Ids are part of the contract (consumers de-duplicate by them): a test
    checks this against ``uuid.uuid5`` for any name.
    """
    h = hashlib.sha1(_ID_PREFIX + name.encode(), usedforsecurity=False).hexdigest()
    return f"{h[:8]}-{h[8:12]}-5{h[13:16]}-{_VARIANT_DIGIT[h[16]]}{h[17:20]}-{h[20:32]}"


def outcome_id(wait_key: str, parked_at: int) -> str:
    """Same wait, same id (re-processing is idempotent); a key re-used after purge
    parks at another time and so gets a new id."""
    return _uuid5(f"outcome\x1f{wait_key}\x1f{parked_at}")


def action_id(
    wait_key: str,
    parked_at: int,
    action: ActionKind,
    stage: int,
    level: int,
    party: str | None,
    attempt: int,
    send_attempt: int = 1,
) -> str:
    """Deterministic, so a consumer can de-duplicate actions re-sent after a crash.

    A send attempt after the first (a retry after a failed delivery, rule 12)
    is another action with an id of its own; the first keeps the id actions
    had before retries existed.
    """
    parts = ["action", wait_key, str(parked_at), action.value, str(stage), str(level),
             party or "", str(attempt)]
    if send_attempt != 1:
        parts.append(f"send{send_attempt}")
    return _uuid5("\x1f".join(parts))
