"""Topic prefixes made by this test session, so its topics can be deleted at the end.

Every test that creates topics takes its prefix from `unique_prefix`; the
session's broker fixture deletes the topics under these prefixes when the
session ends.  Without that, a broker reused across sessions piles up
thousands of partitions and starts and rebalances ever more slowly.
"""

from __future__ import annotations

import uuid

_made: list[str] = []


def unique_prefix(letter: str) -> str:
    """A topic prefix no other test uses: `letter` plus ten hex digits."""
    prefix = f"{letter}{uuid.uuid4().hex[:10]}"
    _made.append(prefix)
    return prefix


def made() -> tuple[str, ...]:
    return tuple(_made)
