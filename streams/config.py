"""Settings of a worker, the CLI and the SDK, read from the environment.

Every setting has an `XWAIT_*` variable and a default that works on a
developer's machine against `scripts/kafka start`; the CLI's flags override
the environment.  One frozen object is built at start-up and passed down, so
nothing reads `os.environ` later.
"""

from __future__ import annotations

import logging
import math
import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from streams.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parent.parent
"""The checkout this module runs from, or ``site-packages`` when installed from a wheel."""

PACKAGED_TOPOLOGY = Path(str(resources.files("streams") / "topology"))
"""The example topology shipped inside the package (``topology/`` in a checkout links to it).

A wheel installs unpacked, so the resource is a real folder and can be a
``Path``; the definitions loader and ``topics.yaml`` reader need one."""

IN_CHECKOUT = (REPO_ROOT / "pyproject.toml").is_file()
"""True when running from a source checkout (editable install), False from a wheel."""

DEFAULT_DATA_DIR = (REPO_ROOT if IN_CHECKOUT else Path()) / ".xwait" / "worker"
"""The checkout's ``.xwait/worker`` (which ``scripts/kafka reset`` clears), or
``./.xwait/worker`` under the working directory for an installed package,
never a folder inside ``site-packages``."""

LIBRDKAFKA_LOGGER = logging.getLogger("streams.librdkafka")

# How often every librdkafka client refreshes its topics' metadata whatever happens
# (librdkafka's default: 5 minutes).  A producer whose partitions lost their leader
# while the broker restarted can keep them leaderless in its cache until then: a
# worker's commit waited in its changelog flush for minutes after a broker restart
# in CI, deciding nothing (librdkafka issues 569, 4976; confluent-kafka-go 196 report
# the same 5 minutes).  One metadata request per client every 10 s costs nothing.
METADATA_REFRESH_MS = 10_000
"""Where every confluent-kafka client built from :meth:`Settings.confluent` logs.

Without a logger librdkafka writes each retry straight to stderr: a CLI
command against a broker that is down printed ~290 such lines.  Through
Python logging the CLI silences them (it reports the outcome in one line
of its own) and a worker shows them with its other log lines."""

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_SASL_MECHANISM = "PLAIN"
"""What the configuration reference promises and the worker's aiokafka side uses when none is set;
librdkafka's own default (GSSAPI) needs Kerberos, which no xwait install has."""

DEFAULT_CONSOLE_URL = "http://127.0.0.1:6066"
# Bind addresses that mean "every interface": reachable, but not an address.
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})  # noqa: S104 - names them, binds nothing


class Guarantee(StrEnum):
    AT_LEAST_ONCE = "at_least_once"
    EXACTLY_ONCE = "exactly_once"


@dataclass(frozen=True)
class Security:
    """Kafka client security; empty means PLAINTEXT (the local broker)."""

    protocol: str = "PLAINTEXT"  # PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
    """`PLAINTEXT`, `SSL`, `SASL_PLAINTEXT` or `SASL_SSL`: how every Kafka client of
    xwait (the worker's, the CLI's, the SDK's) connects."""
    sasl_mechanism: str | None = None  # PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512
    """`PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`.

    Default: `PLAIN` (with a SASL protocol)"""
    sasl_username: str | None = None
    """The SASL user; required with a SASL protocol.

    Default: unset"""
    sasl_password: str | None = field(default=None, repr=False)
    """The SASL password: only from the environment (a flag would show in the
    process list); required with a SASL protocol.

    Default: unset"""
    ssl_cafile: str | None = None
    """The CA certificate(s) to trust (PEM). A file that cannot be read, or that
    librdkafka refuses, is a configuration error.

    Default: the system's"""
    ssl_certfile: str | None = None
    """The client certificate (PEM), for brokers that authenticate clients by TLS.

    Default: unset"""
    ssl_keyfile: str | None = None
    """The client certificate's private key (PEM).

    Default: unset"""

    def confluent(self) -> dict[str, str]:
        """The same settings in librdkafka's vocabulary.

        SASL without a mechanism means PLAIN, as for the worker's aiokafka
        clients: left unset, librdkafka would try GSSAPI and every client
        would fail with "No provider for SASL mechanism GSSAPI".
        """
        conf = {"security.protocol": self.protocol}
        mechanism = self.sasl_mechanism
        if mechanism is None and self.protocol.startswith("SASL"):
            mechanism = DEFAULT_SASL_MECHANISM
        optional = {
            "sasl.mechanisms": mechanism,
            "sasl.username": self.sasl_username,
            "sasl.password": self.sasl_password,
            "ssl.ca.location": self.ssl_cafile,
            "ssl.certificate.location": self.ssl_certfile,
            "ssl.key.location": self.ssl_keyfile,
        }
        conf.update({k: v for k, v in optional.items() if v})
        return conf


def default_app_id(topic_prefix: str) -> str:
    """The consumer group (and changelog prefix) of the workers of one topic prefix.

    Derived from the prefix so that two deployments sharing a cluster under
    different prefixes never join each other's group or share a changelog.
    """
    return f"{topic_prefix}-processor"


@dataclass(frozen=True)
class Settings:
    bootstrap: str = "127.0.0.1:9092"
    """Kafka bootstrap servers, `host:port[,host:port...]`."""
    topic_prefix: str = "xwait"
    """Prefix of every topic name (`<prefix>.requests`, ...): two deployments on one
    cluster use two prefixes."""
    # Empty means default_app_id(topic_prefix); XWAIT_APP_ID overrides it.
    app_id: str = ""
    """Consumer group of the workers, and prefix of their changelog and assignment
    topics; derived from the topic prefix, so two deployments on one cluster never
    share a group.

    Default: `<prefix>-processor`"""
    partitions: int = 8
    """Partitions of every topic (the same for all: a wait's records meet in one
    partition). Fixed when the topics are made: make it the most workers you will
    ever run."""
    # Replicas of every topic `xwait topics create` makes, and how many of them
    # must hold a write before Kafka acknowledges it.  None: topics.yaml's
    # (1 in the example: one broker); with min ISR unset, 2 from 3 replicas
    # up, else 1 (see streams.topics.default_min_insync).
    replication_factor: int | None = None
    """Replicas of every topic `xwait topics create` makes; refused when the cluster
    has fewer brokers. Production: 3.

    Default: `replication_factor` of `topics.yaml` (1 in the example)"""
    min_insync_replicas: int | None = None
    """The topics' `min.insync.replicas`: replicas that must hold a write before
    Kafka acknowledges it (every producer of xwait writes with `acks=all`); above
    the replication factor is refused.

    Default: 2 from 3 replicas up, else 1"""
    topology: Path = PACKAGED_TOPOLOGY
    """Folder with `topics.yaml` and `waits/*.yaml`: point it at your own
    definitions.

    Default: the examples shipped in the package (`topology/` in a checkout)"""
    data_dir: Path = DEFAULT_DATA_DIR
    """The worker's RocksDB folder (one database a partition, in
    `<app id>/waits-<p>`); losing it costs a restore from the changelog.

    Default: `.xwait/worker` of the checkout; of the working directory when installed"""
    guarantee: Guarantee = Guarantee.AT_LEAST_ONCE
    """`at_least_once` or `exactly_once`: what a consumer of outcomes and actions
    sees after a crash (docs/concepts/guarantees.md)."""
    # How often the stream clock probes the inputs' end offsets: the stream time
    # of a quiet partition, whose due timers the applier then fires.  A quiet
    # partition's deadline lateness is about one tick; each tick costs one
    # ListOffsets request per owned input partition.  At 500 waits/s on one
    # worker (when timers still went through a topic), interleaved runs:
    # lateness p99 410-576 ms at 0.1 s, 546-758 ms (once 4.4 s) at 0.2 s.
    timer_tick: float = 0.1
    """Seconds between the stream clock's ticks: each probes the inputs' end offsets, the
    stream time of a quiet partition, whose due timers then fire (their lateness
    is about one tick)."""
    # How long the group waits for a silent worker before moving its
    # partitions: the time a kill -9 leaves them unprocessed.  Shorter fails
    # over faster but evicts a worker whose event loop stalls that long.
    session_timeout: float = 20.0
    """Seconds before the group moves a silent worker's partitions: how long a
    kill -9 leaves them undecided."""
    connect_timeout: float = 5.0
    """Seconds a command (the CLI, the webhook adapter) waits for the broker's first
    answer before it says Kafka is unreachable (exit 3), a short command's own
    start-up included; the SDK's clients wait as long for each answer they cannot go
    on without (KafkaUnavailable). Raise it for a cluster slow to answer (far away,
    or busy)."""
    # Net allocations between passes of Python's young-generation garbage
    # collector (Python's default: 700).  Decisions allocate many short-lived,
    # acyclic objects; fewer passes were 6-23% more records per second on a
    # worker (streams.processor.collector).
    gc_threshold: int = 20_000
    """Allocations between passes of Python's young-generation garbage collector
    (Python's default is 700; deciding makes many short-lived objects).
    `/xwait/stats` shows each pass's time (`latencyMs.gc_us`) and the passes per
    generation (`gcPasses`)."""
    # The native record path decides what the Python one decides, at a fraction
    # of its CPU (docs/speed.md); tests hold the two equal.  Off, or where the
    # extension is not built, every record is decided in Python.
    pure_python: bool = False
    """`1`: decide every record with the Python rules, never the native record path
    (`streams._native`, built by `make venv`; docs/concepts/native.md). Equal
    decisions, more CPU: for comparing the two, or to rule the native path out.
    Without the extension the worker decides in Python anyway, and says so once
    at start.

    Default: `0`"""
    # How long the input fetch waits at the broker for records, and the most
    # between the starts of two batches (0: a batch starts as soon as the
    # previous one is committed; a full batch always does).  A batch starts
    # sooner once the records of a fetch taken since the last one are released
    # (the probe for them is sent when they are taken): about one batch a
    # fetch.  Records and due timers that come meanwhile wait for the next
    # batch: fewer, larger batches, for more latency (measured at 0.05 when
    # fetch, probe and batch each waited up to it, the median rose 40-65 ms;
    # docs/speed.md has what following the fetch took off).  At most
    # MAX_BATCH_LINGER.  A batch's fixed costs and its decisions' cold caches
    # made many small batches dear: at 0.05 against 0, interleaved open runs
    # took 35% less CPU per event at 500 waits/s (564-620 against 917-940 us)
    # and 42-50% less at 100 waits/s, for reply p99 163-178 ms against 89-350
    # (docs/speed.md, "CPU by load, and the batch linger").
    batch_linger: float = 0.05
    """How long the input fetch waits at the broker for records to gather; a batch
    starts when a fetch's records are released, and at most this long after the
    previous batch started (a full batch of 500 at once). Fewer, larger batches,
    for less CPU per record and up to about this much more latency. At most 1 s;
    `0` for the lowest latency (docs/speed.md measures both)."""
    # How long after its append an input record may still be invisible to
    # consumers: Kafka shows a record once it is committed (copied to the
    # in-sync replicas; a producer's transaction committed), and a worker
    # proves a quiet topic holds nothing older than T only by an end-offset
    # probe sent this long after T.  A record appended before a deadline and
    # committed no later than this after it is decided before the deadline;
    # each record and timer waits this long on a quiet topic's proof.  None
    # (auto): REPLICATED_COMMIT_GRACE when an input topic has more than one
    # replica, else 0 (one replica: a record is committed as it is appended).
    commit_grace: float | None = None
    """Seconds after its append that an input record may still be uncommitted
    (replication to the in-sync replicas, a producer's transaction) and keep its
    place in the broker's order: a probe proves a quiet topic only up to its send
    time minus this, so records and timers wait this long on it. `auto`: 0.2 on
    input topics with more than one replica, 0 with one (looked at again every 5
    minutes). At most 30; `/xwait/stats` shows it as `commitGraceMs`.

    Default: `auto`"""
    # /readyz holds a worker back until every input partition it owns is at most
    # this many records behind (after each takeover): some 15 s of one input
    # partition's records at 500 waits/s over 8 partitions.  Far more lets a
    # rolling restart move on while replies wait behind a backlog; far less
    # keeps a worker out under any burst.
    ready_max_lag: int = 1000
    """Records an owned input partition may be behind for `/readyz` to say ready
    after a takeover."""
    web_port: int = 6066
    """Port of the worker's web server: the console, the API, `/metrics`,
    `/healthz`, `/readyz`."""
    web_host: str = "127.0.0.1"
    """Address the web server binds (`0.0.0.0` for every interface)."""
    # The host other workers (and the console's forwarding) use to reach this
    # one; None means web_host, or this machine's host name when web_host is
    # a wildcard bind such as 0.0.0.0, which no peer can connect to.
    web_advertised_host: str | None = None
    """Host name or address other workers use to forward console and API requests
    to this one.

    Default: `XWAIT_WEB_HOST`, or the host name when that is `0.0.0.0`"""
    # The console's API: the command token also reads; the read token only
    # reads.  With neither, reads are open and commands disabled (a worker
    # on a developer's loopback); with either, every read needs a token.
    console_token: str | None = field(default=None, repr=False)
    """Token for commands and reads in the console and the API (`status`, `list`,
    the key checks of `reply`, the operator commands, `result` and the SDK send
    it too). Without either token, reads are open and commands answer 503.

    Default: unset"""
    console_read_token: str | None = field(default=None, repr=False)
    """A second token that only reads (lists, status, the review queue); with
    either token set, every read needs one.

    Default: unset"""
    security: Security = Security()
    log_level: str = "info"
    """`debug`, `info`, `warning`, `error` or `critical`."""
    # The worker web API the CLI and the SDK ask (status, list, and the key
    # check before a reply or command).
    console_url: str = DEFAULT_CONSOLE_URL
    """The worker `status` and `list` ask, and that `reply`, the operator commands,
    `result` and the SDK ask whether a key exists."""
    # A Confluent-compatible Schema Registry; None means Avro single-object
    # encoding and no registry (see streams.codec.registry).
    schema_registry_url: str | None = None
    """A Confluent-compatible Schema Registry (for Apicurio: `.../apis/ccompat/v7`):
    outputs and the SDK's records in the Confluent wire format, Confluent-framed
    input read by its schema id.

    Default: unset: Avro single-object encoding"""
    # Where a worker's time comes from (streams.testing.clock): the wall clock, or
    # for the test kit a file it moves (streams.testing.kit).  Anything but `wall`
    # in production would decide deadlines by a file: a worker refuses it on
    # input topics the broker stamps, which production's are.
    clock: str = "wall"
    """`wall`, or `file:PATH` for tests only: the worker's time (its stream time, timers
    and decisions) is the epoch milliseconds written in PATH, which the test kit
    (`streams.testing.kit`, docs/guides/testing.md) moves forward.
    Refused on input topics stamped by the broker (`LogAppendTime`, as `xwait topics
    create` makes them)."""
    # True when app_id was derived from the prefix, so a changed prefix
    # (`--prefix`) derives it again instead of keeping the old prefix's group.
    app_id_derived: bool = field(default=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.app_id:
            object.__setattr__(self, "app_id", default_app_id(self.topic_prefix))
            object.__setattr__(self, "app_id_derived", True)

    def topic(self, name: str) -> str:
        return f"{self.topic_prefix}.{name}"

    @property
    def advertised_host(self) -> str:
        """The host part of this worker's URL (an IPv6 literal in brackets)."""
        host = self.web_advertised_host or (
            socket.gethostname() if self.web_host in WILDCARD_HOSTS else self.web_host)
        return f"[{host}]" if ":" in host and not host.startswith("[") else host

    def confluent(self, **extra: Any) -> dict[str, Any]:
        """Base confluent-kafka configuration for producers, consumers, admin.

        librdkafka's log goes to :data:`LIBRDKAFKA_LOGGER` (``extra`` may name
        another ``logger``).
        """
        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap,
                                "logger": LIBRDKAFKA_LOGGER,
                                "topic.metadata.refresh.interval.ms": METADATA_REFRESH_MS}
        conf.update(self.security.confluent())
        conf.update(extra)
        return conf

    def with_overrides(self, **changes: Any) -> Settings:
        given = {k: v for k, v in changes.items() if v is not None}
        if self.app_id_derived and "app_id" not in given:
            given["app_id"] = ""  # derive it again from the (new) prefix
        return replace(self, **given)


_N = TypeVar("_N", int, float)


def _parsed(env: Mapping[str, str], name: str, parse: Callable[[str], _N],
            expected: str) -> tuple[str, _N] | None:
    """The variable's text and its value; None when it is unset or empty."""
    raw = env.get(name)
    if raw is None or raw == "":
        return None
    try:
        return raw, parse(raw)
    except ValueError as exc:
        raise ConfigError(f"{name}={raw!r}: expected {expected}") from exc


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    given = _parsed(env, name, int, "a whole number")
    if given is None:
        return default
    raw, value = given
    if value <= 0:
        raise ConfigError(f"{name}={raw!r}: expected a number above zero")
    return value


def _flag(env: Mapping[str, str], name: str) -> bool:
    raw = (env.get(name) or "").strip().lower()
    if raw in ("", "0", "false", "no"):
        return False
    if raw in ("1", "true", "yes"):
        return True
    raise ConfigError(f"{name}={env[name]!r}: expected 1 (on) or 0 (off)")


def _optional_int(env: Mapping[str, str], name: str) -> int | None:
    if not env.get(name):
        return None
    return _int(env, name, 0)


def _float(env: Mapping[str, str], name: str, default: float, *,
           zero: bool = False) -> float:
    """A number of seconds above zero (`zero`: or zero)."""
    given = _parsed(env, name, float, "a number of seconds")
    if given is None:
        return default
    raw, value = given
    in_range = value >= 0 if zero else value > 0  # False for NaN
    if not (in_range and math.isfinite(value)):
        least = "of 0 or more" if zero else "above zero"
        raise ConfigError(f"{name}={raw!r}: expected a number {least}")
    return value


LOG_LEVELS = {"debug": "debug", "info": "info", "warn": "warn", "warning": "warn",
              "error": "error", "crit": "crit", "critical": "crit"}


def log_level(raw: str) -> str:
    """The worker's log level in faust's vocabulary (it knows "warn", not "warning")."""
    level = LOG_LEVELS.get(raw.lower())
    if level is None:
        raise ConfigError(f"log level {raw!r}: expected one of debug, info, warning, error, "
                          "critical")
    return level


# The longest batch linger taken: beyond it the fetch would hold records so long
# that the intake takes the fetch for stuck (`streams.processor.tuning.Tuning.stuck_s`).
MAX_BATCH_LINGER = 1.0
# XWAIT_COMMIT_GRACE's default on replicated input topics: a follower's round
# trip takes milliseconds on a healthy cluster; on three brokers beside a
# worker on two cores, a reply appended 29 ms before its deadline was not
# yet committed when a probe proved its topic empty past the deadline
# (tests/cluster/test_cluster_crash.py escalated it).
REPLICATED_COMMIT_GRACE = 0.2
MAX_COMMIT_GRACE = 30.0


def from_env(env: Mapping[str, str] | None = None) -> Settings:
    """Build settings from `XWAIT_*` variables (docs/reference/configuration.md)."""
    env = os.environ if env is None else env
    guarantee_raw = env.get("XWAIT_GUARANTEE", Guarantee.AT_LEAST_ONCE.value)
    try:
        guarantee = Guarantee(guarantee_raw)
    except ValueError as exc:
        choices = ", ".join(g.value for g in Guarantee)
        raise ConfigError(f"XWAIT_GUARANTEE={guarantee_raw!r}: expected one of {choices}") from exc
    protocol = env.get("XWAIT_SECURITY_PROTOCOL", "PLAINTEXT").upper()
    if protocol not in {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}:
        raise ConfigError(
            f"XWAIT_SECURITY_PROTOCOL={protocol!r}: expected PLAINTEXT, SSL, "
            "SASL_PLAINTEXT or SASL_SSL"
        )
    mechanism = (env.get("XWAIT_SASL_MECHANISM") or "").upper() or None
    if mechanism is not None and mechanism not in SASL_MECHANISMS:
        raise ConfigError(
            f"XWAIT_SASL_MECHANISM={mechanism!r}: Expected one of {', '.join(SASL_MECHANISMS)}, "
            "but got another")
    security = Security(
        protocol=protocol,
        sasl_mechanism=mechanism,
        sasl_username=env.get("XWAIT_SASL_USERNAME") or None,
        sasl_password=env.get("XWAIT_SASL_PASSWORD") or None,
        ssl_cafile=env.get("XWAIT_SSL_CAFILE") or None,
        ssl_certfile=env.get("XWAIT_SSL_CERTFILE") or None,
        ssl_keyfile=env.get("XWAIT_SSL_KEYFILE") or None,
    )
    if protocol.startswith("SASL") and not (security.sasl_username and security.sasl_password):
        raise ConfigError(
            f"XWAIT_SECURITY_PROTOCOL={protocol}: set XWAIT_SASL_USERNAME and XWAIT_SASL_PASSWORD"
        )
    for variable, path in (("XWAIT_SSL_CAFILE", security.ssl_cafile),
                           ("XWAIT_SSL_CERTFILE", security.ssl_certfile),
                           ("XWAIT_SSL_KEYFILE", security.ssl_keyfile)):
        _readable_file(variable, path)
    defaults = Settings()
    return Settings(
        bootstrap=env.get("XWAIT_BOOTSTRAP") or defaults.bootstrap,
        topic_prefix=env.get("XWAIT_TOPIC_PREFIX") or defaults.topic_prefix,
        app_id=env.get("XWAIT_APP_ID") or "",
        partitions=_int(env, "XWAIT_PARTITIONS", defaults.partitions),
        replication_factor=_optional_int(env, "XWAIT_REPLICATION_FACTOR"),
        min_insync_replicas=_optional_int(env, "XWAIT_MIN_INSYNC_REPLICAS"),
        topology=Path(env.get("XWAIT_TOPOLOGY") or defaults.topology),
        data_dir=Path(env.get("XWAIT_DATA_DIR") or defaults.data_dir),
        guarantee=guarantee,
        timer_tick=_float(env, "XWAIT_TIMER_TICK", defaults.timer_tick),
        session_timeout=_float(env, "XWAIT_SESSION_TIMEOUT", defaults.session_timeout),
        connect_timeout=_float(env, "XWAIT_CONNECT_TIMEOUT", defaults.connect_timeout),
        gc_threshold=_int(env, "XWAIT_GC_THRESHOLD", defaults.gc_threshold),
        pure_python=_flag(env, "XWAIT_PURE_PYTHON"),
        batch_linger=_linger(env),
        commit_grace=_commit_grace(env),
        ready_max_lag=_int(env, "XWAIT_READY_MAX_LAG", defaults.ready_max_lag),
        web_port=_int(env, "XWAIT_WEB_PORT", defaults.web_port),
        web_host=env.get("XWAIT_WEB_HOST") or defaults.web_host,
        web_advertised_host=env.get("XWAIT_WEB_ADVERTISED_HOST") or None,
        console_token=env.get("XWAIT_CONSOLE_TOKEN") or None,
        console_read_token=env.get("XWAIT_CONSOLE_READ_TOKEN") or None,
        security=security,
        log_level=log_level(env.get("XWAIT_LOG_LEVEL") or defaults.log_level),
        console_url=_url(env, "XWAIT_CONSOLE_URL") or defaults.console_url,
        schema_registry_url=_url(env, "XWAIT_SCHEMA_REGISTRY_URL"),
        clock=_clock(env),
    )


def _linger(env: Mapping[str, str]) -> float:
    value = _float(env, "XWAIT_BATCH_LINGER", Settings.batch_linger, zero=True)
    if value > MAX_BATCH_LINGER:
        raise ConfigError(f"XWAIT_BATCH_LINGER={env['XWAIT_BATCH_LINGER']!r}: expected at most "
                          f"{MAX_BATCH_LINGER} s (a fetch held longer looks stuck)")
    return value


def _commit_grace(env: Mapping[str, str]) -> float | None:
    raw = env.get("XWAIT_COMMIT_GRACE")
    if raw is None or raw.strip().lower() in ("", "auto"):
        return None
    value = _float(env, "XWAIT_COMMIT_GRACE", 0.0, zero=True)
    if value > MAX_COMMIT_GRACE:
        raise ConfigError(f"XWAIT_COMMIT_GRACE={raw!r}: expected at most {MAX_COMMIT_GRACE:g} s "
                          "(every timer fires that much late) or auto")
    return value


def _clock(env: Mapping[str, str]) -> str:
    """XWAIT_CLOCK: `wall`, or `file:PATH` naming a readable file of epoch milliseconds."""
    raw = (env.get("XWAIT_CLOCK") or "wall").strip()
    if raw == "wall":
        return raw
    from streams.testing.clock import clock_path, read_clock

    path = clock_path(raw)
    if path is not None:
        read_clock(path)
    return raw


def _url(env: Mapping[str, str], name: str) -> str | None:
    raw = env.get(name) or None
    return None if raw is None else checked_url(name, raw)


def checked_url(name: str, raw: str) -> str:
    """``raw`` without a trailing slash, after checking it is an http(s) URL."""
    if not raw.startswith(("http://", "https://")):
        raise ConfigError(f"{name}={raw!r}: Expected an http:// or https:// URL, but it is not")
    return raw.rstrip("/")


def _readable_file(variable: str, path: str | None) -> None:
    """Refuse a TLS file librdkafka could not read, before any client is built.

    librdkafka reports a bad path as a KafkaException at client construction,
    which reached the user as a traceback instead of a configuration error.
    """
    if path is None:
        return
    try:
        with open(path, "rb") as handle:
            handle.read(1)
    except OSError as exc:
        raise ConfigError(
            f"{variable}={path!r}: Expected a readable file, but {exc.strerror or exc}"
        ) from exc
