"""The timer index emits exactly the armed timers that are due, earliest first."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.timers.index import DueTimer, TimerIndex


def test_a_due_timer_is_emitted_and_a_timer_not_yet_due_is_not() -> None:
    index = TimerIndex()
    index.arm(0, "w1", "deadline", due_at=1_000, generation=1)
    index.arm(0, "w2", "deadline", due_at=5_000, generation=1)
    assert index.pop_due({0: 2_000}, limit=10) == [
        DueTimer(0, "w1", "deadline", 1_000, 1)
    ]


def test_a_disarmed_timer_is_never_emitted() -> None:
    index = TimerIndex()
    index.arm(0, "w1", "reminder", due_at=1_000, generation=1)
    index.disarm(0, "w1", "reminder")
    assert index.pop_due({0: 10_000}, limit=10) == []
    assert len(index) == 0


def test_rearming_replaces_the_old_generation() -> None:
    index = TimerIndex()
    index.arm(0, "w1", "reminder", due_at=1_000, generation=1)
    index.arm(0, "w1", "reminder", due_at=3_000, generation=2)
    assert index.pop_due({0: 2_000}, limit=10) == []
    assert index.pop_due({0: 3_000}, limit=10) == [
        DueTimer(0, "w1", "reminder", 3_000, 2)
    ]


def test_an_emitted_timer_is_not_emitted_again_until_it_is_requeued() -> None:
    index = TimerIndex()
    index.arm(3, "w1", "deadline", due_at=1_000, generation=7)
    (timer,) = index.pop_due({3: 1_000}, limit=10)
    assert index.pop_due({3: 10**12}, limit=10) == []  # however long its record takes
    index.requeue(timer)  # its delivery failed, or the processor found it not yet due
    assert index.pop_due({3: 1_000}, limit=10) == [DueTimer(3, "w1", "deadline", 1_000, 7)]


def test_requeueing_a_timer_rearmed_meanwhile_changes_nothing() -> None:
    index = TimerIndex()
    index.arm(0, "w1", "reminder", due_at=1_000, generation=1)
    (old,) = index.pop_due({0: 1_000}, limit=10)
    index.arm(0, "w1", "reminder", due_at=2_000, generation=2)
    index.requeue(old)
    assert index.pop_due({0: 5_000}, limit=10) == [DueTimer(0, "w1", "reminder", 2_000, 2)]


def test_each_partition_is_emitted_by_its_own_time() -> None:
    index = TimerIndex()
    index.arm(0, "behind", "deadline", due_at=1_000, generation=1)
    index.arm(1, "caught-up", "deadline", due_at=1_000, generation=1)
    assert index.pop_due({0: 999, 1: 1_000}, limit=10) == [
        DueTimer(1, "caught-up", "deadline", 1_000, 1)]


def test_only_owned_partitions_are_emitted_and_the_batch_is_bounded() -> None:
    index = TimerIndex()
    for i in range(10):
        index.arm(i % 2, f"w{i}", "deadline", due_at=100 + i, generation=1)
    batch = index.pop_due({1: 1_000}, limit=3)
    assert [t.wait_key for t in batch] == ["w1", "w3", "w5"]
    assert index.pop_due({1: 1_000}, limit=10)[0].wait_key == "w7"


def test_count_due_counts_armed_timers_due_in_the_given_partitions() -> None:
    index = TimerIndex()
    index.arm(0, "a", "deadline", 100, 1)
    index.arm(0, "b", "deadline", 300, 2)
    index.arm(1, "c", "reminder", 50, 3)
    index.arm(0, "a", "deadline", 400, 4)  # re-armed later: no longer due at 200
    assert index.count_due(200, [0, 1]) == 1
    assert index.count_due(300, [0]) == 1
    assert index.count_due(1000, [0, 1, 7]) == 3
    index.disarm(1, "c", "reminder")
    assert index.count_due(1000, [0, 1]) == 2


def test_rebuilding_a_partition_replaces_what_it_held() -> None:
    index = TimerIndex()
    index.arm(0, "old", "deadline", due_at=1, generation=1)
    index.replace_partition(0, [DueTimer(0, "new", "poll", 5, 2)])
    assert index.pop_due({0: 10}, limit=10) == [DueTimer(0, "new", "poll", 5, 2)]


ops = st.lists(
    st.one_of(
        st.tuples(st.just("arm"), st.integers(0, 2), st.integers(0, 9),
                  st.sampled_from(["reminder", "deadline"]), st.integers(0, 1_000)),
        st.tuples(st.just("disarm"), st.integers(0, 2), st.integers(0, 9),
                  st.sampled_from(["reminder", "deadline"]), st.just(0)),
        st.tuples(st.just("pop"), st.just(0), st.just(0), st.just(""), st.integers(0, 1_000)),
    ),
    max_size=200,
)


@settings(max_examples=300, deadline=None)
@given(ops)
def test_the_index_agrees_with_a_naive_model(script: list[tuple[str, int, int, str, int]]) -> None:
    index = TimerIndex()
    model: dict[tuple[int, str, str], tuple[int, int]] = {}
    emitted: set[tuple[int, str, str, int, int]] = set()
    generation = 0
    for op, part, key_no, kind, t in script:
        key = f"w{key_no}"
        if op == "arm":
            generation += 1
            index.arm(part, key, kind, t, generation)
            model[(part, key, kind)] = (t, generation)
        elif op == "disarm":
            index.disarm(part, key, kind)
            model.pop((part, key, kind), None)
        else:
            got = index.pop_due({0: t, 1: t, 2: t}, limit=1_000)
            expected = sorted(
                (due, p, k, kd, g) for (p, k, kd), (due, g) in model.items()
                if due <= t and (p, k, kd, due, g) not in emitted
            )
            assert sorted((d.due_at, d.partition, d.wait_key, d.kind, d.generation)
                          for d in got) == expected
            assert [d.due_at for d in got] == sorted(d.due_at for d in got)
            emitted.update((d.partition, d.wait_key, d.kind, d.due_at, d.generation)
                           for d in got)
    assert len(index) == len(model)
