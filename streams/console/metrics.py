"""The worker's Prometheus endpoint, on prometheus_client (text format 0.0.4).

Each worker has its own `CollectorRegistry`: the process and platform
collectors, a build-info metric, histograms observed as records are applied,
and one collector that reads the worker's facts at scrape time.

    xwait_build_info{version,python,faust,guarantee}   gauge 1
    xwait_ready                                        gauge 1 while the worker owns its
                                                             partitions and serves them
    xwait_owned_partitions                             gauge
    xwait_parked_waits{state,definition}               gauge  waits not done; 0, not gone,
                                                              when none is left
    xwait_finished_waits{definition}                   gauge  done waits kept until purged
    xwait_timers_armed, xwait_timers_due               gauge
    xwait_timers_emitted_total                         counter
    xwait_timer_lateness_seconds{kind}                 histogram  processing time - due time
                                                       of each live reminder, deadline, poll
    xwait_actions_total{action}                        counter
    xwait_outcomes_total{outcome,reason,definition}    counter
    xwait_wait_duration_seconds{outcome,definition}    histogram  parked -> ended
    xwait_record_latency_seconds{topic}                histogram  broker append -> applied
    xwait_records_processed_total{topic}               counter
    xwait_rejections_total{reason}                     counter
    xwait_misrouted_total                              counter
    xwait_rebalances_total                             counter  assignments taken
    xwait_loop_lag_seconds{quantile}                   gauge  p99 and max of the event loop's
                                                              lag over the last 5 s
    xwait_commit_failures_total                        counter  batches that could not be made
                                                                durable (the worker stops)
    xwait_transactions_retried_total                   counter  partitions' transactions
                                                                aborted and tried again
    xwait_producer_failures_total{producer}            counter  console commands Kafka did not
                                                                take
    xwait_consumer_lag{topic,partition}                gauge  every owned input partition
    process_*, python_gc_*, python_info                prometheus_client's own

Counters restart at zero with the worker, as Prometheus expects.  Label sets
known in advance (every definition, state, action, reason) are exported from
the start at 0, so a rate() or an alert sees a series that drops to zero
instead of one that disappears.  The parked-waits gauge comes from the
worker's census (kept as records are applied); timers due walks the
in-memory armed set, at most once per `GAUGE_CACHE_S`.
"""

from __future__ import annotations

import platform
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from importlib import metadata
from typing import Any, TypeVar

from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from streams.console.histograms import LoopHistogram
from streams.console.host import ConsoleHost
from streams.core import (
    ActionKind,
    EmitOutcome,
    OutcomeReason,
    RejectReason,
    TimerKind,
    WaitStatus,
)
from streams.processor.model import INPUT_ROLES, Handled, InputRecord, ProcessorReject, Role
from streams.timers.firing import FiredTimer

CONTENT_TYPE = "text/plain; version=0.0.4"  # aiohttp adds "; charset=utf-8"

# How long the two table gauges are reused: counting past-due timers walks
# every armed timer in memory (tens of ms at a million waits).
GAUGE_CACHE_S = 5.0

# Lateness is a tick (0.2 s by default) plus the trip through Kafka when all
# is well; the upper buckets show a worker that falls behind or a failover.
LATENESS_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
# From the broker's append to the batch made durable: a few ms to tens of ms
# when the worker keeps up; seconds mean a backlog, minutes a restore.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                   300.0)
# Waits last seconds (tests, probes) to weeks (approvals with escalation).
DURATION_BUCKETS = (1.0, 10.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0, 12 * 3600.0, 86400.0,
                    3 * 86400.0, 7 * 86400.0, 30 * 86400.0)
OBSERVED_KINDS = frozenset({TimerKind.DEADLINE, TimerKind.REMINDER, TimerKind.POLL})

# Every outcome reason with the exit it belongs to (the core's rules).
OUTCOME_OF: Mapping[OutcomeReason, str] = {
    OutcomeReason.REPLY_VALID: "RECEIVED", OutcomeReason.REVIEW_ACCEPTED: "RECEIVED",
    OutcomeReason.REVIEW_CORRECTED: "RECEIVED", OutcomeReason.DELIVERED: "RECEIVED",
    OutcomeReason.RESULT_READY: "RECEIVED", OutcomeReason.DEADLINE_EXHAUSTED: "ESCALATED",
    OutcomeReason.INVALID_REPLY_ESCALATED: "ESCALATED", OutcomeReason.SEND_FAILED: "ESCALATED",
    OutcomeReason.CANCELLED_BY_OPERATOR: "CANCELLED",
}
REJECTION_REASONS = tuple(sorted({r.value for r in RejectReason}
                                 | {r.value for r in ProcessorReject} | {"misrouted"}))
NOT_DONE = tuple(s.value for s in WaitStatus if s is not WaitStatus.DONE)


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "unknown"


class Observations:
    """Histograms and counters fed by `ConsoleHost.observers`, once per decided record.

    A replayed record (its outputs re-sent after a crash, not decided again)
    is not observed twice.
    """

    def __init__(self, registry: CollectorRegistry,
                 definitions: Mapping[str, Any]) -> None:
        self.lateness = LoopHistogram(
            "xwait_timer_lateness_seconds",
            "Time between a live timer's due time and its processing, by kind "
            "(reminder, deadline, poll).", ["kind"], buckets=LATENESS_BUCKETS,
            registry=registry)
        self.latency = LoopHistogram(
            "xwait_record_latency_seconds",
            "Time from an input record's broker append to its decision being durable.",
            ["topic"], buckets=LATENCY_BUCKETS, registry=registry)
        self.duration = LoopHistogram(
            "xwait_wait_duration_seconds",
            "How long waits lasted, from parked to ended, by exit and definition.",
            ["outcome", "definition"], buckets=DURATION_BUCKETS, registry=registry)
        self.outcomes: Counter[tuple[str, str, str]] = Counter()
        for name in definitions:
            for reason, outcome in OUTCOME_OF.items():
                self.outcomes[(outcome, reason.value, name)] += 0
        # Each record observes a child or two: looked up here once, not per record
        # (`labels` was most of what observing cost, 1-2% of a worker's loop).
        self._duration_of = {(outcome, name): self.duration.labels(outcome, name)
                             for name in definitions
                             for outcome in sorted(set(OUTCOME_OF.values()))}
        self._lateness_of = {kind: self.lateness.labels(kind.value) for kind in OBSERVED_KINDS}
        self._latency_of = {role: self.latency.labels(role.value) for role in INPUT_ROLES}

    def __call__(self, about: InputRecord | FiredTimer, handled: Handled, now_ms: int) -> None:
        if "replayed" in handled.counters:
            return
        # A fired timer counts under the timers topic, from its due time.
        role, at = ((about.role, about.timestamp) if isinstance(about, InputRecord)
                    else (Role.TIMERS, about.due_at))
        if at is not None:
            self._latency_of[role].observe(max(0.0, time.time() - at / 1000))
        for outcome in handled.outcomes:
            self._outcome(outcome)
        fired = handled.timer
        if fired is not None and fired.kind in self._lateness_of \
                and fired in handled.timers_before:
            # Only a timer whose arming was still armed counts: duplicates and
            # stale armings are not lateness.
            self._lateness_of[fired.kind].observe(max(0.0, (now_ms - fired.due_at) / 1000))

    def _outcome(self, o: EmitOutcome) -> None:
        outcome, definition = o.outcome.value, o.definition
        self.outcomes[(outcome, o.reason.value, definition)] += 1
        child = self._duration_of.get((outcome, definition))
        if child is None:  # a definition the worker did not start with
            child = self._duration_of[(outcome, definition)] = self.duration.labels(
                outcome, definition)
        child.observe(max(0.0, (o.ended_at - o.parked_at) / 1000))


class WorkerCollector(Collector):
    """The worker's facts, read at each scrape."""

    def __init__(self, host: ConsoleHost, observations: Observations,
                 console_failures: Any) -> None:
        self.host = host
        self.observations = observations
        self.console_failures = console_failures  # () -> int
        self.rebalances = 0
        self._gauges: tuple[float, Counter[tuple[str, str]], int] | None = None

    def table_gauges(self) -> tuple[Counter[tuple[str, str]], int]:
        """(state, definition) -> waits, and the count of timers past due.

        From the worker's census and timer index (kept as records are
        applied), not a walk of the table; cached briefly all the same, as
        counting past-due timers walks the in-memory armed set.
        """
        now = time.monotonic()
        if self._gauges is not None and now - self._gauges[0] < GAUGE_CACHE_S:
            return self._gauges[1], self._gauges[2]
        h = self.host
        owned = h.owned_partitions()
        by_state = Counter(dict(h.census.totals(owned)))
        due = h.index.count_due(int(time.time() * 1000), owned)
        self._gauges = (now, by_state, due)
        return by_state, due

    def consumer_lag(self) -> dict[tuple[str, int], int]:
        """Every owned input partition: records not yet applied (0 until the first probe)."""
        h = self.host
        known = h.input_lag()
        topics = [h.settings.topic(role.value) for role in INPUT_ROLES]
        return {(t, p): known.get((t, p), 0) for p in sorted(h.owned_partitions())
                for t in topics}

    def collect(self) -> Iterator[Metric]:
        h = self.host
        c = h.counters
        by_state, due = self.table_gauges()
        definitions = sorted(set(h.definitions) | {d for _, d in by_state})

        yield _gauge("xwait_ready", "1 while the worker owns its partitions and serves them.",
                     [((), 1.0 if h.ready.is_set() else 0.0)])
        yield _gauge("xwait_owned_partitions", "Partitions this worker owns.",
                     [((), float(len(h.owned_partitions())))])
        parked = GaugeMetricFamily("xwait_parked_waits",
                                   "Waits not done in this worker's partitions.",
                                   labels=["state", "definition"])
        for state in NOT_DONE:
            for d in definitions:
                parked.add_metric([state, d], by_state.get((state, d), 0))
        yield parked
        yield _gauge("xwait_finished_waits",
                     "Done waits kept (with their history) until retention purges them.",
                     [((d,), float(by_state.get((WaitStatus.DONE.value, d), 0)))
                      for d in definitions], ["definition"])
        yield _gauge("xwait_timers_armed", "Timers armed in this worker's partitions.",
                     [((), float(h.armed_timers()))])
        yield _gauge("xwait_timers_due", "Armed timers whose due time has passed.",
                     [((), float(due))])
        yield _counter("xwait_timers_emitted", "Due timers the worker fired (decided at "
                                               "their due time, from its own timer index).",
                       [((), c.get("timers.fired", 0))])
        yield _counter("xwait_actions", "Actions sent, by kind.",
                       [((a.value,), c.get(f"actions.{a.value}", 0)) for a in ActionKind],
                       ["action"])
        outcomes = self.observations.outcomes
        yield _counter("xwait_outcomes", "Terminal outcomes sent, by exit, reason and "
                                         "definition.",
                       [(key, n) for key, n in sorted(outcomes.items())],
                       ["outcome", "reason", "definition"])
        yield _counter("xwait_records_processed", "Input records processed, by topic.",
                       [((r.value,), c.get(f"processed.{r.value}", 0)) for r in INPUT_ROLES],
                       ["topic"])
        reasons = sorted(set(REJECTION_REASONS) | {k[len("rejected."):] for k in c
                                                  if k.startswith("rejected.")})
        yield _counter("xwait_rejections", "Records sent to the rejected topic, by reason.",
                       [((r,), c.get(f"rejected.{r}", 0)) for r in reasons], ["reason"])
        yield _counter("xwait_misrouted",
                       "Records that arrived on a partition their key does not hash to.",
                       [((), c.get("misrouted", 0))])
        yield _counter("xwait_rebalances", "Partition assignments this worker took over.",
                       [((), self.rebalances)])
        lag = h.stats().get("loopLagMs") or {}
        yield _gauge("xwait_loop_lag_seconds",
                     "How late the event loop ran what was due, over the last 5 s (a stall "
                     "delays every record, timer and request of the worker).",
                     [(("0.99",), lag.get("p99_5s", 0.0) / 1000),
                      (("1",), lag.get("max_5s", 0.0) / 1000)], ["quantile"])
        yield _counter("xwait_commit_failures",
                       "Batches that could not be made durable (outputs, changelog or "
                       "RocksDB); the worker stops on the first.",
                       [((), c.get("failures", 0))])
        yield _counter("xwait_transactions_retried",
                       "A partition's transactions (its state, and under exactly_once its "
                       "outputs) aborted, proven never committed, and tried again on a new "
                       "producer; up to 3 tries a batch.",
                       [((), c.get("transactions.retried", 0))])
        yield _counter("xwait_producer_failures",
                       "Records a producer could not deliver: console commands.",
                       [(("console",), self.console_failures())], ["producer"])
        yield _gauge("xwait_consumer_lag",
                     "End offset minus the input position the worker's state reflects.",
                     [((t, str(p)), float(n)) for (t, p), n in self.consumer_lag().items()],
                     ["topic", "partition"])


_Family = TypeVar("_Family", GaugeMetricFamily, CounterMetricFamily)


def _family(kind: type[_Family], name: str, doc: str,
            samples: list[tuple[tuple[str, ...], float]], labels: list[str] | None) -> _Family:
    family = kind(name, doc, labels=labels or [])
    for values, value in samples:
        family.add_metric(list(values), value)
    return family


def _gauge(name: str, doc: str, samples: list[tuple[tuple[str, ...], float]],
           labels: list[str] | None = None) -> GaugeMetricFamily:
    return _family(GaugeMetricFamily, name, doc, samples, labels)


def _counter(name: str, doc: str, samples: list[tuple[tuple[str, ...], float]],
             labels: list[str] | None = None) -> CounterMetricFamily:
    return _family(CounterMetricFamily, name, doc, samples, labels)


class Metrics:
    """The registry of one worker and what renders it."""

    def __init__(self, host: ConsoleHost, console_failures: Any = lambda: 0) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]  # no *_created series
        # No collection at registration: the worker is still being built when the
        # console is installed (its timer index and store come after the app).
        self.registry = CollectorRegistry(auto_describe=False)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)  # passes per generation (streams.processor.collector)
        info = GaugeMetricFamily("xwait_build_info", "The build this worker runs.",
                                 labels=["version", "python", "faust", "guarantee"])
        info.add_metric([_version("xwait"), platform.python_version(),
                         _version("faust-streaming"), host.settings.guarantee.value], 1)
        self.registry.register(_Constant(info))
        self.observations = Observations(self.registry, host.definitions)
        self.collector = WorkerCollector(host, self.observations, console_failures)
        self.registry.register(self.collector)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _Constant(Collector):
    def __init__(self, metric: Metric) -> None:
        self.metric = metric

    def collect(self) -> Iterator[Metric]:
        yield self.metric


__all__ = ["CONTENT_TYPE", "Metrics", "Observations", "WorkerCollector"]
