"""Which fetched input records a worker applies: exactly the next one of each partition.

The worker owns its input positions (`streams.processor.positions`): on
every assignment it seeks each input partition to the position stored with
its state, and from then on applies a record only if it is the one expected
next.  A record below the expected offset was applied already (a re-delivery
after a seek, or a record buffered before a rebalance) and is dropped; a
record above it means the fetch skipped something, and the worker reads the
offsets in between itself before applying it (`Gap`) - unless the fetch
says it passed over them because they hold no records (transaction
markers), and they are few (`MARKERS_MAX`).  Records of
partitions it does not own (any more, or not yet) are dropped: after the
assignment completes they are fetched again from the stored position.

This is what makes "a record is never skipped" independent of the consumer
library's bookkeeping: faust-streaming 0.15 and aiokafka 0.14, killed while
behind, were seen resuming near the log end and committing offsets of
records never applied (issue 8; docs/guarantees.md, "The long crash runs").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from streams.processor.model import INPUT_ROLES, InputRecord, Role

MARKERS_MAX = 16
"""The most offsets without records the fetch is believed to have passed over.

A transaction's commit marker takes one offset after its records; a producer
that commits one input per transaction puts one between every two records.
Reading each such offset directly cost a consumer of its own (20-100 ms) per
record.  The fetch says which offsets it passed over (`check`'s `follows`,
`InputReader`'s passed ranges); a longer run than this - a whole aborted
batch, records removed by retention, or a fetch that lost a chunk - is read
directly as before, so the gate does not take the fetch's word for more.
"""


class Verdict(Enum):
    APPLY = "apply"
    DUPLICATE = "duplicate"  # below the expected offset: applied already
    NOT_OWNED = "not_owned"  # the partition is not (or not yet) this worker's
    GAP = "gap"  # above the expected offset: read what lies between first


@dataclass(frozen=True)
class Gap:
    """Offsets [start, stop) of `role`'s partition were not delivered before `stop`."""

    role: Role
    partition: int
    start: int
    stop: int


class InputGate:
    """The next expected offset of every owned input partition."""

    def __init__(self) -> None:
        self._expected: dict[tuple[Role, int], int] = {}
        self.epoch = 0  # bumped on every change of ownership

    def assign(self, partition: int, next_offsets: dict[Role, int]) -> None:
        """Own `partition` from these offsets on (every input role must be given)."""
        for role in INPUT_ROLES:
            self._expected[(role, partition)] = next_offsets[role]
        self.epoch += 1

    def revoke(self, partitions: set[int]) -> None:
        for key in [k for k in self._expected if k[1] in partitions]:
            del self._expected[key]
        self.epoch += 1

    def owned(self) -> set[int]:
        return {p for (_, p) in self._expected}

    def expected(self, role: Role, partition: int) -> int | None:
        return self._expected.get((role, partition))

    def check(self, role: Role, partition: int, offset: int,
              follows: int | None = None) -> Verdict:
        """Whether to apply the record at `offset`.

        `follows`, when the fetch knows it, is where the fetch was before this
        record: the offsets from there up to `offset` hold no records
        (transaction markers and aborted records, which a read_committed
        consumer passes over).  A record above the expected offset is then
        the next one, if the fetch was at or below the expected offset;
        otherwise what lies between is read directly (`Verdict.GAP`).
        """
        want = self._expected.get((role, partition))
        if want is None:
            return Verdict.NOT_OWNED
        if offset == want:
            return Verdict.APPLY
        if offset < want:
            return Verdict.DUPLICATE
        return Verdict.APPLY if self._passed_over(want, follows, offset) else Verdict.GAP

    def passed(self, role: Role, partition: int, start: int, stop: int) -> int:
        """The fetch passed over offsets [start, stop) without records: expect `stop` if
        that covers the expected offset and is believed (MARKERS_MAX).  How many
        expected offsets that passed (0: none, nothing changed)."""
        want = self._expected.get((role, partition))
        if want is None or want >= stop or not self._passed_over(want, start, stop):
            return 0
        self._expected[(role, partition)] = stop
        return stop - want

    @staticmethod
    def _passed_over(want: int, start: int | None, stop: int) -> bool:
        return start is not None and start <= want and stop - want <= MARKERS_MAX

    def gap(self, role: Role, partition: int, offset: int) -> Gap:
        want = self._expected[(role, partition)]
        return Gap(role, partition, want, offset)

    def read_directly(self, role: Role, partition: int, start: int, covered: int,
                      records: Sequence[InputRecord]) -> list[InputRecord] | None:
        """What to take of a direct read of offsets [start, covered): `records`, the
        records found there, from the expected offset on.

        None when the read began above the expected offset: taking it would
        pass over the offsets in between, never read.  That happens when the
        range was chosen from an older state (a read decided before a
        takeover, or while another taker moved on); the range is simply read
        again later.  The gate then expects `covered` (or the first record
        after the ones taken, if the caller takes them in turn).
        """
        want = self._expected.get((role, partition))
        if want is None or start > want:
            return None
        self.advance(role, partition, covered - 1)
        return [r for r in records if r.offset >= want]

    def advance(self, role: Role, partition: int, offset: int) -> None:
        """The record at `offset` is taken: expect the one after it."""
        key = (role, partition)
        if key in self._expected:
            self._expected[key] = max(self._expected[key], offset + 1)


__all__ = ["MARKERS_MAX", "Gap", "InputGate", "Verdict"]
