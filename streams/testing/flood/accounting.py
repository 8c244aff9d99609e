"""Accounting for the flood (pure): what the worker did with every hostile record, whether
every valid reply ended its wait once, and the headline figures."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from streams.testing.flood.mix import IGNORE_COUNTER, KINDS, Fate, Planned
from streams.testing.harness.figures import per_s, summary

Coord = tuple[str, int, int]  # (input role, partition, offset)


@dataclass(frozen=True)
class Rejection:
    reason: str
    at_ms: int  # the Rejected record's timestamp: when the worker produced it
    key: bytes | None = None


def account(plan: Sequence[Planned], coords: Sequence[Coord | None],
            rejections: Mapping[Coord, Sequence[Rejection]],
            counters: Mapping[str, int]) -> dict[str, Any]:
    """Match every hostile record with what the worker did with it.

    `coords[i]` is where `plan[i]` was appended (None: not delivered);
    `rejections` are the Rejected records of the run by the coordinates they
    name; `counters` the worker's counters moved during the flood.  A record
    is accounted for by a Rejected record at its coordinates (a misrouted one:
    one under its key at coordinates no produced record has, since the worker
    forwarded it), or, for the kinds that may be ignored, by its kind's ignore
    counter.  Held records are accounted only once their `unmatched` came.
    """
    produced = {c for c in coords if c is not None}
    forwarded: dict[bytes, list[Rejection]] = {}
    for c, found in rejections.items():
        if c not in produced:
            for r in found:
                forwarded.setdefault(r.key or b"", []).append(r)
    by_kind: dict[str, dict[str, Any]] = {}
    reasons: Counter[str] = Counter()
    unexpected: dict[str, Counter[str]] = {}
    unrejected: Counter[str] = Counter()
    missing: Counter[str] = Counter()
    samples: list[dict[str, Any]] = []
    valid_rejected = duplicates = 0
    used_forwarded = 0
    last_immediate: int | None = None
    last_any: int | None = None
    for rec, where in zip(plan, coords, strict=True):
        if rec.fate is Fate.VALID:
            valid_rejected += bool(where is not None and rejections.get(where))
            continue
        row = by_kind.setdefault(rec.kind, {"produced": 0, "reasons": Counter(), "ignored": 0,
                                            "unaccounted": 0})
        row["produced"] += 1
        if rec.fate is Fate.FORWARDED:
            hits = forwarded.get(rec.key or b"", [])
            used_forwarded += len(hits)
        else:
            hits = list(rejections.get(where, ())) if where is not None else []
        if hits:
            duplicates += len(hits) - 1
            reason = hits[0].reason
            row["reasons"][reason] += 1
            reasons[reason] += 1
            if reason not in KINDS[rec.kind].reasons:
                unexpected.setdefault(rec.kind, Counter())[reason] += 1
            at = min(h.at_ms for h in hits)
            last_any = at if last_any is None else max(last_any, at)
            if rec.fate is not Fate.HELD:  # held ones are rejected a TTL later
                last_immediate = at if last_immediate is None else max(last_immediate, at)
        elif where is not None and rec.fate in (Fate.IGNORED, Fate.REJECTED_OR_IGNORED):
            unrejected[rec.kind] += 1
        else:
            missing[rec.kind] += 1
            row["unaccounted"] += 1
            if len(samples) < 20:
                samples.append({"kind": rec.kind, "fate": rec.fate.value, "role": rec.role,
                                "coordinates": where, "key": (rec.key or b"")[:40].decode(
                                    errors="replace")})
    ignored: dict[str, dict[str, int]] = {}
    for kind, n in sorted(unrejected.items()):
        counter = IGNORE_COUNTER[kind]
        have = int(counters.get(counter, 0))
        took = min(n, have)
        by_kind[kind]["ignored"] += took
        by_kind[kind]["unaccounted"] += n - took
        missing[kind] += n - took
        ignored[counter] = {"records": n, "counter": have}
    stray = sum(len(v) for v in forwarded.values()) - used_forwarded
    return {
        "hostile": sum(r["produced"] for r in by_kind.values()),
        "rejected": sum(reasons.values()),
        "ignored": sum(r["ignored"] for r in by_kind.values()),
        "unaccounted": sum(missing.values()),
        "unaccounted_by_kind": dict(sorted((k, v) for k, v in missing.items() if v)),
        "unaccounted_samples": samples,
        "reasons": dict(sorted(reasons.items())),
        "ignore_counters": ignored,
        "unexpected_reasons": {k: dict(v) for k, v in sorted(unexpected.items())},
        "by_kind": {k: {**v, "reasons": dict(sorted(v["reasons"].items()))}
                    for k, v in sorted(by_kind.items())},
        "valid_replies_rejected": valid_rejected,
        "duplicate_rejections": duplicates,
        "stray_rejections": stray,
        "internal_errors": reasons.get("internal_error", 0),
        "last_immediate_rejection_ms": last_immediate,
        "last_rejection_ms": last_any,
    }


def judge_outcomes(parked: Iterable[str], replied: Iterable[str],
                   outcomes: Mapping[str, Sequence[tuple[str, str]]]) -> dict[str, Any]:
    """Did every replied wait end RECEIVED (reply_valid) exactly once, and nothing else end?

    `outcomes` maps a wait key to its outcome records (outcome, reason).
    """
    parked_set, replied_set = set(parked), set(replied)
    once = missing = repeated = wrong = 0
    for key in replied_set:
        got = outcomes.get(key, ())
        if not got:
            missing += 1
            continue
        repeated += len(got) > 1
        if all(o == ("RECEIVED", "reply_valid") for o in got):
            once += len(got) == 1
        else:
            wrong += 1
    unreplied_ended = sum(1 for k in parked_set - replied_set if outcomes.get(k))
    strangers = sum(1 for k in outcomes if k not in parked_set)
    by_kind = Counter(f"{o}/{r}" for got in outcomes.values() for o, r in got)
    return {
        "replied": len(replied_set), "received_exactly_once": once, "missing": missing,
        "more_than_once": repeated, "wrong": wrong,
        "unreplied_waits_that_ended": unreplied_ended, "outcomes_of_other_keys": strangers,
        "outcomes_by_kind": dict(sorted(by_kind.items())),
        "ok": (once == len(replied_set) and not (missing or repeated or wrong
                                                  or unreplied_ended or strangers)),
    }

def counter_delta(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, int]:
    """The counters that moved from `before` to `after` (both /xwait/stats `counters`)."""
    out = {}
    for name in sorted(set(before) | set(after)):
        moved = int(after.get(name, 0)) - int(before.get(name, 0))
        if moved:
            out[name] = moved
    return out


def flood_figures(hostile: int, records: int, parks_per_s: float | None,
                  first_append_ms: int | None, decided_ms: int | None,
                  last_immediate_ms: int | None, last_ms: int | None,
                  reply_latency_ms: Sequence[float]) -> dict[str, Any]:
    """The headline figures: the flood ends when the last record is decided and the last
    rejection that comes at once is out (held records' `unmatched` come after the TTL)."""
    ends = [t for t in (decided_ms, last_immediate_ms) if t is not None]
    end = max(ends) if ends else None
    hostile_rate = per_s(hostile, first_append_ms, end)
    return {
        "hostile_per_s": hostile_rate,
        "flood_records_per_s": per_s(records, first_append_ms, end),
        "valid_parks_per_s": parks_per_s,
        "hostile_to_parks_ratio": (round(hostile_rate / parks_per_s, 3)
                                   if hostile_rate and parks_per_s else None),
        "valid_reply_to_outcome_ms": summary(reply_latency_ms),
        "flood_seconds": (None if end is None or first_append_ms is None
                          else round((end - first_append_ms) / 1000, 2)),
        "decided_after_s": (None if decided_ms is None or first_append_ms is None
                            else round((decided_ms - first_append_ms) / 1000, 2)),
        "all_rejected_after_s": (None if last_ms is None or first_append_ms is None
                                 else round((last_ms - first_append_ms) / 1000, 2)),
    }
