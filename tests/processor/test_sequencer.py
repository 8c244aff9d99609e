"""The sequencer releases a partition's records in the broker's time order, and only then."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.processor.model import InputRecord, Role
from streams.processor.sequencer import CLOCKED_ROLES, Sequencer

P = 3


def rec(role: Role, offset: int, ts: int, partition: int = P) -> InputRecord:
    return InputRecord(role, f"x.{role.value}", partition, offset, b"k", b"v", ts, True)


def fresh() -> Sequencer:
    seq = Sequencer()
    seq.assign(P, {r: 0 for r in Role}, stream_time=0)
    return seq


def a_reply_newer_than_the_last_probe() -> Sequencer:
    """Every topic probed empty at 1 s, then a reply of 5 s taken."""
    seq = fresh()
    seq.probed(1_000, [(r, P, 0) for r in CLOCKED_ROLES])
    seq.add(rec(Role.REPLIES, 0, 5_000), wall_ms=0)
    return seq


def test_a_later_command_waits_for_an_earlier_reply_still_on_its_way() -> None:
    seq = fresh()
    seq.add(rec(Role.COMMANDS, 0, 18_000), wall_ms=0)
    seq.probed(20_000, [(Role.REQUESTS, P, 0), (Role.REPLIES, P, 1), (Role.COMMANDS, P, 1)])
    assert seq.release(100) == []  # the replies topic has a record not taken yet
    assert seq.behind() == [(Role.REPLIES, P, 0, 1)]
    seq.add(rec(Role.REPLIES, 0, 2_000), wall_ms=0)
    assert [(r.role, r.timestamp) for r in seq.release(100)] == [
        (Role.REPLIES, 2_000), (Role.COMMANDS, 18_000)]
    assert seq.time(P) == 20_000


def test_a_record_waits_for_a_probe_that_proves_the_other_topics_have_nothing_older() -> None:
    seq = a_reply_newer_than_the_last_probe()
    assert seq.release(100) == []
    assert seq.wants_probe()
    seq.probed(5_000, [(Role.REQUESTS, P, 0), (Role.REPLIES, P, 1), (Role.COMMANDS, P, 0)])
    assert len(seq.release(100)) == 1


def test_the_probe_a_record_waits_for_asks_only_the_topics_that_hold_it_back() -> None:
    seq = a_reply_newer_than_the_last_probe()
    seq.add(rec(Role.REQUESTS, 0, 6_000), wall_ms=0)  # holds a later record: not waited for
    assert seq.release(100) == []
    assert seq.probe_targets() == [(Role.COMMANDS, P)]
    seq.probed(7_000, [(Role.COMMANDS, P, 0)])  # only that topic, as the applier asks
    assert [r.role for r in seq.release(100)] == [Role.REPLIES]
    # The replies topic, now empty, may still hold a record older than the request's.
    assert seq.probe_targets() == [(Role.REPLIES, P)]
    seq.probed(7_000, [(Role.REPLIES, P, 1)])
    assert [r.role for r in seq.release(100)] == [Role.REQUESTS]
    assert seq.probe_targets() == [] and not seq.wants_probe()


def test_offsets_that_hold_no_records_stop_holding_the_others_back_once_skipped() -> None:
    seq = fresh()
    seq.add(rec(Role.REPLIES, 0, 5_000), wall_ms=0)
    seq.probed(6_000, [(Role.REQUESTS, P, 2), (Role.REPLIES, P, 1), (Role.COMMANDS, P, 0)])
    assert seq.release(100) == []  # requests 0..1 were not taken: markers of a transaction?
    seq.skipped(Role.REQUESTS, P, 2)
    assert len(seq.release(100)) == 1


def test_timer_records_are_released_at_once_and_a_producers_clock_cannot_hold_back() -> None:
    seq = fresh()
    seq.add(InputRecord(Role.TIMERS, "x.timers", P, 0, b"k", b"v", 99, True), wall_ms=0)
    hostile = InputRecord(Role.REPLIES, "x.replies", P, 0, b"k", b"v", 10**15, False)
    seq.add(hostile, wall_ms=7_000)  # CreateTime in the far future: ordered by wall time
    seq.probed(8_000, [(Role.REQUESTS, P, 0), (Role.REPLIES, P, 1), (Role.COMMANDS, P, 0)])
    assert [r.role for r in seq.release(100)] == [Role.TIMERS, Role.REPLIES]


topic_times = st.lists(st.integers(0, 50), max_size=12).map(
    lambda gaps: [sum(gaps[: i + 1]) for i in range(len(gaps))])
world = st.tuples(st.tuples(topic_times, topic_times, topic_times),
                  st.lists(st.tuples(st.integers(0, 2), st.booleans(), st.integers(0, 700)),
                           max_size=80))


@settings(max_examples=300, deadline=None)
@given(world)
def test_nothing_is_released_before_an_older_record_and_everything_is_released_in_the_end(
    case: tuple[tuple[list[int], ...], list[tuple[int, bool, int]]],
) -> None:
    """Any interleaving of takes and probes: released records never overtake an older one."""
    times, steps = case
    topics = {role: [rec(role, i, t) for i, t in enumerate(ts)]
              for role, ts in zip(CLOCKED_ROLES, times, strict=True)}
    seq = fresh()
    taken = dict.fromkeys(CLOCKED_ROLES, 0)
    released: list[InputRecord] = []

    def probe(at: int) -> None:
        # The end offset seen at `at` counts every record appended before `at`.
        seq.probed(at, [(role, P, sum(1 for r in recs if r.timestamp is not None
                                      and r.timestamp < at)) for role, recs in topics.items()])

    for topic_i, is_probe, at in steps:
        if is_probe:
            probe(at)
        else:
            role = CLOCKED_ROLES[topic_i]
            if taken[role] < len(topics[role]):
                seq.add(topics[role][taken[role]], wall_ms=0)
                taken[role] += 1
        released += seq.release(1_000)
        for r in released:
            older = [o for recs in topics.values() for o in recs
                     if (o.timestamp or 0) < (r.timestamp or 0)]
            assert all(o in released for o in older), (r, older)
        assert all(o in released for recs in topics.values() for o in recs
                   if (o.timestamp or 0) < (seq.time(P) or 0)), "stream time counts only released"
    for role, recs in topics.items():
        for r in recs[taken[role]:]:
            seq.add(r, wall_ms=0)
    probe(10**6)
    released += seq.release(10_000)
    assert sorted(released, key=lambda r: (r.role, r.offset)) == sorted(
        (r for recs in topics.values() for r in recs), key=lambda r: (r.role, r.offset))
    for role in CLOCKED_ROLES:
        mine = [r.offset for r in released if r.role is role]
        assert mine == sorted(mine), "each topic's order is kept"


def test_records_put_back_come_out_again_first_and_in_order() -> None:
    seq = fresh()
    for i, ts in enumerate((1_000, 2_000, 3_000)):
        seq.add(rec(Role.REPLIES, i, ts), wall_ms=0)
    seq.probed(5_000, [(Role.REQUESTS, P, 0), (Role.REPLIES, P, 3), (Role.COMMANDS, P, 0)])
    first = seq.release(2)
    seq.unrelease(first)
    assert [r.offset for r in seq.release(100)] == [0, 1, 2]


def test_a_partition_waits_for_the_topic_whose_records_are_still_to_be_fetched() -> None:
    seq = fresh()
    for offset in range(3):
        seq.add(rec(Role.REQUESTS, offset, 1_000 + offset), wall_ms=0)
    seq.probed(2_000, [(Role.REQUESTS, P, 3), (Role.REPLIES, P, 5), (Role.COMMANDS, P, 0)])
    assert seq.release(100) == []
    assert seq.waiting_for(P) is Role.REPLIES  # five replies below the end, none taken
    seq.add(rec(Role.REPLIES, 0, 1_500), wall_ms=0)  # its first reply: after the requests
    assert seq.waiting_for(P) is None
    assert [r.role for r in seq.release(100)] == [Role.REQUESTS] * 3 + [Role.REPLIES]
    assert seq.waiting_for(P) is None  # nothing held: nothing waits


def test_a_topic_caught_up_as_of_an_older_probe_waits_for_a_probe_not_for_the_fetch() -> None:
    seq = a_reply_newer_than_the_last_probe()
    assert seq.release(100) == []
    assert seq.wants_probe()
    assert seq.waiting_for(P) is None  # nothing to fetch: pausing others would not help
    assert Sequencer().waiting_for(P) is None  # a partition not owned waits for nothing


def test_when_more_is_releasable_than_asked_every_partition_gets_its_share() -> None:
    """A batch takes at most so many records: with eight partitions each holding more than
    their share, the first partitions must not take it all while the last wait (after a
    broker restart partitions 6 and 7 fell 4 s behind that way, batch after batch)."""
    seq = Sequencer()
    for p in range(8):
        seq.assign(p, {r: 0 for r in Role}, stream_time=0)
        for i in range(100):
            seq.add(rec(Role.REPLIES, i, 1_000 + i, partition=p), wall_ms=0)
        seq.probed(5_000, [(Role.REQUESTS, p, 0), (Role.REPLIES, p, 100),
                           (Role.COMMANDS, p, 0)])

    first = seq.release(200)

    assert len(first) == 200
    assert {p: sum(1 for r in first if r.partition == p) for p in range(8)} == dict.fromkeys(
        range(8), 25)
    # A partition with less than its share leaves the rest to the others.
    for _ in range(3):
        seq.release(25 * 8)  # 75 more each: 0 left
    seq.add(rec(Role.REPLIES, 100, 2_000, partition=0), wall_ms=0)
    for p in range(1, 8):
        for i in range(100, 110):
            seq.add(rec(Role.REPLIES, i, 2_000 + i, partition=p), wall_ms=0)
    for p in range(8):
        seq.probed(6_000, [(Role.REQUESTS, p, 0), (Role.REPLIES, p, 111),
                           (Role.COMMANDS, p, 0)])
    second = seq.release(50)
    assert len(second) == 50
    assert sum(1 for r in second if r.partition == 0) == 1
    # Each partition's own order is kept.
    for p in range(8):
        mine = [r.offset for r in first + second if r.partition == p]
        assert mine == sorted(mine)
