"""The flood bench's pure parts: the hostile mix, the accounting, the figures (no broker)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from streams import codec
from streams.codec import RecordType, UndecodableRecord
from streams.core.durations import parse_duration_ms
from streams.definitions import load_definitions
from streams.partitioning import partition_for
from streams.processor.model import Handled, InputRecord, Role, RowWrite
from streams.processor.records import RecordHandler
from streams.testing.flood import accounting, mix
from streams.testing.flood import run as flood_run
from tests.bench.loading import REPO, load_bench

flood_bench = load_bench("flood_bench")

NOW = 1_800_000_000_000
PARTITIONS = 8
EXACT = [mix.ExactTimer("deadline", 1, 3 * 86_400_000),
         mix.ExactTimer("reminder", 2, 86_400_000)]


def waits(n: int = 60, seed: int = 7) -> list[Any]:
    got: list[Any] = mix.parked_waits(seed, n, NOW - 5_000)
    return got


def plan(hostile: int = 1500, seed: int = 3, n_waits: int = 60, **kw: Any) -> list[Any]:
    got: list[Any] = mix.plan_flood(seed, hostile, waits(n_waits), PARTITIONS, NOW,
                                      exact=EXACT, **kw)
    return got


# -- the mix ------------------------------------------------------------------------------


def test_even_a_small_flood_holds_every_kind_on_every_input_topic_and_partition() -> None:
    got = plan(hostile=400)
    hostile = [p for p in got if p.fate is not mix.Fate.VALID]
    assert len(hostile) == 400
    assert {p.kind for p in hostile} == set(mix.KINDS)
    assert {p.role for p in hostile} == set(mix.INPUTS)
    assert {p.partition for p in hostile} == set(range(PARTITIONS))


def test_a_single_partition_flood_leaves_only_misrouting_out() -> None:
    got = mix.plan_flood(3, 300, waits(), 1, NOW)
    assert {p.kind for p in got if p.fate is not mix.Fate.VALID} == set(mix.KINDS) - {
        "misrouted"}


def test_the_same_seed_gives_the_same_flood_and_another_seed_another() -> None:
    def shape(records: Sequence[Any]) -> list[tuple[Any, ...]]:
        return [(p.kind, p.role, p.key, p.value, p.partition, p.compression) for p in records]

    assert shape(plan(seed=11)) == shape(plan(seed=11))
    assert shape(plan(seed=11)) != shape(plan(seed=12))


def test_a_valid_reply_follows_every_nth_hostile_record_once_per_parked_wait() -> None:
    got = plan(hostile=1000, n_waits=15, reply_every=50)
    parked = {w.key for w in waits(15)}
    valid = [p for p in got if p.fate is mix.Fate.VALID]
    # 1000 / 50 = 20 slots, but only 15 waits to reply to: each gets one.
    assert sorted(p.wait_key for p in valid) == sorted(parked)
    for p in valid:
        assert p.key == p.wait_key.encode()
        assert p.partition == partition_for(p.key, PARTITIONS)
        decoded = codec.decode(RecordType.REPLY, p.value)
        assert decoded["correlationKey"] == p.wait_key and decoded["channel"] == "portal"
    positions = [i for i, p in enumerate(got) if p.fate is mix.Fate.VALID]
    hostile_before = [sum(1 for p in got[:i] if p.fate is not mix.Fate.VALID)
                      for i in positions]
    assert hostile_before == [50 * (j + 1) for j in range(15)]


def test_hostile_records_aimed_at_waits_share_their_partitions() -> None:
    got = plan()
    aimed = [p for p in got if p.fate is not mix.Fate.VALID and p.wait_key and p.key]
    assert aimed
    assert all(p.partition == partition_for(p.key, PARTITIONS) for p in aimed)
    assert {p.wait_key for p in aimed} <= {w.key for w in waits()}


def test_a_share_is_compressed_with_every_codec_but_never_what_must_keep_its_order() -> None:
    got = plan(hostile=3000, compressed_fraction=0.2)
    hostile = [p for p in got if p.fate is not mix.Fate.VALID]
    by_codec = Counter(p.compression for p in hostile)
    assert set(by_codec) == {"none", *mix.COMPRESSIONS}
    assert 0.1 < 1 - by_codec["none"] / len(hostile) < 0.3
    fixed = {k for k, v in mix.KINDS.items() if not v.compressible}
    assert all(p.compression == "none" for p in got if p.kind in fixed | {"valid_reply"})
    assert all(p.compression == "none" for p in plan(compressed_fraction=0.0))


def test_a_repeated_reply_comes_after_the_reply_it_repeats() -> None:
    got = plan(hostile=3000)
    first_seen: dict[bytes | None, int] = {}
    repeats = 0
    for i, p in enumerate(got):
        if p.kind == "valid_reply":
            first_seen.setdefault(p.value, i)
        elif p.kind == "reply_repeat" and p.value in first_seen:
            repeats += 1
            assert first_seen[p.value] < i
    assert repeats


def test_the_bytes_of_the_undecodable_kinds_are_refused_by_the_codec() -> None:
    # Kinds whose value is fine but whose key or decoded kind is the fault are left out.
    value_faults = {k for k, v in mix.KINDS.items() if v.reasons == {"undecodable"}} - {
        "key_not_utf8", "timer_unknown_kind", "misrouted"}
    checked: Counter[str] = Counter()
    for p in plan(hostile=3000):
        if p.kind in value_faults:
            with pytest.raises(UndecodableRecord):
                codec.decode(mix.RECORD_TYPES[p.role], p.value)
            checked[p.kind] += 1
    assert set(checked) == value_faults


def test_a_key_mismatch_never_carries_its_own_wait_key_even_with_two_waits_to_pick() -> None:
    # With two parked waits, "another parked wait's key" is the claimed one half the time.
    mismatches = [p for p in plan(hostile=3000, n_waits=2) if p.kind == "key_mismatch"]
    assert len(mismatches) > 20
    for p in mismatches:
        claimed = codec.decode(mix.RECORD_TYPES[p.role], p.value)["correlationKey"]
        assert claimed.split("~")[0].encode() != p.key


def test_bad_deadlines_are_all_refused_by_the_duration_parser() -> None:
    for text in mix.BAD_DEADLINES:
        with pytest.raises(ValueError):
            parse_duration_ms(text)


# -- the mix through the processor, in process --------------------------------------------


class Store(dict[str, bytes]):
    """The waits table as the worker keeps it: rows by wait key (a hostile record has none)."""

    def apply(self, handled: Handled) -> None:
        key, row = handled.wait_key, handled.row
        if key is not None and row is RowWrite.DELETE:
            self.pop(key, None)
        elif key is not None and isinstance(row, bytes):
            self[key] = row


def rejected_reasons(handled: Handled) -> list[str]:
    return [str(codec.decode(RecordType.REJECTED, o.value)["reason"])
            for o in handled.out if o.role is Role.REJECTED]


def roles_out(handled: Handled, role: Role) -> list[dict[str, Any]]:
    rtype = {Role.OUTCOMES: RecordType.OUTCOME, Role.ACTIONS: RecordType.ACTION}[role]
    return [codec.decode(rtype, o.value) for o in handled.out if o.role is role]


def test_the_processor_refuses_or_ignores_every_hostile_record_as_its_kind_says() -> None:
    """Each record decided by the worker's own handler, in plan order, as the worker would
    (stream time = the record's time): only the valid replies end waits, each once; every
    hostile record gets its kind's fate, and none an internal_error."""
    definitions = load_definitions(REPO / "topology" / "waits")
    handler = RecordHandler(definitions, PARTITIONS)
    store = Store()
    parked = waits(40)
    offsets: Counter[tuple[str, int]] = Counter()

    def handle(role: str, key: bytes | None, value: bytes | None, partition: int,
               now: int) -> Handled:
        at = offsets[(role, partition)]
        offsets[(role, partition)] += 1
        rec = InputRecord(Role(role), f"x.{role}", partition, at, key, value, now, True)
        handled = handler.handle(rec, store.get, now, stream_time=now)
        store.apply(handled)
        return handled

    for w in parked:
        key = w.key.encode()
        handled = handle("requests", key, mix.start_request(w),
                         partition_for(key, PARTITIONS), NOW)
        assert [a["action"] for a in roles_out(handled, Role.ACTIONS)] == ["SEND_REQUEST"]
    outcomes: Counter[str] = Counter()
    fates: dict[str, Counter[str]] = {}
    for i, p in enumerate(mix.plan_flood(5, 2500, parked, PARTITIONS, NOW, reply_every=40,
                                           exact=EXACT)):
        now = NOW + 10 * (i + 1)
        handled = handle(p.role, p.key, p.value, p.partition, now)
        assert "rejected.internal_error" not in handled.counters, p
        ended = roles_out(handled, Role.OUTCOMES)
        for o in ended:
            outcomes[o["correlationKey"]] += 1
        if p.fate is mix.Fate.VALID:
            assert [(o["outcome"], o["reason"]) for o in ended] == [("RECEIVED", "reply_valid")]
            continue
        assert not ended and not roles_out(handled, Role.ACTIONS), p
        reasons = rejected_reasons(handled)
        seen = fates.setdefault(p.kind, Counter())
        if p.fate is mix.Fate.FORWARDED:
            assert handled.counters == ["misrouted"]
            (out,) = handled.out
            assert out.partition == partition_for(p.key, PARTITIONS) != p.partition
            reasons = rejected_reasons(handle(p.role, out.key, out.value, out.partition, now))
        if reasons:
            assert set(reasons) <= mix.KINDS[p.kind].reasons, (p.kind, reasons)
            assert p.fate is not mix.Fate.IGNORED and p.fate is not mix.Fate.HELD, p
            seen["rejected"] += 1
        elif p.fate is mix.Fate.HELD:
            assert handled.out == [] and p.key is not None and p.key.decode() in store
            seen["held"] += 1
        else:
            assert p.fate in (mix.Fate.IGNORED, mix.Fate.REJECTED_OR_IGNORED), p
            assert mix.IGNORE_COUNTER[p.kind] in handled.counters
            seen["ignored"] += 1
    replied = {p.wait_key for p in mix.plan_flood(5, 2500, parked, PARTITIONS, NOW,
                                                    reply_every=40, exact=EXACT)
               if p.fate is mix.Fate.VALID}
    assert dict(outcomes) == dict.fromkeys(replied, 1)
    assert set(fates) == set(mix.KINDS)
    assert fates["timer_forged_future"] == {"ignored": fates["timer_forged_future"].total()}
    assert fates["overflow_burst"]["held"] and fates["overflow_burst"]["rejected"]


# -- accounting -------------------------------------------------------------------------------


def rec(kind: str, fate: Any = None, key: bytes = b"k", role: str = "replies") -> Any:
    return mix.Planned(kind, fate or mix.KINDS.get(kind, mix.KINDS["random_bytes"]).fate,
                         role, key, b"v", 0)


def rej(reason: str, at: int = 100, key: bytes | None = b"k") -> Any:
    return accounting.Rejection(reason, at, key)


def test_every_record_with_its_rejection_or_ignore_counter_is_accounted_for() -> None:
    records = [rec("random_bytes"), rec("unmatched_reply"), rec("timer_forged_future"),
               rec("command_resume_parked"), rec("valid_reply", mix.Fate.VALID)]
    coords = [("replies", 0, i) for i in range(5)]
    rejections = {coords[0]: [rej("undecodable", 150)], coords[1]: [rej("unmatched", 900)]}
    got = accounting.account(records, coords, rejections,
                        {"timers.not_yet_due": 1, "discarded.not_suspended": 1})
    assert got["unaccounted"] == 0 and got["hostile"] == 4
    assert got["reasons"] == {"undecodable": 1, "unmatched": 1}
    assert got["ignored"] == 2
    assert got["last_immediate_rejection_ms"] == 150  # the held one came a TTL later
    assert got["last_rejection_ms"] == 900
    assert got["valid_replies_rejected"] == 0 and got["internal_errors"] == 0


def test_a_record_without_rejection_or_with_too_few_ignores_is_unaccounted() -> None:
    records = [rec("random_bytes"), rec("timer_forged_stale"), rec("timer_forged_stale")]
    coords = [("timers", 1, i) for i in range(3)]
    got = accounting.account(records, coords, {}, {"discarded.stale_timer": 1})
    assert got["unaccounted"] == 2
    assert got["unaccounted_by_kind"] == {"random_bytes": 1, "timer_forged_stale": 1}
    assert got["unaccounted_samples"][0]["kind"] == "random_bytes"
    assert got["ignore_counters"] == {"discarded.stale_timer": {"records": 2, "counter": 1}}


def test_an_undelivered_record_is_unaccounted_even_if_its_kind_may_be_ignored() -> None:
    got = accounting.account([rec("timer_forged_future")], [None], {}, {"timers.not_yet_due": 5})
    assert got["unaccounted"] == 1


def test_a_misrouted_record_is_found_by_its_key_where_it_was_forwarded() -> None:
    records = [rec("misrouted", key=b"m1"), rec("misrouted", key=b"m2")]
    coords = [("requests", 0, 0), ("requests", 1, 0)]
    forwarded_at = ("requests", 5, 0)  # no produced record is there
    got = accounting.account(records, coords, {forwarded_at: [rej("undecodable", key=b"m1")]}, {})
    assert got["by_kind"]["misrouted"] == {"produced": 2, "reasons": {"undecodable": 1},
                                           "ignored": 0, "unaccounted": 1}
    assert got["stray_rejections"] == 0


def test_internal_errors_unexpected_reasons_repeats_and_rejected_valid_replies_show() -> None:
    records = [rec("random_bytes"), rec("duplicate_request", role="requests"),
               rec("valid_reply", mix.Fate.VALID)]
    coords = [("replies", 0, 0), ("requests", 0, 0), ("replies", 0, 1)]
    rejections = {coords[0]: [rej("internal_error"), rej("internal_error")],
                  coords[1]: [rej("unknown_definition")], coords[2]: [rej("late")],
                  ("commands", 3, 3): [rej("unmatched", key=b"nobody")]}
    got = accounting.account(records, coords, rejections, {})
    assert got["internal_errors"] == 1
    assert got["duplicate_rejections"] == 1
    assert got["unexpected_reasons"] == {"duplicate_request": {"unknown_definition": 1},
                                         "random_bytes": {"internal_error": 1}}
    assert got["valid_replies_rejected"] == 1
    assert got["stray_rejections"] == 1


def test_outcomes_are_judged_received_once_for_replied_waits_and_none_for_the_rest() -> None:
    ok = accounting.judge_outcomes(["a", "b", "c"], ["a", "b"],
                              {"a": [("RECEIVED", "reply_valid")],
                               "b": [("RECEIVED", "reply_valid")]})
    assert ok["ok"] and ok["received_exactly_once"] == 2
    bad = accounting.judge_outcomes(["a", "b", "c"], ["a", "b"],
                               {"a": [("RECEIVED", "reply_valid")] * 2,
                                "b": [("CANCELLED", "cancelled_by_operator")],
                                "c": [("RECEIVED", "review_accepted")],
                                "z": [("ESCALATED", "deadline_exhausted")]})
    assert not bad["ok"]
    assert (bad["more_than_once"], bad["wrong"], bad["unreplied_waits_that_ended"],
            bad["outcomes_of_other_keys"]) == (1, 1, 1, 1)
    assert accounting.judge_outcomes(["a"], ["a"], {})["missing"] == 1


# -- figures -----------------------------------------------------------------------------------


def test_the_flood_rate_ends_at_the_later_of_the_last_decision_and_rejection() -> None:
    got = accounting.flood_figures(hostile=1000, records=1020, parks_per_s=500.0,
                              first_append_ms=10_000, decided_ms=11_000,
                              last_immediate_ms=12_000, last_ms=40_000,
                              reply_latency_ms=[float(v) for v in range(1, 101)])
    assert got["hostile_per_s"] == 500.0  # 1000 records over 2 s, not the held ones' 30 s
    assert got["flood_records_per_s"] == 510.0
    assert got["hostile_to_parks_ratio"] == 1.0
    assert got["flood_seconds"] == 2.0 and got["all_rejected_after_s"] == 30.0
    assert got["valid_reply_to_outcome_ms"] == {"p50": 50.5, "p99": 99.0, "max": 100.0,
                                                "count": 100}
    unknown = accounting.flood_figures(1000, 1000, None, 10_000, None, None, None, [])
    assert unknown["hostile_per_s"] is None and unknown["hostile_to_parks_ratio"] is None
    assert unknown["valid_reply_to_outcome_ms"]["p99"] is None


def test_counter_delta_keeps_what_moved() -> None:
    assert accounting.counter_delta({"a": 1, "b": 2}, {"a": 1, "b": 5, "c": 1}) == {"b": 3, "c": 1}


def test_positions_cover_the_flood_only_past_its_last_offset_everywhere() -> None:
    ends = {("replies", 0): 9, ("timers", 3): 4}
    assert flood_run.positions_cover({"positions": {"0": {"replies": 10}, "3": {"timers": 5}}},
                                 ends)
    assert not flood_run.positions_cover({"positions": {"0": {"replies": 9},
                                                    "3": {"timers": 5}}}, ends)
    assert not flood_run.positions_cover({"positions": {"0": {"replies": 10}}}, ends)


def test_a_flood_smaller_than_the_kinds_is_refused() -> None:
    with pytest.raises(SystemExit):
        flood_bench.parse_args(["--hostile", str(len(mix.KINDS) - 1)])
    assert flood_bench.parse_args(["--early-reply-ttl", "shipped"]).early_reply_ttl is None
