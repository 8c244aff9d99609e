"""Which input topic-partitions to fetch: those a partition waits for, not those it holds.

The worker's reader fetches every owned input topic-partition into one
queue, in turns of up to a megabyte each (`Tuning.input_fetch`), and hands the
records over in that order.  The sequencer releases a partition's records
only in the broker's time order across its topics, so a topic still to be
fetched holds back everything its partition has taken, however much that
is - while the queue delivers more of the topics that are only held.

So while any partition waits for the fetch of one of its topics
(`Sequencer.waiting_for`), the topic-partitions holding enough to go on
with pause: the fetch then serves the ones that are waited for, and what is
held stops growing.  Besides, a topic-partition pauses when it holds
`Tuning.held_max` records, which bounds the memory a backlog takes (about 1 KB a
record).  A pause costs little: the reader fetches the partition again from
where it stopped.  A topic that holds nothing is never paused, so the one a
partition waits for always fetches.
"""

from __future__ import annotations

from collections.abc import Iterable

from streams.processor.model import Role
from streams.processor.sequencer import CLOCKED_ROLES, Sequencer
from streams.processor.tuning import TUNING, Tuning


def waited_for(sequencer: Sequencer, partitions: Iterable[int]) -> bool:
    """Whether any of `partitions` waits for records of one of its topics still to be fetched."""
    return any(sequencer.waiting_for(p) is not None for p in partitions)


def should_pause(held: int, role: Role, waiting: bool, tuning: Tuning = TUNING) -> bool:
    """Whether a topic-partition holding `held` records should stop fetching for now:
    `Tuning.held_max` whatever else, `held_enough` while another topic is waited for."""
    return held >= tuning.held_max or (waiting and role in CLOCKED_ROLES
                                       and held >= tuning.held_enough)


def may_resume(held: int, role: Role, waiting: bool, tuning: Tuning = TUNING) -> bool:
    """Whether a paused topic-partition holding `held` records may fetch again.

    At half the threshold that paused it, so that it does not flap with every record released.
    """
    if held >= tuning.held_max // 2:
        return False
    return not (waiting and role in CLOCKED_ROLES and held >= tuning.held_enough // 2)


__all__ = ["may_resume", "should_pause", "waited_for"]
