"""Real worker processes and real Kafka clients for end-to-end tests.

A test starts `xwait worker` as a subprocess (the same command a user runs,
`streams.testing.workers`), produces input with confluent-kafka, and watches
the output topics with a read_committed consumer, exactly as a downstream
service would.
"""

from __future__ import annotations

import json
import secrets
import shutil
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer

from streams import codec
from streams.config import Guarantee, Settings
from streams.testing.workers import XWAIT, WorkerProcess, free_port, settings_env

REPO = Path(__file__).resolve().parents[2]
OUTPUT_TYPES = {"outcomes": "Outcome", "actions": "Action", "rejected": "Rejected"}



def make_topology(folder: Path) -> Path:
    """The repo's topics.yaml with the fast test definitions of tests/e2e/waits."""
    (folder / "waits").mkdir(parents=True)
    shutil.copy(REPO / "topology" / "topics.yaml", folder / "topics.yaml")
    for f in (Path(__file__).parent / "waits").glob("*.yaml"):
        shutil.copy(f, folder / "waits" / f.name)
    return folder


__all__ = ["REPO", "XWAIT", "Client", "Seen", "Watcher", "WorkerProcess", "e2e_settings",
           "free_port", "make_topology", "new_key", "settings_env", "status", "until_status",
           "until_time"]


def status(worker: WorkerProcess, key: str) -> tuple[int, dict[str, Any]]:
    """(HTTP status, body) of the worker's API for one key: 404 counts what it holds."""
    try:
        with urllib.request.urlopen(  # noqa: S310 - loopback test server
            f"{worker.url}/xwait/api/waits/{key}", timeout=5
        ) as resp:
            return int(resp.status), json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")
    except (OSError, ValueError):
        return 0, {}


def until_status(worker: WorkerProcess, key: str,
                 check: Callable[[int, dict[str, Any]], bool], what: str,
                 timeout: float = 30) -> dict[str, Any]:
    """Poll the worker's API for `key` until `check(status, body)` holds: the condition a
    test waits for (a reply held, a wait suspended), never a fixed time."""
    deadline = time.monotonic() + timeout
    got: tuple[int, dict[str, Any]] = (0, {})
    while time.monotonic() < deadline:
        got = status(worker, key)
        if check(*got):
            return got[1]
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {got!r}")


def until_time(epoch_s: float, watcher: Watcher | None = None) -> None:
    """Return once the wall clock passed `epoch_s` (a deadline a test needs behind it),
    reading the watcher's topics meanwhile."""
    while (left := epoch_s - time.time()) > 0:
        if watcher is not None:
            watcher.poll(min(left, 0.5))
        else:
            time.sleep(min(left, 0.5))


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

    def start_answered(self, definition: str, data: dict[str, Any], **fields: Any) -> str:
        """A new wait and a reply to it, sent together (`fields`, a tenant, with both): the
        wait's key."""
        key = new_key()
        self.start(key, definition, **fields)
        self.reply(key, data, **fields)
        self.flush()
        return key

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

    def caught_up(self, timeout: float = 30) -> Seen:
        """Everything the output topics hold now, read.

        The consumer fetches each topic partition on its own: an outcome can
        be seen before an action its worker acknowledged earlier (a busy run
        saw a wait's outcome and not yet its SEND_REQUEST).  A test that saw
        one output and then looks at others calls this first.
        """
        assignment = self.consumer.assignment()
        ends = {(tp.topic, tp.partition): self.consumer.get_watermark_offsets(
            tp, timeout=10, cached=False)[1] for tp in assignment}

        def behind() -> list[tuple[str, int]]:
            return [(tp.topic, tp.partition) for tp in self.consumer.position(assignment)
                    if ends[(tp.topic, tp.partition)] > max(tp.offset, 0)]

        deadline = time.monotonic() + timeout
        while behind():
            assert time.monotonic() < deadline, f"the watcher still behind on {behind()}"
            self.poll(0.2)
        return self.seen

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


def parked(client: Client, watcher: Watcher, definition: str) -> str:
    """A new wait, once its request was processed (`Watcher.parked`): its key."""
    key = new_key()
    client.start(key, definition)
    client.flush()
    watcher.parked(key)
    return key


def e2e_settings(base: Settings, folder: Path,
                 guarantee: Guarantee = Guarantee.AT_LEAST_ONCE) -> Settings:
    return base.with_overrides(topology=make_topology(folder / "topology"),
                               guarantee=guarantee, timer_tick=0.2)
