"""Every tuning constant of a worker, with why it has its value and how the values relate.

One frozen `Tuning` (the defaults: `TUNING`) is handed to the rooms through
their context (`streams.processor.context.WorkerContext.tuning`) and to the
Kafka clients they build.  A test or a bench that wants another value makes
one with `dataclasses.replace(TUNING, ...)`; the relations below are checked
whenever one is made (`Tuning.__post_init__`), so no combination that breaks
them can run.  What the worker's users set lives in `streams.config.Settings`
(the session timeout, the batch linger, the timer tick): these are the values
behind them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# A pod gets this long between SIGTERM and SIGKILL by default (Kubernetes'
# terminationGracePeriodSeconds; deploy/kubernetes gives its workers more, and
# tests/test_kubernetes.py checks that it covers the stop).
KUBERNETES_GRACE_S = 30.0


class TuningError(ValueError):
    """Values of `Tuning` that break one of its relations."""


@dataclass(frozen=True)
class Tuning:
    """The worker's tuning constants; `relations` says what must hold between them."""

    # -- deciding (applier) -------------------------------------------------------------
    # Most records decided in one batch.  Larger batches amortise the commit
    # round trips and the RocksDB write over more records; beyond a few hundred
    # the gain is small and a rebalance waits longer for the batch in flight.
    batch_max: int = 500
    # Most due timers decided in one batch, besides its input records: as many,
    # so that neither starves the other while a worker is saturated.  With room
    # for 100 beside a full batch of input, a worker saturated at 1,000 waits/s
    # decided its replies within 0.6 s and fired its deadlines 9.7 s late.
    timers_max: int = 500
    # Longest the applier holds the event loop while it decides a batch: then it
    # lets the loop run what waits (the web API, the fetch's hand-over, the
    # acknowledgements of the batch committing).  A batch of 500 records held
    # the loop 120-220 ms in one go at 1,000 waits/s.
    yield_after_s: float = 0.01
    # Longest the applier sleeps without a wake-up (then it looks for due timers
    # all the same).
    idle_wake_s: float = 0.2
    # How long the applier waits before deciding again records whose schema the
    # registry could not give (the registry is down; the records are fine).
    registry_retry_s: float = 2.0

    # -- committing (commit) ------------------------------------------------------------
    # How long librdkafka keeps retrying a record before it reports it failed.
    message_timeout_s: float = 300.0
    # How long a flush waits for acknowledgements before the worker gives up and
    # stops: longer than `message_timeout_s`, so that a record still being
    # retried fails with librdkafka's reason.
    flush_timeout_s: float = 330.0
    # How long a transaction's commit may take (librdkafka retries within it);
    # longer than the broker's default transaction.timeout.ms would only see
    # the transaction aborted by the broker first.
    transaction_timeout_s: float = 60.0
    # A commit with no delivery report for this long has its queued records
    # purged, so that it fails and is tried again on a new producer; a broker's
    # restart leaves a partition without a leader for about 11 s.
    stall_s: float = 15.0
    # How many times a partition's transaction is tried (each after one proven
    # never committed) before the worker gives up and stops.
    transaction_attempts: int = 3
    # How long a transactional producer is started again while its coordinator
    # does not answer (each try `transaction_timeout_s`) before the worker stops:
    # a broker restarted on a busy machine took 149 s to answer.  As long as
    # librdkafka retries a record (`message_timeout_s`), and Kafka Streams a task
    # (its task.timeout.ms, 5 min).
    broker_away_s: float = 300.0
    # A commit or abort refused at once as retriable is called again after this.
    txn_retry_wait_s: float = 0.1
    # Records produced while librdkafka's queue is full wait this long between tries.
    queue_full_wait_s: float = 0.002
    # A step of a commit (a flush, a transaction's commit or abort, an init) that
    # has not returned after this long hangs in the Kafka client: the worker
    # stops, with every thread's stack in its log.  Longer than any step may take.
    commit_hang_s: float = 390.0
    # How often the commit watchdog looks.
    watch_every_s: float = 10.0

    # -- stopping (worker, takeover) ------------------------------------------------------
    # How long a stopping worker waits for the batch it is committing: under the
    # 30 s a Kubernetes pod gets between SIGTERM and SIGKILL, with room for
    # faust's own stop.
    stop_commit_wait_s: float = 20.0
    # How long faust's own shutdown may take after a failure before the process
    # exits regardless (it can hang on a broker that is gone).
    fail_exit_after_s: float = 10.0

    # -- reading inputs (reader, intake, flow, gaps) --------------------------------------
    # How often intake looks for stalled topics and steers the fetch (`flow`).
    housekeeping_s: float = 0.1
    # Records the reader hands over at a time, and how long a fetch waits for the
    # first (never longer while records are there: `streams.polling`).
    read_batch: int = 1000
    read_poll_s: float = 0.1
    # With a batch linger, a fetch waits at the broker for this much, or the
    # linger, before it answers: at 1,000 waits/s the reply p99 fell from
    # 493-610 ms to 242-355 (docs/speed.md).  A backlog fills a fetch at once.
    linger_fetch_bytes: int = 64 * 1024
    # How much of one partition a fetch asks for: as large as the largest record
    # batch the broker takes by default (message.max.bytes); at 128 KiB a
    # producer catching up in large batches starved its partition for seconds.
    partition_fetch_bytes: int = 1024 * 1024
    # How long the reader waits for its topics' metadata when it starts.
    metadata_timeout_s: float = 5.0
    # A broker error is logged at most this often (librdkafka retries on its own).
    error_log_every_s: float = 30.0
    # Records held for one input topic-partition before its fetching pauses.
    held_max: int = 5000
    # Records held for one topic-partition that let it pause while another is
    # waited for: a few tenths of a second of the worker's work.
    held_enough: int = 500
    # How long a topic may hold the others back while records below its end
    # offset do not arrive, before the worker reads that range itself (offsets
    # that hold transaction markers only never arrive through the fetch).
    stuck_s: float = 2.0
    # Most records one such direct read takes (the rest come through the fetch).
    stalled_read_max: int = 1000
    # Direct reads at once (gaps and stalls), so that one slow read does not hold
    # every other partition's.
    read_threads: int = 4
    # Direct reads of one input in a row that found records the fetch did not
    # deliver, after which the reader takes a new consumer.
    renew_after: int = 3
    # A range the broker does not deliver within this time is an outage: the
    # worker stops rather than guess (its inputs are read again on restart).
    gap_read_timeout_s: float = 60.0
    # How often, and how long, end offsets are asked again (gaps.EndOffsets):
    # one request waits at most `offsets_attempt_s` (an answer takes
    # milliseconds, up to about 1.5 s at load 15); a client whose requests do
    # not reach the broker is asked again for `offsets_same_client_s`, then a
    # new one is made (a client's cached metadata kept partitions unanswered
    # for good after a broker restart).
    offsets_attempt_s: float = 2.0
    offsets_same_client_s: float = 5.0
    offsets_leader_retry_s: float = 0.2
    # A partition whose end offset has gone unanswered this long is named in a
    # WARNING (again each `offsets_warn_every_s` while it lasts): its stream time
    # stands still meanwhile, and a probe that leaves it out (`partial`) said
    # nothing - a worker in a busy cluster run decided nothing for 60 s with a
    # silent log.
    offsets_unanswered_warn_s: float = 10.0
    offsets_warn_every_s: float = 60.0

    # -- stream time (stream clock) -------------------------------------------------------
    # Least time between two probes the applier asks for (one ListOffsets
    # request each), and after a probe that left partitions unanswered (a broker
    # away: a refused request returns at once).
    probe_min_s: float = 0.01
    probe_retry_s: float = 0.2
    # How often the input positions are committed as a consumer group's offsets
    # (for lag monitors; the worker itself starts from the stored positions).
    group_commit_interval_s: float = 2.0
    # How often an automatic commit grace looks at the input topics' replicas
    # again (a reassignment may add replicas), and again after a failed look.
    grace_recheck_s: float = 300.0
    grace_retry_s: float = 5.0

    # -- timers (streams.timers) ----------------------------------------------------------
    # Most index entries one read looks at per partition beyond those it emits:
    # entries still in flight are skipped, and must not make a read walk the
    # whole backlog of a lagging partition.
    timer_scan_slack: int = 10_000

    # -- restoring (restore) --------------------------------------------------------------
    # Records taken from librdkafka at a time and applied in one write batch.
    restore_batch: int = 10_000
    # How long the restore thread waits for records while something is being
    # read, and for a command while nothing is.
    restore_poll_s: float = 0.05
    restore_idle_s: float = 0.2
    # How long a restore may make no progress at all before the reader takes a
    # new consumer (a librdkafka consumer can stand still after a broker restart).
    restore_stall_s: float = 20.0
    # How long the watermarks of a partition may take to come, asked again while
    # its leader moves (the broker is away longer: the takeover fails and the
    # worker stops, to be restarted).
    watermark_timeout_s: float = 30.0
    # The first wait before a watermark question is asked again after an answer
    # of a leader moving, doubled up to the most: right after a broker thawed,
    # the first question asked again (0.1 s later, after fresh metadata) was
    # answered in every run measured; a shorter wait only asks more often, a
    # longer one holds the takeover back that much.
    watermark_retry_s: float = 0.1
    watermark_retry_max_s: float = 1.0

    # -- the state (RocksDB, per partition) -------------------------------------------------
    # 4 MiB write buffers x 2 and an 8 MiB block cache keep a worker with 8
    # partitions under ~150 MiB of RocksDB memory (RocksDB's defaults reserve
    # gigabytes); larger buffers help only at far higher write rates.
    write_buffer_bytes: int = 4 * 1024 * 1024
    write_buffers: int = 2
    block_cache_bytes: int = 8 * 1024 * 1024
    target_file_bytes: int = 16 * 1024 * 1024
    bloom_bits: int = 10
    max_open_files: int = 512
    # Changelog records applied in one write batch from which it goes without
    # the WAL (a restore's fetches bring thousands; a standby that keeps up gets
    # a few at a time and writes them with the WAL, so taking it over needs no
    # flush).
    bulk_records: int = 1000

    # -- measuring (latency, loop lag) ------------------------------------------------------
    latency_window: int = 4096  # samples kept per stage: a stable p99, a few KB each
    loop_lag_interval_s: float = 0.025  # fine enough to see a 50 ms stall
    loop_lag_window_s: float = 5.0  # the figures' window (p99 and max per 5 s)

    def __post_init__(self) -> None:
        broken = [why for holds, why in self.relations() if not holds]
        if broken:
            raise TuningError("; ".join(broken))

    def relations(self) -> list[tuple[bool, str]]:
        """What must hold between the values, each with why (checked at construction)."""
        longest_step = max(self.flush_timeout_s, 2 * self.transaction_timeout_s,
                           self.transaction_timeout_s + 2 * self.stall_s)
        return [
            (self.flush_timeout_s > self.message_timeout_s,
             "flush_timeout_s must outlast message_timeout_s, so that a record still being "
             "retried fails with librdkafka's reason, not the flush's"),
            (self.stall_s < self.transaction_timeout_s,
             "stall_s must be shorter than transaction_timeout_s: stalled records are purged "
             "before the transaction times out"),
            (self.commit_hang_s > longest_step,
             f"commit_hang_s must outlast the longest step of a commit ({longest_step:.0f} s: "
             "a flush, a transaction's commit or abort resumed, an init), or the watchdog "
             "stops a worker whose commit is only slow"),
            (self.broker_away_s >= self.transaction_timeout_s,
             "broker_away_s must be at least transaction_timeout_s: a producer's start is "
             "tried once at least"),
            (self.stop_commit_wait_s < KUBERNETES_GRACE_S,
             "stop_commit_wait_s must fit in the 30 s a Kubernetes pod gets by default "
             "between SIGTERM and SIGKILL"),
            (self.timers_max == self.batch_max,
             "timers_max must equal batch_max: neither input nor timers may starve the other"),
            (self.yield_after_s < self.idle_wake_s,
             "yield_after_s must be shorter than idle_wake_s"),
            (self.held_enough < self.held_max,
             "held_enough must be below held_max: a topic pauses for another before it "
             "pauses for itself"),
            (self.probe_min_s <= self.probe_retry_s,
             "probe_retry_s must be at least probe_min_s"),
            (self.offsets_attempt_s < self.offsets_same_client_s,
             "offsets_attempt_s must be shorter than offsets_same_client_s: a client is "
             "asked again at least once before it is replaced"),
            (self.restore_poll_s < self.restore_stall_s,
             "restore_poll_s must be far below restore_stall_s: a restore stands still "
             "only after many polls brought nothing"),
            (self.watermark_retry_s <= self.watermark_retry_max_s < self.watermark_timeout_s,
             "watermark_retry_s must be at most watermark_retry_max_s, and that below "
             "watermark_timeout_s: a watermark question is asked again within its time"),
        ]

    # -- what the Kafka clients are given -------------------------------------------------
    def prefetch(self) -> dict[str, Any]:
        """What a direct-read consumer fetches ahead of what it hands over.

        librdkafka's defaults (100,000 records or 64 MiB per partition) would
        fetch far past a range of a few thousand records behind a deep
        backlog.  With limits this small the queue is often full, and
        librdkafka waits fetch.queue.backoff.ms (default 1 s) before it
        fetches that partition again: at 20 ms a backlog's first records
        arrive within 0.1 s.  fetch.wait.max.ms: a fetch in flight for
        partitions without new records holds back the next fetch to the same
        broker this long (librdkafka's 500 ms delayed the first records after
        an assignment by 0.5-1 s).
        """
        return {"queued.min.messages": 2000, "queued.max.messages.kbytes": 4096,
                "fetch.max.bytes": 4 * 1024 * 1024, "fetch.queue.backoff.ms": 20,
                "fetch.wait.max.ms": 100}

    def input_fetch(self, linger: float) -> dict[str, Any]:
        """What the input reader's consumer fetches: a turn of a megabyte a partition,
        and with a batch linger, a fetch that waits at the broker for what comes."""
        conf = {**self.prefetch(), "max.partition.fetch.bytes": self.partition_fetch_bytes}
        if linger > 0:
            conf.update({"fetch.min.bytes": self.linger_fetch_bytes,
                         "fetch.wait.max.ms": round(linger * 1000)})
        return conf

    def restore_fetch(self) -> dict[str, Any]:
        """What a restore fetches ahead: far more than the input reader, because a
        restore reads as fast as it can and nothing waits behind it."""
        return {"queued.min.messages": 100_000, "queued.max.messages.kbytes": 65_536,
                "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 8_388_608,
                "fetch.wait.max.ms": 100, "fetch.queue.backoff.ms": 10}


TUNING = Tuning()

__all__ = ["KUBERNETES_GRACE_S", "TUNING", "Tuning", "TuningError"]
