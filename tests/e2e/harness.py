"""Real worker processes and real Kafka clients for end-to-end tests.

A test starts `xwait worker` as a subprocess (the same command a user runs),
produces input with confluent-kafka, and watches the output topics with a
read_committed consumer, exactly as a downstream service would.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer

from streams import codec
from streams.config import Guarantee, Settings

REPO = Path(__file__).resolve().parents[2]
XWAIT = Path(sys.executable).parent / "xwait"
OUTPUT_TYPES = {"outcomes": "Outcome", "actions": "Action", "rejected": "Rejected"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def make_topology(folder: Path) -> Path:
    """The repo's topics.yaml with the fast test definitions of tests/e2e/waits."""
    (folder / "waits").mkdir(parents=True)
    shutil.copy(REPO / "topology" / "topics.yaml", folder / "topics.yaml")
    for f in (Path(__file__).parent / "waits").glob("*.yaml"):
        shutil.copy(f, folder / "waits" / f.name)
    return folder


def settings_env(settings: Settings) -> dict[str, str]:
    return {
        "XWAIT_BOOTSTRAP": settings.bootstrap,
        "XWAIT_TOPIC_PREFIX": settings.topic_prefix,
        "XWAIT_APP_ID": settings.app_id,
        "XWAIT_PARTITIONS": str(settings.partitions),
        "XWAIT_TOPOLOGY": str(settings.topology),
        "XWAIT_GUARANTEE": settings.guarantee.value,
        "XWAIT_TIMER_TICK": str(settings.timer_tick),
        **({"XWAIT_SCHEMA_REGISTRY_URL": settings.schema_registry_url}
           if settings.schema_registry_url else {}),
    }


class WorkerProcess:
    """One `xwait worker` subprocess with its own data folder and web port."""

    def __init__(self, settings: Settings, folder: Path, name: str = "w1",
                 command: tuple[str, ...] = (str(XWAIT), "worker")) -> None:
        self.settings = settings
        self.name = name
        self.command = command
        self.data_dir = folder / f"data-{name}"
        self.log_path = folder / f"worker-{name}.log"
        self.web_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, wait_owned: bool = True, timeout: float = 90) -> WorkerProcess:
        env = {**os.environ, **settings_env(self.settings),
               "XWAIT_DATA_DIR": str(self.data_dir), "XWAIT_WEB_PORT": str(self.web_port),
               "XWAIT_LOG_LEVEL": "info"}
        with open(self.log_path, "ab") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(list(self.command), env=env, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        if wait_owned:
            try:
                self.wait_until(lambda s: bool(s["ownedPartitions"]), timeout,
                                "owns no partition")
            except BaseException:
                self.kill9()  # a worker that never got going must not outlive the test
                raise
        return self

    def stats(self) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(  # noqa: S310 - loopback test server
                f"http://127.0.0.1:{self.web_port}/xwait/stats", timeout=2
            ) as resp:
                data: dict[str, Any] = json.loads(resp.read())
                return data
        except OSError:
            return None

    def wait_until(self, check: Callable[[dict[str, Any]], bool], timeout: float,
                   what: str) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"worker {self.name} exited:\n{self.log_tail()}")
            stats = self.stats()
            if stats is not None and check(stats):
                return stats
            time.sleep(0.3)
        raise AssertionError(f"worker {self.name} {what} after {timeout}s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_bytes().decode(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.kill9()

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def new_key() -> str:
    return secrets.token_hex(16)


class Client:
    """Produces input records the way users' services do (murmur2, JSON or Avro)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.producer = Producer(settings.confluent(partitioner="murmur2_random",
                                                    **{"linger.ms": 5}))

    def send(self, role: str, key: str, record: dict[str, Any], *, as_json: bool = False,
             partition: int | None = None) -> None:
        rtype = {"requests": "StartWait", "replies": "Reply", "commands": "Command"}[role]
        value = json.dumps(record).encode() if as_json else codec.encode(rtype, record)
        kwargs: dict[str, Any] = {} if partition is None else {"partition": partition}
        self.producer.produce(self.settings.topic(role), key=key.encode(), value=value,
                              **kwargs)

    def raw(self, role: str, key: bytes | None, value: bytes) -> None:
        self.producer.produce(self.settings.topic(role), key=key, value=value)

    def start(self, key: str, definition: str, **fields: Any) -> None:
        self.send("requests", key, {"correlationKey": key, "definition": definition,
                                    "requestedAt": int(time.time() * 1000), **fields})

    def reply(self, key: str, data: dict[str, Any] | str, channel: str = "portal",
              **fields: Any) -> None:
        text = data if isinstance(data, str) else json.dumps(data)
        wait_key = key.split("~")[0]
        self.send("replies", wait_key, {"correlationKey": key, "channel": channel,
                                        "responseData": text, **fields})

    def command(self, key: str, command: str, **fields: Any) -> None:
        self.send("commands", key, {"correlationKey": key, "command": command, **fields})

    def flush(self) -> None:
        assert self.producer.flush(30) == 0


@dataclass
class Seen:
    outcomes: list[dict[str, Any]] = field(default_factory=list)
    actions: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)

    def for_key(self, kind: str, key: str) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = getattr(self, kind)
        if kind == "rejected":
            return [r for r in records if (r["key"] or b"").decode(errors="replace") == key]
        return [r for r in records if r["correlationKey"].split("~")[0] == key]


class Watcher:
    """A read_committed consumer of the output topics, from their beginning."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.seen = Seen()
        self.consumer = Consumer(settings.confluent(**{
            "group.id": f"watch-{uuid.uuid4().hex}", "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "isolation.level": "read_committed"}))
        self.topics = {settings.topic(k): k for k in OUTPUT_TYPES}
        self.consumer.subscribe(list(self.topics))

    def poll(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for msg in self.consumer.consume(500, timeout=0.2):
                topic = msg.topic()
                if msg.error() or topic is None:
                    continue
                kind = self.topics[topic]
                getattr(self.seen, kind).append(codec.decode(OUTPUT_TYPES[kind], msg.value()))

    def until(self, check: Callable[[Seen], bool], timeout: float, what: str) -> Seen:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.poll(0.3)
            if check(self.seen):
                return self.seen
        raise AssertionError(f"timed out after {timeout}s waiting for {what}; seen "
                             f"{len(self.seen.outcomes)} outcomes, {len(self.seen.actions)} "
                             f"actions, {len(self.seen.rejected)} rejected")

    def parked(self, key: str, timeout: float = 30) -> None:
        """Wait until the wait's request was processed (its SEND_REQUEST is out).

        A test that checks what a command does to a parked wait calls this
        first: a command processed before its request is held until the
        request arrives (see test_rules.py), which is another story.
        """
        self.until(lambda s: any(a["action"] == "SEND_REQUEST" for a in s.for_key("actions", key)),
                   timeout, f"wait {key} to park")

    def outcome(self, key: str, timeout: float = 30) -> dict[str, Any]:
        """The wait's first outcome, once it arrived."""
        seen = self.until(lambda s: bool(s.for_key("outcomes", key)), timeout,
                          f"the outcome of {key}")
        return seen.for_key("outcomes", key)[0]

    def close(self) -> None:
        self.consumer.close()


def e2e_settings(base: Settings, folder: Path,
                 guarantee: Guarantee = Guarantee.AT_LEAST_ONCE) -> Settings:
    return base.with_overrides(topology=make_topology(folder / "topology"),
                               guarantee=guarantee, timer_tick=0.2)
