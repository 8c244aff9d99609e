"""Which input topic-partitions to fetch: those a partition waits for, not those it holds.

The worker's reader fetches every owned input topic-partition into one
queue, in turns of up to a megabyte each (`reader.FETCH`), and hands the
records over in that order.  The sequencer releases a partition's records
only in the broker's time order across its topics, so a topic still to be
fetched holds back everything its partition has taken, however much that
is - while the queue delivers more of the topics that are only held.

So while any partition waits for the fetch of one of its topics
(`Sequencer.waiting_for`), the topic-partitions holding enough to go on
with pause: the fetch then serves the ones that are waited for, and what is
held stops growing.  Besides, a topic-partition pauses when it holds
`HELD_MAX` records, which bounds the memory a backlog takes (about 1 KB a
record).  A pause costs little: the reader fetches the partition again from
where it stopped.  A topic that holds nothing is never paused, so the one a
partition waits for always fetches.
"""

from __future__ import annotations

from collections.abc import Iterable

from streams.processor.model import Role
from streams.processor.sequencer import CLOCKED_ROLES, Sequencer

HELD_MAX = 5000
"""Records held for one input topic-partition before its fetching pauses, whatever else."""

HELD_ENOUGH = 500
"""Records held for one topic-partition that let it pause while another one is waited for:
a few tenths of a second of the worker's work, so that the half it resumes at still covers
the time the fetch takes to deliver again."""


def waited_for(sequencer: Sequencer, partitions: Iterable[int]) -> bool:
    """Whether any of `partitions` waits for records of one of its topics still to be fetched."""
    return any(sequencer.waiting_for(p) is not None for p in partitions)


def should_pause(held: int, role: Role, waiting: bool) -> bool:
    """Whether a topic-partition holding `held` records should stop fetching for now."""
    return held >= HELD_MAX or (waiting and role in CLOCKED_ROLES and held >= HELD_ENOUGH)


def may_resume(held: int, role: Role, waiting: bool) -> bool:
    """Whether a paused topic-partition holding `held` records may fetch again.

    At half the threshold that paused it, so that it does not flap with every record released.
    """
    if held >= HELD_MAX // 2:
        return False
    return not (waiting and role in CLOCKED_ROLES and held >= HELD_ENOUGH // 2)


__all__ = ["HELD_ENOUGH", "HELD_MAX", "may_resume", "should_pause", "waited_for"]
