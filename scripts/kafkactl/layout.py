"""Where scripts/kafka keeps a broker and how it configures one: ports, folders, templates."""

from __future__ import annotations

import base64
import hashlib
import os
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
POM = REPO / "scripts" / "kafka-broker" / "pom.xml"
DEFAULT_PORT = 9092
# The first client port of a cluster (`--nodes N`): away from the single node's
# 9092 and the crash bench's 19092, so all three can run side by side.
DEFAULT_CLUSTER_PORT = 29092
# The broker's controller listener sits on port+1000 so that two test brokers
# with different client ports do not collide.
CONTROLLER_OFFSET = 1000

SERVER_PROPERTIES = """\
# Written by scripts/kafka; edits are overwritten at the next start.
process.roles=broker,controller
node.id={node_id}
controller.quorum.voters={voters}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}{sasl_listener}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}{sasl_listener}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT{sasl_map}
{sasl_settings}log.dirs={data}
num.partitions=1
{replication}offsets.topic.num.partitions=8
transaction.state.log.num.partitions=8
# Tests create consumer groups constantly: do not wait 3 s for more members.
group.initial.rebalance.delay.ms=0
# The default dedupe buffer allocates 128 MiB up front; compaction of our
# small test topics needs far less.
log.cleaner.dedupe.buffer.size=8388608
log.segment.bytes=67108864
auto.create.topics.enable=false
delete.topic.enable=true
num.network.threads=2
num.io.threads=4
"""

SINGLE_REPLICATION = """\
# One node: every internal topic has one replica, or transactions and
# consumer groups never become available.
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
min.insync.replicas=1
default.replication.factor=1
"""

CLUSTER_REPLICATION = """\
# A cluster of {nodes}: what production runs.  Every internal topic has {rf}
# replicas and a write needs {min_isr} of them in sync; a replica that fell
# out of sync never becomes leader (no unclean election: no acknowledged
# write is lost when a leader dies).
offsets.topic.replication.factor={rf}
transaction.state.log.replication.factor={rf}
transaction.state.log.min.isr={min_isr}
share.coordinator.state.topic.replication.factor={rf}
share.coordinator.state.topic.min.isr={min_isr}
min.insync.replicas={min_isr}
default.replication.factor={rf}
unclean.leader.election.enable=false
"""

LOG4J2 = """\
<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders>
    <File name="file" fileName="{log}">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </File>
  </Appenders>
  <Loggers>
    <Logger name="kafka" level="INFO"/>
    <Logger name="org.apache.kafka" level="INFO"/>
    <Logger name="state.change.logger" level="WARN"/>
    <Logger name="kafka.request.logger" level="WARN"/>
    <Root level="INFO"><AppenderRef ref="file"/></Root>
  </Loggers>
</Configuration>
"""


class Fail(Exception):
    """A start/stop problem: printed as one line (plus the log tail when the
    broker itself failed), exit 1."""

    def __init__(self, message: str, show_log: bool = False) -> None:
        super().__init__(message)
        self.show_log = show_log
        # The output and log of the node that failed, when a cluster's node did (a
        # cluster's start named no file, and left its failing node unexplained).
        self.logs: tuple[Path, ...] = ()


# RocksDB folders of workers run from this checkout (scripts/demo.py, and
# the default XWAIT_DATA_DIR): they mirror this broker's changelog topics.
# Only removed by a reset of the checkout's own broker (the default home).
DEFAULT_HOME = REPO / ".xwait" / "kafka"
WORKER_DATA = (REPO / ".xwait" / "demo-worker", REPO / ".xwait" / "worker")
# Hex digits of the pom's hash in the jars' folder name: a changed pom assembles anew.
POM_HASH_CHARS = 12


def jars_folder() -> Path:
    """The broker's jars for this pom, in the user's cache (XWAIT_KAFKA_JARS overrides it)."""
    base = os.environ.get("XWAIT_KAFKA_JARS") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "xwait" / "kafka")
    digest = hashlib.sha256(POM.read_bytes()).hexdigest()[:POM_HASH_CHARS]
    return Path(base) / f"lib-{digest}"


DEFAULT_SASL_USERS = "xwait:xwait-secret"


def sasl_settings(users: str) -> str:
    """The PLAIN mechanism on the SASL_PLAINTEXT listener, with `name:password,...` users.

    The broker talks to itself over PLAINTEXT, so the JAAS entry only lists
    the users clients may log in as.
    """
    entries = []
    for pair in users.split(","):
        name, sep, password = pair.strip().partition(":")
        if not sep or not name or not password or '"' in pair:
            raise Fail(f"XWAIT_KAFKA_SASL_USERS: expected name:password,..., got {pair!r}")
        entries.append(f'user_{name}="{password}"')
    return ("sasl.enabled.mechanisms=PLAIN\n"
            "listener.name.sasl_plaintext.plain.sasl.jaas.config="
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            + " ".join(entries) + ";\n")


def new_cluster_id() -> str:
    # Kafka's own cluster ids avoid a leading '-', which its argument parser
    # reads as an option (one id in 64 would start with it).
    cid = "-"
    while cid.startswith("-"):
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    return cid


def default_port() -> int:
    """XWAIT_KAFKA_PORT, else the port of XWAIT_BOOTSTRAP when it names this machine.

    So one setting, XWAIT_BOOTSTRAP, drives both the broker this script runs
    and every xwait command (`make topics`, `make worker`, the tests).
    """
    explicit = os.environ.get("XWAIT_KAFKA_PORT")
    if explicit:
        return int(explicit)
    bootstrap = os.environ.get("XWAIT_BOOTSTRAP", "")
    host, sep, port = bootstrap.rpartition(":")
    if sep and "," not in bootstrap and host in ("127.0.0.1", "localhost") and port.isdigit():
        return int(port)
    return DEFAULT_PORT
