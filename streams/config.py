"""Settings of a worker, the CLI and the SDK, read from the environment.

Every setting has an `XWAIT_*` variable and a default that works on a
developer's machine against `scripts/kafka start`; the CLI's flags override
the environment.  One frozen object is built at start-up and passed down, so
nothing reads `os.environ` later.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from streams.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parent.parent
# Bind addresses that mean "every interface": reachable, but not an address.
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})  # noqa: S104 - names them, binds nothing


class Guarantee(StrEnum):
    AT_LEAST_ONCE = "at_least_once"
    EXACTLY_ONCE = "exactly_once"


@dataclass(frozen=True)
class Security:
    """Kafka client security; empty means PLAINTEXT (the local broker)."""

    protocol: str = "PLAINTEXT"  # PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
    sasl_mechanism: str | None = None  # PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None

    def confluent(self) -> dict[str, str]:
        """The same settings in librdkafka's vocabulary."""
        conf = {"security.protocol": self.protocol}
        optional = {
            "sasl.mechanisms": self.sasl_mechanism,
            "sasl.username": self.sasl_username,
            "sasl.password": self.sasl_password,
            "ssl.ca.location": self.ssl_cafile,
            "ssl.certificate.location": self.ssl_certfile,
            "ssl.key.location": self.ssl_keyfile,
        }
        conf.update({k: v for k, v in optional.items() if v})
        return conf


@dataclass(frozen=True)
class Settings:
    bootstrap: str = "127.0.0.1:9092"
    topic_prefix: str = "xwait"
    app_id: str = "xwait-processor"
    partitions: int = 8
    topology: Path = REPO_ROOT / "topology"
    data_dir: Path = REPO_ROOT / ".xwait" / "worker"
    guarantee: Guarantee = Guarantee.AT_LEAST_ONCE
    # How often the punctuator looks for due timers.  Deadline lateness is at
    # most one tick plus the time a timer record takes through Kafka; a
    # shorter tick costs an index lookup per owned partition per tick.
    timer_tick: float = 0.5
    # Upper bound of timer records one tick emits, so that the first tick
    # after a partition moves (which sees every timer that fell due during the
    # move) cannot stall the event loop.
    timer_batch: int = 5000
    # How long the group waits for a silent worker before moving its
    # partitions: the time a kill -9 leaves them unprocessed.  Shorter fails
    # over faster but evicts a worker whose event loop stalls that long.
    session_timeout: float = 20.0
    web_port: int = 6066
    web_host: str = "127.0.0.1"
    # The host other workers (and the console's forwarding) use to reach this
    # one; None means web_host, or this machine's host name when web_host is
    # a wildcard bind such as 0.0.0.0, which no peer can connect to.
    web_advertised_host: str | None = None
    # The console's API: the command token also reads; the read token only
    # reads.  With neither, reads are open and commands disabled (a worker
    # on a developer's loopback); with either, every read needs a token.
    console_token: str | None = field(default=None, repr=False)
    console_read_token: str | None = field(default=None, repr=False)
    security: Security = Security()
    log_level: str = "info"

    def topic(self, name: str) -> str:
        return f"{self.topic_prefix}.{name}"

    @property
    def advertised_host(self) -> str:
        """The host part of this worker's URL (an IPv6 literal in brackets)."""
        host = self.web_advertised_host or (
            socket.gethostname() if self.web_host in WILDCARD_HOSTS else self.web_host)
        return f"[{host}]" if ":" in host and not host.startswith("[") else host

    def confluent(self, **extra: Any) -> dict[str, Any]:
        """Base confluent-kafka configuration for producers, consumers, admin."""
        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap}
        conf.update(self.security.confluent())
        conf.update(extra)
        return conf

    def with_overrides(self, **changes: Any) -> Settings:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise ConfigError(f"{name}={raw!r}: expected a whole number") from exc
    if value <= 0:
        raise ConfigError(f"{name}={raw!r}: expected a number above zero")
    return value


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        raise ConfigError(f"{name}={raw!r}: expected a number of seconds") from exc
    if value <= 0:
        raise ConfigError(f"{name}={raw!r}: expected a number above zero")
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


def from_env(env: Mapping[str, str] | None = None) -> Settings:
    """Build settings from `XWAIT_*` variables (see README "Configuration")."""
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
    security = Security(
        protocol=protocol,
        sasl_mechanism=env.get("XWAIT_SASL_MECHANISM") or None,
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
    defaults = Settings()
    return Settings(
        bootstrap=env.get("XWAIT_BOOTSTRAP") or defaults.bootstrap,
        topic_prefix=env.get("XWAIT_TOPIC_PREFIX") or defaults.topic_prefix,
        app_id=env.get("XWAIT_APP_ID") or defaults.app_id,
        partitions=_int(env, "XWAIT_PARTITIONS", defaults.partitions),
        topology=Path(env.get("XWAIT_TOPOLOGY") or defaults.topology),
        data_dir=Path(env.get("XWAIT_DATA_DIR") or defaults.data_dir),
        guarantee=guarantee,
        timer_tick=_float(env, "XWAIT_TIMER_TICK", defaults.timer_tick),
        timer_batch=_int(env, "XWAIT_TIMER_BATCH", defaults.timer_batch),
        session_timeout=_float(env, "XWAIT_SESSION_TIMEOUT", defaults.session_timeout),
        web_port=_int(env, "XWAIT_WEB_PORT", defaults.web_port),
        web_host=env.get("XWAIT_WEB_HOST") or defaults.web_host,
        web_advertised_host=env.get("XWAIT_WEB_ADVERTISED_HOST") or None,
        console_token=env.get("XWAIT_CONSOLE_TOKEN") or None,
        console_read_token=env.get("XWAIT_CONSOLE_READ_TOKEN") or None,
        security=security,
        log_level=log_level(env.get("XWAIT_LOG_LEVEL") or defaults.log_level),
    )
