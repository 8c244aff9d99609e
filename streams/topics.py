"""The contract's topics: declared in topology/topics.yaml, created with confluent-kafka.

Co-partitioning is what makes one wait's records meet in one worker, so the
admin refuses to call a set of topics healthy when their partition counts
differ, and says which topic is off.  On a replicated cluster it also calls
unhealthy what loses or refuses writes: fewer replicas than the setting, a
different `min.insync.replicas`, a partition whose in-sync replicas are
fewer than its replicas (under-replicated) or that has no leader.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from streams.config import Settings
from streams.errors import ConfigError, KafkaUnavailable, TopologyError
from streams.kafka_errors import error_code

log = logging.getLogger(__name__)

# How long an admin call may take before the CLI gives up and says the broker
# is unreachable; a healthy local broker answers in milliseconds.
ADMIN_TIMEOUT_S = 15.0
_TIMED_OUT = getattr(KafkaError, "_TIMED_OUT")  # noqa: B009 - librdkafka's local time-out
# One DescribeConfigs ask (see `_configs`): a live broker answers in milliseconds.
_CONFIG_ASK_S = 4.0
# Between two metadata requests while waiting for new topics to show.
_VISIBLE_POLL_S = 0.1
# How long new topics may take to show, each partition led: the controller elects their
# leaders in its own time, and a broker serving two test suites (load ~70) took longer
# than 15 s for ten of them.  A healthy broker shows them in milliseconds.
VISIBLE_TIMEOUT_S = 60.0

# Topic settings the service's guarantees rest on: a topic whose broker value
# differs is unhealthy, not merely tuned.  `message.timestamp.type` of the
# input topics is what lets the broker's clock decide a reply against its
# deadline (docs/concepts/race.md); `cleanup.policy` keeps the changelog compacted
# and the event topics from being compacted away.
REQUIRED_CONFIG = ("message.timestamp.type", "cleanup.policy", "min.insync.replicas")
MIN_INSYNC = "min.insync.replicas"


@dataclass(frozen=True)
class TopicSpec:
    role: str  # requests, replies, ... (the name used in code)
    name: str  # the topic's real name, prefix applied
    partitions: int
    replication_factor: int
    config: dict[str, str]  # min.insync.replicas included
    doc: str


@dataclass(frozen=True)
class TopicState:
    spec: TopicSpec
    exists: bool
    partitions: int | None  # what the broker has, None when missing
    config: dict[str, str]
    # The fewest replicas any partition has (None when missing), and the
    # partitions whose in-sync replicas are fewer than their replicas, or
    # that have no leader, as the metadata said at the time.
    replication_factor: int | None = None
    under_replicated: tuple[int, ...] = ()
    leaderless: tuple[int, ...] = ()

    @property
    def matches(self) -> bool:
        return (self.exists and self.partitions == self.spec.partitions
                and not self.config_problems and not self.replica_problems)

    @property
    def replica_problems(self) -> list[str]:
        """What loses or refuses writes on this topic now, each in one line."""
        if not self.exists:
            return []
        problems = []
        rf, want = self.replication_factor or 0, self.spec.replication_factor
        if rf < want:
            problems.append(f"replication factor {rf}, expected {want} (a broker's loss "
                            "loses data or stops writes: recreate it, or reassign partitions)")
        isr = int(self.config.get(MIN_INSYNC) or 1)
        if rf and isr > rf:
            problems.append(f"min.insync.replicas={isr} above its {rf} replicas: every "
                            "write is refused")
        if self.leaderless:
            problems.append(f"no leader for partitions {_ranges(self.leaderless)}: nothing is "
                            "written or read there until one of their replicas is back")
        if self.under_replicated:
            problems.append(f"under-replicated partitions {_ranges(self.under_replicated)} "
                            "(fewer replicas in sync than assigned: a broker is down or behind)")
        return problems

    @property
    def config_problems(self) -> list[str]:
        """Required settings (`REQUIRED_CONFIG`) the broker holds differently from topics.yaml."""
        if not self.exists:
            return []
        return [f"{key}={self.config.get(key) or '(default)'}, expected {want}"
                for key, want in self.spec.config.items()
                if key in REQUIRED_CONFIG and self.config.get(key) != want]


# The worker's own topics, as topology/topics.yaml declares them; a topics.yaml
# that lacks one (written for an earlier version) gets it from here.
INTERNAL_TOPICS: dict[str, dict[str, Any]] = {
    "receipts": {
        "name": "{prefix}.receipts",
        "doc": "Receipt records, keyed by the receipt id: what became of a reply or command "
               "whose sender asked (the xwait-receipt header).",
        "config": {"cleanup.policy": "delete", "retention.ms": "3600000"},
    },
    "definitions": {
        "name": "{prefix}.definitions",
        "doc": "Every version of every wait definition the workers have used; compacted.",
        "config": {"cleanup.policy": "compact"},
    },
    "waits-changelog": {
        "name": "{app}-waits-changelog",
        "doc": "Changelog of the waits table (state of every wait and its early replies).",
        "config": {"cleanup.policy": "compact", "min.compaction.lag.ms": "60000"},
    },
    "assignment": {
        "name": "{app}-assignment",
        "doc": "Internal, never written: its partitions stand for the waits' partitions "
               "in the workers' consumer group.",
        "config": {"cleanup.policy": "delete", "retention.ms": "3600000"},
    },
}


def changelog_topic(settings: Settings) -> str:
    """The changelog of the waits' state: partition p holds the rows of input partition p."""
    return str(INTERNAL_TOPICS["waits-changelog"]["name"]).format(app=settings.app_id)


def assignment_topic(settings: Settings) -> str:
    """The topic whose partitions stand for the waits' partitions in faust's group."""
    return str(INTERNAL_TOPICS["assignment"]["name"]).format(app=settings.app_id)


def _ranges(partitions: tuple[int, ...]) -> str:
    return ", ".join(str(p) for p in partitions)


def default_min_insync(replication_factor: int) -> int:
    """2 from three replicas up (a write survives one broker's loss, and one broker
    may be down for maintenance without stopping writes), else 1."""
    return 2 if replication_factor >= 3 else 1


def load_specs(settings: Settings, path: Path | None = None) -> list[TopicSpec]:
    """Read topics.yaml; `settings.partitions` overrides the file's count, and the
    replication settings (XWAIT_REPLICATION_FACTOR, XWAIT_MIN_INSYNC_REPLICAS) the
    file's `replication_factor` and `min_insync_replicas`."""
    path = path or settings.topology / "topics.yaml"
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise TopologyError(f"{path}: cannot read the topic declarations ({exc})") from exc
    except yaml.YAMLError as exc:
        raise TopologyError(f"{path}: not valid YAML ({exc})") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("topics"), dict):
        raise TopologyError(f"{path}: field 'topics': expected a mapping of role to topic")
    rf = settings.replication_factor or doc.get("replication_factor", 1)
    if not isinstance(rf, int) or rf < 1:
        raise TopologyError(f"{path}: field 'replication_factor': expected a whole number >= 1")
    min_isr = settings.min_insync_replicas or doc.get("min_insync_replicas")
    if min_isr is None:
        min_isr = default_min_insync(rf)
    if not isinstance(min_isr, int) or min_isr < 1:
        raise TopologyError(f"{path}: field 'min_insync_replicas': expected a whole number >= 1")
    if min_isr > rf:
        raise ConfigError(f"min.insync.replicas {min_isr} is above the replication factor "
                          f"{rf}: every write would be refused (XWAIT_MIN_INSYNC_REPLICAS, "
                          "XWAIT_REPLICATION_FACTOR)")
    specs = []
    declared = dict(doc["topics"])
    for role, body in INTERNAL_TOPICS.items():
        declared.setdefault(role, body)  # a topology of an earlier version lacks them
    for role, body in declared.items():
        if not isinstance(body, dict) or not isinstance(body.get("name"), str):
            raise TopologyError(f"{path}: field 'topics.{role}.name': expected a string")
        config = body.get("config") or {}
        if not isinstance(config, dict):
            raise TopologyError(f"{path}: field 'topics.{role}.config': expected a mapping")
        specs.append(
            TopicSpec(
                role=str(role),
                name=body["name"].format(prefix=settings.topic_prefix, app=settings.app_id),
                partitions=settings.partitions,
                replication_factor=rf,
                config={**{str(k): str(v) for k, v in config.items()},
                        MIN_INSYNC: str(min_isr)},
                doc=str(body.get("doc", "")),
            )
        )
    return specs


def admin_client(settings: Settings) -> AdminClient:
    return AdminClient(settings.confluent())


def _metadata(admin: AdminClient) -> Any:
    try:
        return admin.list_topics(timeout=ADMIN_TIMEOUT_S)
    except KafkaException as exc:
        raise KafkaUnavailable(f"the broker did not answer a metadata request: {exc}") from exc


def _existing(admin: AdminClient) -> dict[str, int]:
    return {name: len(t.partitions) for name, t in _metadata(admin).topics.items()}


def _configs(settings: Settings, admin: AdminClient, names: list[str]
             ) -> dict[str, dict[str, str]]:
    """The topics' configurations, asked again through a new client when one times out.

    librdkafka sends DescribeConfigs to the broker the metadata names as
    controller, which a KRaft cluster picks at random among the brokers it
    thinks alive: for seconds after a broker dies, that may be the dead one,
    and the request waits out its timeout (measured: 1 ask in 4).  A new
    client asks a new metadata request, most likely naming a live broker.
    """
    if not names:
        return {}
    resources = [ConfigResource(ConfigResource.Type.TOPIC, n) for n in names]
    deadline = time.monotonic() + ADMIN_TIMEOUT_S
    while True:
        configs: dict[str, dict[str, str]] = {}
        try:
            for resource, future in admin.describe_configs(
                    resources, request_timeout=_CONFIG_ASK_S).items():
                entries: dict[str, Any] = future.result(timeout=_CONFIG_ASK_S + 1)
                configs[resource.name] = {k: str(v.value) for k, v in entries.items()}
            return configs
        except (KafkaException, TimeoutError) as exc:
            # Also a topic just created that the broker asked does not know yet: on a
            # three-node cluster that had just started, the describe after a create went
            # to a node its metadata had not reached (UNKNOWN_TOPIC_OR_PART).
            timed_out = isinstance(exc, TimeoutError) or \
                error_code(exc) in (_TIMED_OUT, KafkaError.UNKNOWN_TOPIC_OR_PART)
            if not timed_out or time.monotonic() + _CONFIG_ASK_S > deadline:
                raise KafkaUnavailable(f"describe_configs {', '.join(names)}: {exc}") from exc
            log.info("describe_configs timed out, asking again: %s", exc)
            admin = admin_client(settings)


def describe(settings: Settings, specs: list[TopicSpec]) -> list[TopicState]:
    admin = admin_client(settings)
    topics = _metadata(admin).topics
    configs = _configs(settings, admin, [s.name for s in specs if s.name in topics])
    states = []
    for s in specs:
        meta = topics.get(s.name)
        parts = sorted(meta.partitions.values(), key=lambda p: p.id) if meta else []
        states.append(TopicState(
            spec=s,
            exists=meta is not None,
            partitions=len(parts) if meta is not None else None,
            config={k: configs.get(s.name, {}).get(k, "") for k in s.config},
            replication_factor=min((len(p.replicas) for p in parts), default=0)
            if meta is not None else None,
            under_replicated=tuple(p.id for p in parts if len(p.isrs) < len(p.replicas)),
            leaderless=tuple(p.id for p in parts if p.leader < 0),
        ))
    return states


def _not_ready(admin: AdminClient, names: list[str]) -> list[str]:
    """The topics of `names` the broker's metadata does not list with a leader per partition."""
    try:
        meta = admin.list_topics(timeout=ADMIN_TIMEOUT_S)
    except KafkaException as exc:
        raise KafkaUnavailable(f"the broker did not answer a metadata request: {exc}") from exc
    missing = []
    for name in names:
        topic = meta.topics.get(name)
        if (topic is None or topic.error is not None or not topic.partitions
                or any(p.leader < 0 or p.error is not None for p in topic.partitions.values())):
            missing.append(name)
    return missing


def wait_visible(admin: AdminClient, names: list[str]) -> None:
    """Return once a metadata request lists every topic in `names`, each partition led.

    A created topic reaches the broker's metadata cache a moment after
    CreateTopics answers, and its partitions get their leader a moment after
    that: a describe right after a create (what `create` reports) could call
    the new topics missing, and a producer started right after `xwait topics
    create` was told "topic does not exist" (seen on a busy machine).
    """
    deadline = time.monotonic() + VISIBLE_TIMEOUT_S
    while names:
        missing = _not_ready(admin, names)
        if not missing:
            return
        if time.monotonic() > deadline:
            raise KafkaUnavailable(f"created topics did not show in the broker's metadata, "
                                   f"each partition with a leader, within "
                                   f"{VISIBLE_TIMEOUT_S:.0f}s: {', '.join(missing)}")
        time.sleep(_VISIBLE_POLL_S)


@dataclass(frozen=True)
class CreateReport:
    created: list[str]
    existed: list[str]
    mismatched: list[TopicState]


def create(settings: Settings, specs: list[TopicSpec]) -> CreateReport:
    """Create what is missing; never alter what exists (that is a migration)."""
    admin = admin_client(settings)
    meta = _metadata(admin)
    existing = {name: len(t.partitions) for name, t in meta.topics.items()}
    missing = [s for s in specs if s.name not in existing]
    wanted = max((s.replication_factor for s in missing), default=0)
    if wanted > len(meta.brokers):
        raise ConfigError(f"replication factor {wanted}, but the cluster has "
                          f"{len(meta.brokers)} broker{'s' if len(meta.brokers) != 1 else ''}: "
                          "set XWAIT_REPLICATION_FACTOR (or --replication-factor) to at most "
                          "that")
    created: list[str] = []
    existed = [s.name for s in specs if s.name in existing]
    if missing:
        futures = admin.create_topics(
            [NewTopic(s.name, s.partitions, s.replication_factor, config=s.config)
             for s in missing],
            operation_timeout=ADMIN_TIMEOUT_S,
        )
        for name, future in futures.items():
            try:
                future.result(timeout=ADMIN_TIMEOUT_S)
                created.append(name)
                log.info("topic created topic=%s", name)
            except KafkaException as exc:
                if error_code(exc) == KafkaError.TOPIC_ALREADY_EXISTS:
                    existed.append(name)  # another process created it meanwhile
                    continue
                raise KafkaUnavailable(f"creating topic {name}: {exc}") from exc
        wait_visible(admin, created)
    states = describe(settings, specs)
    # Another node's metadata may not list them yet (describe asks a new client).
    deadline = time.monotonic() + ADMIN_TIMEOUT_S
    while (any(not st.exists for st in states if st.spec.name in created)
           and time.monotonic() < deadline):
        time.sleep(_VISIBLE_POLL_S)
        states = describe(settings, specs)
    return CreateReport(
        created=created,
        existed=existed,
        mismatched=[st for st in states if not st.matches],
    )


def ensure(settings: Settings) -> CreateReport:
    """What a worker does at start: create the topics that are missing, and refuse to
    run on topics whose partition counts differ (a wait's records would not meet)."""
    report = create(settings, load_specs(settings))
    counts = [st for st in report.mismatched if st.exists and st.partitions != st.spec.partitions]
    if counts:
        raise TopologyError(
            "Expected every topic to have " f"{settings.partitions} partitions "
            "(XWAIT_PARTITIONS), but " + ", ".join(f"{st.spec.name} has {st.partitions}"
                                                   for st in counts)
            + ": co-partitioning is broken; see `xwait topics describe`")
    for st in report.mismatched:
        for problem in (*st.config_problems, *st.replica_problems):
            log.warning("topic %s: %s (see `xwait topics describe`)", st.spec.name, problem)
    return report
