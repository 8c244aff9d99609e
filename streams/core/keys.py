"""What a wait key may be: one rule, checked wherever a key enters xwait.

A wait key is the Kafka record key of every record of the wait, as UTF-8
bytes.  It may hold any character but NUL (the worker's state separates keys
with it) and ``~`` in a wait key proper (``WAITKEY~PARTY`` names a party;
the SDK checks that), and it is at most ``MAX_KEY_BYTES`` bytes long.

Checked by the processor at its input (``streams/processor/records.py``: a
record whose key breaks the rule is rejected ``invalid_key``, with the
reason in the detail), by the SDK and the CLI before anything is sent (an
``InvalidRequest``, exit 2), and by the console's HTTP API (400), so that
every key the input accepts can also be read and commanded over HTTP.

Imports nothing, so the CLI's quick commands (`status`) can use it.
"""

from __future__ import annotations

__all__ = ["MAX_KEY_BYTES", "key_problem"]

MAX_KEY_BYTES = 1024
"""The longest wait key, in UTF-8 bytes.

Why 1024: every key the input accepts must also reach the console's HTTP
API, whose server (aiohttp, under faust's web driver) refuses a request line
over 8190 bytes with a 400 and a traceback in the worker's log.  A key
travels percent-encoded, up to three characters per byte, and a list request
can carry it twice (the ``key`` filter and the ``after`` cursor): 2 x 3 x
1024 bytes plus the rest of the line stays under 8190 with room to spare,
without reconfiguring faust's web server.  Kafka would take far longer keys,
but a key is copied into every record, row and index entry of its wait; real
keys (UUIDs, order numbers, URLs) are tens to a few hundred bytes.  Raising
it means raising aiohttp's ``max_line_size`` first."""


def key_problem(key: bytes) -> str | None:
    """Why no wait can have ``key`` (its UTF-8 bytes), as an "Expected ..., but ..." text;
    None when it is a wait key."""
    if len(key) > MAX_KEY_BYTES:
        return (f"Expected a wait key of at most {MAX_KEY_BYTES} bytes (UTF-8), but the key "
                f"has {len(key)} bytes")
    if b"\x00" in key:
        return "Expected a wait key without NUL characters, but the key has one"
    return None
