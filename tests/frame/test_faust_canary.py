"""What the worker relies on in faust-streaming, checked against the installed release.

The worker uses faust only for group membership, its tasks and its web
server (streams/frame/app.py), through public API.  These tests
pin down the behaviours behind that API that its guarantees rest on, so that
the day a release changes one, a test fails here rather than a standby going
cold or a key being routed nowhere (streams/frame/versions.py refuses to
start on a release these were not run against).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import faust
import pytest
from aiokafka.consumer.fetcher import Fetcher, OffsetResetStrategy
from aiokafka.consumer.subscription_state import SubscriptionState
from aiokafka.coordinator.protocol import ConsumerProtocolMemberMetadata
from aiokafka.errors import NotLeaderForPartitionError
from aiokafka.protocol.offset import OffsetRequest
from aiokafka.structs import TopicPartition
from faust.app.base import BootStrategy
from faust.assignor.client_assignment import ClientAssignment, ClientMetadata
from faust.tables.manager import TableManager
from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread
from mode import Service

from streams.errors import ConfigError
from streams.frame import versions
from streams.frame.app import NoTableManager

TOPIC = "canary-assignment"
PARTITIONS = 8


class _Cluster:
    """What the assignor asks of the cluster's metadata."""

    def partitions_for_topic(self, name: str) -> set[int] | None:
        return set(range(PARTITIONS)) if name == TOPIC else None


def _app(port: int, loop: asyncio.AbstractEventLoop) -> faust.App:
    """An app framed as the worker's: one agent on the assignment topic, no table."""
    app = faust.App("canary", broker="kafka://127.0.0.1:1", topic_disable_leader=True,
                    autodiscover=False, web_port=port, web_host="127.0.0.1", loop=loop)

    async def members(stream: Any) -> None:
        async for _ in stream:
            pass

    app.agent(app.topic(TOPIC, partitions=PARTITIONS), name=f"members-{port}")(members)
    return app


@pytest.fixture
def assigned() -> Iterator[dict[str, faust.App]]:
    """Two workers of one group after an assignment made by the first (the group leader)."""
    loop = asyncio.new_event_loop()
    apps = {"w1": _app(7101, loop), "w2": _app(7102, loop)}
    meta = {member: ConsumerProtocolMemberMetadata(
        _assignor(app).version, [TOPIC],
        ClientMetadata(assignment=ClientAssignment(actives={}, standbys={}),
                       url=str(app.conf.canonical_url), changelog_distribution={}).dumps())
        for member, app in apps.items()}
    out = _assignor(apps["w1"]).assign(_Cluster(), meta)
    for member, app in apps.items():
        _assignor(app).on_assignment(out[member])
    yield apps
    loop.close()


def _assignor(app: faust.App) -> Any:
    """faust's PartitionAssignor (typed by faust as its narrower interface)."""
    return app.assignor


def _partitions(tps: Any) -> set[int]:
    return {tp.partition for tp in tps if tp.topic == TOPIC}


def test_each_partition_has_one_owner_and_a_standby_on_the_other_worker(
    assigned: dict[str, faust.App],
) -> None:
    """faust gives standbys for every co-partitioned topic, not only tables' changelogs:
    the worker follows the changelog of the partitions it is standby for."""
    w1, w2 = (_assignor(assigned[m]) for m in ("w1", "w2"))
    actives1, actives2 = _partitions(w1.assigned_actives()), _partitions(w2.assigned_actives())
    assert actives1 | actives2 == set(range(PARTITIONS)) and not actives1 & actives2
    assert actives1 and actives2
    assert _partitions(w1.assigned_standbys()) == actives2
    assert _partitions(w2.assigned_standbys()) == actives1


def test_every_worker_learns_which_worker_owns_which_partition(
    assigned: dict[str, faust.App],
) -> None:
    """The console forwards a key's request to its owner's URL (`Worker.owners`)."""
    for app in assigned.values():
        meta = _assignor(app).external_topics_metadata()
        owners = {url: set(tps.get(TOPIC, ())) for url, tps in meta.items()}
        assert owners == {str(a.conf.canonical_url): _partitions(_assignor(a).assigned_actives())
                          for a in assigned.values()}


def test_the_consumer_is_given_only_the_actives_so_faust_never_fetches_a_standby(
    assigned: dict[str, faust.App],
) -> None:
    for app in assigned.values():
        kafka = dict(_assignor(app)._assignment.kafka_protocol_assignment(app.tables))
        assert set(kafka[TOPIC]) == _partitions(_assignor(app).assigned_actives())


def test_an_app_stops_itself_before_the_services_it_started() -> None:
    """`XwaitApp.on_stop` gives the partitions up before faust's consumer leaves the group:
    the consumer is one of the app's services, and a service stops itself first."""
    order: list[str] = []

    class Child(Service):
        async def on_stop(self) -> None:
            order.append("child")

    class Parent(Service):
        def on_init_dependencies(self) -> list[Service]:
            return [Child(loop=self.loop)]

        async def on_stop(self) -> None:
            order.append("parent")

    consumer = object()

    class Stub:
        """The parts of an app the boot strategy reads for its Kafka consumer."""

        _leader_assignor = _reply_consumer = object()

        def __init__(self) -> None:
            self.consumer = consumer

    class Strategy(BootStrategy):
        def sensors(self) -> list[Any]:
            return []

        kafka_producer = web_server = agents = kafka_conductor = tables = sensors

    stub: Any = Stub()
    assert consumer in list(Strategy(stub, enable_kafka_consumer=True).server())

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        parent = Parent(loop=loop)
        loop.run_until_complete(parent.start())
        loop.run_until_complete(parent.stop())
    finally:
        asyncio.set_event_loop(None)
        loop.close()
    assert order == ["parent", "child"]


def test_the_installed_releases_are_those_checked() -> None:
    versions.check()


def test_a_release_not_checked_is_refused_with_one_line_that_says_what_to_do() -> None:
    with pytest.raises(ConfigError) as refused:
        versions.check({"faust-streaming": "0.16.0", "aiokafka": "0.14.0"})
    text = str(refused.value)
    assert "\n" not in text
    assert "faust-streaming 0.15.3" in text and "0.16.0 is installed" in text
    assert "requirements.lock" in text and "test_faust_canary.py" in text


class _NoConsumer:
    """The two calls the table manager makes of a consumer, with nothing assigned."""

    def assignment(self) -> set[Any]:
        return set()

    def pause_partitions(self, tps: Any) -> None:
        assert not tps


def test_the_table_manager_without_tables_starts_without_faust_s_second_of_sleep() -> None:
    """`NoTableManager.on_start` is faust's own without the sleep: the group is joined a
    second sooner at every start, and a release whose `on_start` does more fails here."""
    source = inspect.getsource(TableManager.on_start)
    body = [line.strip() for line in source.splitlines()[1:]
            if line.strip() and not line.strip().startswith(('"""', "#"))]
    assert body == ["await self.sleep(1.0)", "if not self.should_stop:",
                    "await self._update_channels()", "await self.recovery.start()"]

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        app = faust.App("canary-tables", broker="kafka://127.0.0.1:1", autodiscover=False,
                        loop=loop, TableManager=NoTableManager)
        tables = app.tables
        assert isinstance(tables, NoTableManager)
        started: list[str] = []

        async def no_sleep(seconds: float) -> None:
            raise AssertionError(f"slept {seconds} s")

        async def recovery_start() -> None:
            started.append("recovery")

        # Set on objects of this test only (monkeypatch would read `app.consumer`
        # first, which makes faust's consumer thread and a loop of its own).
        tables.sleep = no_sleep  # type: ignore[method-assign, assignment]
        tables.recovery.start = recovery_start  # type: ignore[method-assign]
        # In a worker the consumer has started before the table manager (not here).
        app.consumer = _NoConsumer()  # type: ignore[assignment]
        loop.run_until_complete(tables.on_start())
        # The conductor subscribes once the tables are registered: now, without a wait.
        loop.run_until_complete(asyncio.wait_for(tables.wait_until_tables_registered(), 10))
    finally:
        asyncio.set_event_loop(None)
        loop.close()
    assert started == ["recovery"]


STALE_TP = TopicPartition(TOPIC, 0)


class _FormerLeader:
    """The client of aiokafka's fetcher after a broker froze and thawed: its metadata
    names node 1 as the partition's leader, node 1 no longer leads it and answers
    NotLeaderForPartition, node 2 does; a metadata refresh names node 2."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._metadata_max_age_ms = 300_000
        self.cluster = self
        self.leader = 1
        self.refreshes = 0
        self.asked: list[int] = []  # the node of each ListOffsets request

    def leader_for_partition(self, tp: TopicPartition) -> int:
        return self.leader

    def broker_metadata(self, node_id: int) -> None:
        return None

    def force_metadata_update(self) -> asyncio.Future[bool]:
        self.refreshes += 1
        self.leader = 2
        done = self._loop.create_future()
        done.set_result(True)
        return done

    async def _maybe_wait_metadata(self) -> None:
        return None

    async def send(self, node_id: int, request: Any, **kwargs: Any) -> Any:
        if not isinstance(request, OffsetRequest):
            await asyncio.Event().wait()  # a fetch: the topic carries nothing, ever
        self.asked.append(node_id)
        error = NotLeaderForPartitionError.errno if node_id == 1 else 0
        # ListOffsets v1: (partition, error, timestamp, offset); the topic is empty.
        return SimpleNamespace(API_VERSION=1, topics=[(TOPIC, [(0, error, -1, 0)])])


async def _until(condition: Callable[[], bool], what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {timeout} s")
        await asyncio.sleep(0.01)


def _with_a_newly_assigned_partition(check: Callable[[_FormerLeader, Fetcher, Any], Any]) -> None:
    """Run `check` beside aiokafka's fetcher once it has a partition just assigned,
    with no committed offset (the assignment topic's, always): its position is reset
    with a ListOffsets request to the leader the metadata names."""
    async def scenario() -> None:
        client = _FormerLeader()
        subscriptions = SubscriptionState()
        fetcher = Fetcher(client, subscriptions, retry_backoff_ms=10)
        subscriptions.assign_from_user({STALE_TP})
        state = subscriptions.subscription.assignment.state_value(STALE_TP)
        state.await_reset(OffsetResetStrategy.LATEST)
        try:
            await check(client, fetcher, state)
        finally:
            await fetcher.close()

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(scenario())
    finally:
        loop.close()


def test_aiokafka_s_position_reset_asks_a_former_leader_again_without_refreshing_metadata(
) -> None:
    """The bug `LeaderCheck` (streams/frame/app.py) works around: the day this fails,
    aiokafka refreshes its metadata on that path itself and the check can go."""
    async def check(client: _FormerLeader, fetcher: Fetcher, state: Any) -> None:
        await _until(lambda: len(client.asked) >= 5, "five position resets")
        assert set(client.asked) == {1}
        assert client.refreshes == 0
        assert not state.has_valid_position

    _with_a_newly_assigned_partition(check)


def test_asking_the_end_offsets_refreshes_the_metadata_and_the_position_reset_then_succeeds(
) -> None:
    """What `LeaderCheck` relies on: aiokafka's `end_offsets` (faust's `highwaters`)
    refreshes the metadata on NotLeaderForPartition and asks the new leader; the
    fetcher's position reset then asks node 2 too, and the partition has a position."""
    async def check(client: _FormerLeader, fetcher: Fetcher, state: Any) -> None:
        await _until(lambda: len(client.asked) >= 2, "two position resets")
        assert await fetcher.end_offsets([STALE_TP], 5_000) == {STALE_TP: 0}
        await _until(lambda: state.has_valid_position, "a position after the refresh")
        assert client.refreshes == 1
        assert state.position == 0
        first_new = client.asked.index(2)
        assert set(client.asked[:first_new]) == {1} and set(client.asked[first_new:]) == {2}

    _with_a_newly_assigned_partition(check)


def test_faust_s_highwaters_asks_aiokafka_s_end_offsets_outside_a_transaction() -> None:
    """`LeaderCheck` asks through faust's public `Consumer.highwaters`; the worker's app
    is at_least_once for faust (no faust transaction), where that is `end_offsets`."""
    source = inspect.getsource(AIOKafkaConsumerThread._highwaters)
    body = [line.strip() for line in source.splitlines()[1:] if line.strip()]
    assert body == ["consumer = self._ensure_consumer()",
                    "if self.consumer.in_transaction:",
                    "return {tp: consumer.last_stable_offset(tp) for tp in partitions}",
                    "else:",
                    "return cast(Mapping[TP, int], await consumer.end_offsets(partitions))"]
