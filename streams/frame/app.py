"""The faust boundary: the App that frames a worker, and how a worker process starts.

faust-streaming is the frame and nothing more: its consumer group says
which partitions each worker owns and which it keeps warm as a standby (its
assignor co-partitions the subscribed topics and gives every partition a
standby on another worker), it runs the worker's loops as tasks, serves the
web API and console, and `faust -A streams.app worker` starts it.  It reads
and writes none of the waits' state and none of the input records:

* the group is subscribed to one internal topic, `<app id>-assignment`,
  whose partitions stand for the waits' partitions (it has as many, and
  nothing is ever written to it, so faust's fetch reads nothing);
* on each assignment the actives and standbys of that topic go to the
  ownership room (`takeover`), which restores, seeks and reads with
  librdkafka; on each revocation, and before faust stops its consumer, it
  gives the partitions up.

Public faust API is used (App, agent, task, page, the rebalance signals,
`App.on_stop`, the assignor's assignment, the `TableManager` setting, the
consumer's `highwaters`), with one exception: `NoTableManager` overrides the
table manager's `on_start` and calls the one protected method faust's own
calls.  Nothing of faust's or aiokafka's is patched.  `versions.check`
(in `preflight`) refuses to start on a faust-streaming or aiokafka release
this was not checked with, and `tests/frame/test_faust_canary.py` fails the day one
behaves otherwise.
"""

from __future__ import annotations

import asyncio
import faulthandler
import logging
import signal
import ssl
import sys
from collections import Counter
from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any

import faust
from faust.tables.manager import TableManager
from faust.types import TP, StreamT
from faust.web import Request, Response, View

from streams.config import Settings
from streams.console import install as install_console
from streams.core import WaitDefinition
from streams.frame import fleet, preflight
from streams.processor import collector
from streams.processor.worker import Worker

log = logging.getLogger(__name__)


def _credentials(settings: Settings) -> Any:
    sec = settings.security
    if sec.protocol == "PLAINTEXT":
        return None
    context = None
    if sec.protocol.endswith("SSL"):
        context = ssl.create_default_context(cafile=sec.ssl_cafile)
        if sec.ssl_certfile:
            context.load_cert_chain(sec.ssl_certfile, sec.ssl_keyfile)
    if sec.protocol.startswith("SASL"):
        return faust.SASLCredentials(username=sec.sasl_username, password=sec.sasl_password,
                                     mechanism=sec.sasl_mechanism or "PLAIN",
                                     ssl_context=context)
    return context


class XwaitApp(faust.App):
    """faust's App, giving the partitions up before faust stops its consumer.

    faust stops the fetch first, then its agents, and leaves the group last;
    a worker that went on deciding and committing in between did so after
    the next owner had restored without those commits (2,809 duplicate
    outcomes under exactly_once in one long crash run).  `on_stop` is faust's
    documented place to add to the stop ("remember to call super").
    """

    xwait: Worker

    async def on_stop(self) -> None:
        worker = getattr(self, "xwait", None)
        if worker is not None:
            await worker.ownership.stop(failed=worker.failure is not None)
            if worker.tracer is not None:  # the spans still queued go out
                await asyncio.get_running_loop().run_in_executor(None, worker.tracer.shutdown)
        await super().on_stop()


class NoTableManager(TableManager):
    """faust's table manager, without the second it sleeps before the group is joined.

    faust waits 1 s at start before it registers a project's tables, so that
    tables declared while its modules are still being imported are not
    missed; the consumer subscribes only then.  The worker declares no table
    (its state is its own, `state`), so that second delayed every start, the
    restart after a crash included, and every first outcome of a drain (first
    outcome 4.0-4.4 s after the process started, the earlier worker that
    skipped it 2.2-2.6 s).  Given to faust as its `TableManager` setting;
    what is left is faust's own `on_start` without the sleep, which the
    canary test holds to the installed release.
    """

    async def on_start(self) -> None:
        if not self.should_stop:
            await self._update_channels()  # no tables: only says "registered"
            await self.recovery.start()


def build(worker: Worker) -> faust.App:
    """The faust App of `worker`: membership, its loops as tasks, the web pages."""
    s = worker.settings
    app = XwaitApp(
        s.app_id,
        broker=[f"kafka://{h.strip()}" for h in s.bootstrap.split(",")],
        broker_credentials=_credentials(s),
        datadir=str(s.data_dir),
        processing_guarantee="at_least_once",  # the worker makes its own (commit.py)
        topic_partitions=s.partitions,
        topic_allow_declare=False,  # `topics.ensure` makes them (preflight)
        topic_disable_leader=True,  # no leader-only tasks
        consumer_auto_offset_reset="latest",
        broker_session_timeout=s.session_timeout,
        # A worker learns that the group is rebalancing (a worker left, or joined) only
        # from its next heartbeat's answer: at session/6 (3.3 s by default) a standby
        # took over a stopped worker's partitions seconds later than it could, at 1 s
        # about a second of a 2.2 s takeover.  Two small requests a second.
        broker_heartbeat_interval=min(0.5, s.session_timeout / 6),
        web_port=s.web_port,
        web_bind=s.web_host,
        # What peers connect to when the console forwards a request.
        web_host=s.advertised_host,
        web_tables_enabled=False,
        key_serializer="raw",
        value_serializer="raw",
        autodiscover=False,
        stream_wait_empty=False,
        TableManager=NoTableManager,
    )
    app.xwait = worker
    worker.app = app
    membership = app.topic(worker.assignment, partitions=s.partitions, acks=False,
                           key_type=bytes, value_type=bytes, key_serializer="raw",
                           value_serializer="raw")

    async def members(stream: StreamT[bytes]) -> None:
        """The group's subscription; the topic carries no records."""
        async for _ in stream:
            worker.counters["assignment.unexpected_records"] += 1

    app.agent(membership, name="xwait-membership", concurrency=1)(members)
    app.task(_guarded(worker, worker.intake.run, "the intake"))
    app.task(_guarded(worker, worker.applier.run, "the applier"))
    app.task(_guarded(worker, worker.intake.housekeeping, "the intake's housekeeping"))
    app.task(_guarded(worker, worker.stream_clock.run, "the stream clock"))
    app.task(_guarded(worker, worker.loop_lag.run, "the loop lag monitor"))
    app.task(_guarded(worker, worker.watch, "the commit watchdog"))

    leaders = LeaderCheck(app, worker.counters)

    async def assigned(sender: Any, assigned: set[TP], **kwargs: Any) -> None:
        actives = {tp.partition for tp in app.assignor.assigned_actives()
                   if tp.topic == worker.assignment}
        standbys = {tp.partition for tp in app.assignor.assigned_standbys()
                    if tp.topic == worker.assignment}
        worker.ownership.assign(actives, standbys)
        # Beside the takeover and the rebalance, not before them (a slow broker must
        # hold neither back): a worker of an earlier version that joined since this
        # one started decides the same partitions (fleet.py); stop rather than share.
        asyncio.ensure_future(_refuse_earlier_workers(worker))
        leaders.ask({tp for tp in assigned if tp.topic == worker.assignment})

    async def revoked(sender: Any, revoked: set[TP], **kwargs: Any) -> None:
        await worker.ownership.revoke({tp.partition for tp in revoked
                                       if tp.topic == worker.assignment})

    app.on_partitions_assigned.connect(assigned)  # type: ignore[arg-type]
    app.on_partitions_revoked.connect(revoked)  # type: ignore[arg-type]

    async def stats(view: View, request: Request) -> Response:
        """The worker's counters, owned partitions, armed timers, waits by state, and
        the latency of its stages (counts only, no token needed)."""
        return view.json(worker.stats())

    app.page("/xwait/stats")(stats)
    install_console(worker)
    return app


class LeaderCheck:
    """After each assignment, the end offsets of the assigned partitions, asked through
    faust's `Consumer.highwaters`: so that the member's metadata names their leaders.

    aiokafka 0.14 gives a newly assigned partition its position with a ListOffsets
    request to the leader its metadata names.  When that broker no longer leads
    the partition it answers NotLeaderForPartition, and that path (its fetcher's
    position reset) logs ``Failed fetch offsets from <node>`` at ERROR and asks
    the same broker again every 100 ms without refreshing its metadata, which the
    member then refreshes only every `consumer_metadata_max_age_ms` (5 min).
    Nothing else refreshes it meanwhile: the assignment topic's partitions never
    get a position, so the member never fetches them, and the fetch is the path
    that would.  A broker frozen (SIGSTOP) does exactly that to a member that
    fetched nothing from the partitions it led (a worker that kept only standbys
    of them): their leaderships move while it sleeps, the member's metadata still
    names it after the thaw, and when the member is then given one of them (its
    owner stopped, say), the worker logged 975-1,773 of those lines until the end
    of each run (issue 48; tests/cluster/test_cluster_freeze.py stages it).
    `highwaters` asks the same question through aiokafka's `end_offsets`, which
    refreshes the metadata on that error and asks again; the position reset then
    finds the new leader on its next try.  tests/frame/test_faust_canary.py pins
    both behaviours of the installed aiokafka.

    One question at a time: faust runs aiokafka in a thread served by two
    workers, and a question to a broker that does not answer (frozen) holds one
    for up to the request timeout; a second assignment meanwhile asks again once
    the first is answered, for the partitions assigned last.
    """

    def __init__(self, app: faust.App, counters: Counter[str]) -> None:
        self.app = app
        self.counters = counters  # assignment.leader_checks: questions answered
        self._wanted: set[TP] | None = None
        self._running: asyncio.Future[None] | None = None

    def ask(self, partitions: set[TP]) -> None:
        """Ask for `partitions` (all the member's partitions of the assignment topic)."""
        self._wanted = set(partitions)
        if partitions and (self._running is None or self._running.done()):
            self._running = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while self._wanted:
            partitions, self._wanted = self._wanted, None
            try:
                await self.app.consumer.highwaters(*sorted(partitions))
            except Exception as exc:  # noqa: BLE001 - a stopping consumer, a timeout: next time
                log.info("could not ask the assignment topic's end offsets: %r", exc)
            else:
                self.counters["assignment.leader_checks"] += 1


async def _refuse_earlier_workers(worker: Worker) -> None:
    try:
        found = await asyncio.get_running_loop().run_in_executor(
            None, fleet.foreign_members, worker.settings, worker.assignment)
    except Exception as exc:  # noqa: BLE001 - a broker that does not answer: look next time
        log.warning("could not look for workers of an earlier version in the group: %s", exc)
        return
    if found:
        await worker.fail(fleet.refusal(worker.settings, found),
                          "sharing the group with workers of an earlier version")


def _guarded(worker: Worker, loop: Any, what: str) -> Any:
    """A task that stops the worker, loudly, if its loop fails (a bug, never input)."""
    async def run() -> None:
        try:
            await loop()
        except Exception as exc:  # noqa: BLE001 - a bug here must stop the worker
            await worker.fail(exc, what)
    run.__name__ = getattr(loop, "__name__", what)
    return run


def build_app(settings: Settings, definitions: Mapping[str, WaitDefinition] | None = None,
              *, started: Future[Mapping[str, WaitDefinition]] | None = None) -> faust.App:
    """Everything a worker process needs before faust runs, whichever way it is started
    (`xwait worker` or `faust -A streams.app worker`).

    The broker's side (topics, earlier workers, definitions) is `preflight`'s:
    `started` when the caller began it before importing this module (`xwait
    worker` does), else begun here.  Without `definitions`, the files of the
    topology are the newest and every version the deployment's workers
    published is kept (rule 13 of docs/rules.md)."""
    # `kill -USR1 <pid>`: every thread's stack into the worker's log
    # (docs/guides/operations.md, "Health endpoints").  Once faust runs, its frame
    # (mode) answers SIGUSR1 the same way; this covers what comes first and can wait
    # on a broker (topics, fleet check, definitions).
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    definitions = (started or preflight.begin(settings, definitions)).result()
    collector.tune(settings.gc_threshold)
    # faust's logging set-up leaves the client libraries' loggers open to
    # DEBUG: aiokafka then builds a log record per fetch and per send only to
    # drop it (a tenth of a worker's CPU, measured with py-spy).
    floor = logging.DEBUG if settings.log_level == "debug" else logging.INFO
    for name in ("aiokafka", "kafka", "faust", "mode"):
        logging.getLogger(name).setLevel(floor)
    worker = Worker(settings, definitions)
    watch = collector.GcWatch(worker.latency)
    watch.install()
    worker.gc_watch = watch
    return build(worker)


def run(settings: Settings, started: Future[Mapping[str, WaitDefinition]] | None = None
        ) -> None:
    """Run a worker in this process until it is stopped (SIGTERM / Ctrl-C)."""
    app = build_app(settings, started=started)
    sys.argv = ["xwait", "worker", f"--loglevel={settings.log_level}",
                f"--web-port={settings.web_port}", f"--web-host={settings.advertised_host}",
                f"--web-bind={settings.web_host}"]
    app.main()


__all__ = ["LeaderCheck", "XwaitApp", "build", "build_app", "run"]
