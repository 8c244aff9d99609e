"""The worker's Prometheus endpoint, in text exposition format 0.0.4 (written by hand).

    xwait_parked_waits{state,definition}     gauge   not-done waits in the owned partitions
    xwait_timers_armed                       gauge   timers in the in-memory index
    xwait_timers_due                         gauge   armed timers whose due time has passed
    xwait_timers_emitted_total               counter timer records the punctuator sent
    xwait_deadline_lateness_seconds{kind}    histogram  processing time - due time, per
                                                     live reminder / deadline / poll timer
    xwait_outcomes_total{reason}             counter terminal outcomes sent
    xwait_rejections_total{reason}           counter records sent to the rejected topic
    xwait_misrouted_total                    counter records forwarded to their partition
    xwait_records_processed_total{topic}     counter input records processed
    xwait_consumer_lag{topic,partition}      gauge   end offset - the worker's input position
    xwait_owned_partitions                   gauge

Counters come from `Worker.counters` and restart at zero with the worker (as
Prometheus expects).  The parked-waits gauge comes from the worker's census
(`streams.processor.census`), kept as records are applied; timers due walks
the in-memory armed set, at most once per `GAUGE_CACHE_S`.
"""

from __future__ import annotations

import bisect
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from streams import codec
from streams.codec import RecordType, UndecodableRecord
from streams.core import ArmedTimer, TimerKind, WaitStatus
from streams.processor.model import INPUT_ROLES, Handled, InputRecord, Role

if TYPE_CHECKING:
    from streams.processor.app import Worker

CONTENT_TYPE = "text/plain; version=0.0.4"  # aiohttp adds "; charset=utf-8"

# How long the two table gauges are reused: counting past-due timers walks
# every armed timer in memory (tens of ms at a million waits).
GAUGE_CACHE_S = 5.0

# Lateness is a tick (0.5 s by default) plus the trip through Kafka when all
# is well; the upper buckets show a worker that falls behind or a failover.
LATENESS_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
OBSERVED_KINDS = frozenset({TimerKind.DEADLINE, TimerKind.REMINDER, TimerKind.POLL})


class Histogram:
    """Cumulative buckets per label value, as Prometheus wants them."""

    def __init__(self, buckets: Sequence[float]) -> None:
        self.buckets = tuple(buckets)
        self.counts: dict[str, list[int]] = {}
        self.sums: dict[str, float] = {}

    def observe(self, label: str, value: float) -> None:
        counts = self.counts.setdefault(label, [0] * (len(self.buckets) + 1))
        counts[bisect.bisect_left(self.buckets, value)] += 1
        self.sums[label] = self.sums.get(label, 0.0) + value

    def lines(self, name: str, label_name: str) -> list[str]:
        out: list[str] = []
        for label in sorted(self.counts):
            counts = self.counts[label]
            cumulative = 0
            for bound, count in zip((*self.buckets, float("inf")), counts, strict=True):
                cumulative += count
                le = "+Inf" if bound == float("inf") else _num(bound)
                out.append(f"{name}_bucket{_labels({label_name: label, 'le': le})} {cumulative}")
            out.append(f"{name}_sum{_labels({label_name: label})} {_num(self.sums[label])}")
            out.append(f"{name}_count{_labels({label_name: label})} {cumulative}")
        return out


class LatenessObserver:
    """Observes `now - due_at` for each live reminder, deadline or poll timer processed.

    Registered in `Worker.observers`; called after the agent applied a record.
    A timer record counts only when its arming was still armed (it is in the
    handled record's `timers_before`): duplicates and stale armings are not lateness.
    """

    def __init__(self, histogram: Histogram) -> None:
        self.histogram = histogram

    def __call__(self, rec: InputRecord, handled: Handled, now_ms: int) -> None:
        if rec.role is not Role.TIMERS or not handled.timers_before:
            return
        try:
            record = codec.decode(RecordType.TIMER, rec.value)
            kind = TimerKind(record["kind"])
            armed = ArmedTimer(kind, int(record["dueAt"]), int(record["generation"]))
        except (UndecodableRecord, ValueError, KeyError, TypeError):
            return
        if kind in OBSERVED_KINDS and armed in handled.timers_before:
            self.histogram.observe(kind.value, max(0.0, (now_ms - armed.due_at) / 1000))


class Metrics:
    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.lateness = Histogram(LATENESS_BUCKETS)
        self._gauges: tuple[float, Counter[tuple[str, str]], int] | None = None

    async def table_gauges(self) -> tuple[Counter[tuple[str, str]], int]:
        """(state, definition) -> waits not done, and the count of timers past due.

        From the worker's census and timer index (kept as records are
        applied), not a walk of the table; cached briefly all the same, as
        counting past-due timers walks the in-memory armed set.
        """
        now = time.monotonic()
        if self._gauges is not None and now - self._gauges[0] < GAUGE_CACHE_S:
            return self._gauges[1], self._gauges[2]
        w = self.worker
        owned = w.owned_partitions()
        by_state = Counter({k: n for k, n in w.census.totals(owned).items()
                            if k[0] != WaitStatus.DONE.value})
        due = w.index.count_due(int(time.time() * 1000), owned)
        self._gauges = (now, by_state, due)
        return by_state, due

    def consumer_lag(self) -> dict[tuple[str, int], int]:
        """Per owned input partition: its end offset minus the worker's stored position.

        The worker owns its input positions (streams.processor.positions);
        the end offsets are those of the punctuator's last probe.
        """
        return self.worker.input_lag()

    async def render(self) -> str:
        w = self.worker
        c = w.counters
        by_state, due = await self.table_gauges()
        out: list[str] = []
        gauge = _family(out)
        gauge("xwait_parked_waits", "gauge", "Waits not done in this worker's partitions.",
              [({"state": s, "definition": d}, n) for (s, d), n in sorted(by_state.items())])
        gauge("xwait_timers_armed", "gauge", "Timers armed in this worker's partitions.",
              [({}, w.armed_timers())])
        gauge("xwait_timers_due", "gauge", "Armed timers whose due time has passed.",
              [({}, due)])
        gauge("xwait_timers_emitted_total", "counter", "Timer records the punctuator sent.",
              [({}, c["timers.emitted"])])
        out.append("# HELP xwait_deadline_lateness_seconds Time between a timer's due time "
                   "and its processing.")
        out.append("# TYPE xwait_deadline_lateness_seconds histogram")
        out.extend(self.lateness.lines("xwait_deadline_lateness_seconds", "kind"))
        gauge("xwait_outcomes_total", "counter", "Terminal outcomes sent, by reason.",
              _prefixed(c, "outcomes."))
        gauge("xwait_rejections_total", "counter", "Records sent to the rejected topic.",
              _prefixed(c, "rejected."))
        gauge("xwait_misrouted_total", "counter",
              "Records that arrived on a partition their key does not hash to.",
              [({}, c["misrouted"])])
        gauge("xwait_records_processed_total", "counter", "Input records processed.",
              [({"topic": role.value}, c["processed." + role.value]) for role in INPUT_ROLES])
        gauge("xwait_consumer_lag", "gauge",
              "End offset minus the input position the worker's state reflects.",
              [({"topic": t, "partition": str(p)}, n)
               for (t, p), n in sorted(self.consumer_lag().items())])
        gauge("xwait_owned_partitions", "gauge", "Partitions this worker owns.",
              [({}, len(w.owned_partitions()))])
        return "\n".join(out) + "\n"


def _family(out: list[str]) -> Any:
    def add(name: str, kind: str, help_text: str,
            samples: Iterable[tuple[Mapping[str, str], float]]) -> None:
        out.append(f"# HELP {name} {help_text}")
        out.append(f"# TYPE {name} {kind}")
        out.extend(f"{name}{_labels(labels)} {_num(value)}" for labels, value in samples)
    return add


def _prefixed(counters: Mapping[str, int], prefix: str) -> list[tuple[Mapping[str, str], float]]:
    return [({"reason": k[len(prefix):]}, v) for k, v in sorted(counters.items())
            if k.startswith(prefix)]


def _labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    body = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
    return "{" + body + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _num(value: float) -> str:
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return repr(float(value))
