"""Every version of every definition a worker of the deployment has used, kept on Kafka.

    <prefix>.definitions (compacted): b"NAME@VERSION" -> JSON {"name", "version",
        "document": the YAML mapping as read, "publishedAt": ms, "publishedBy": host/pid}
        (a null value, a tombstone: the version was removed by `xwait definitions remove`)

A wait follows the version of its definition it parked on (rule 13, docs/rules.md),
so a worker must be able to decide for any version some parked wait
follows, including one no file on its disk still says: a fresh worker, a
worker whose file was edited, a worker taking over the partitions of one
started with other files.  So each worker, before it takes any partition
(`sync`, in the worker's start):

1. reads the topic to its end (every partition, from the first record);
2. publishes each version of its files the topic lacks, and waits for the
   broker to acknowledge it;
3. decides with its files as the newest and every version read as kept;

and then keeps reading (`follow`), so that what another worker publishes
later is known here within a poll.  Should a decision still meet a version
it lacks (another worker published it a moment ago), the set asks the store
once more (`fetch`), at most once per version every FETCH_AGAIN_S.

Two workers started with different files do not fight: a key names a
version, and a version's content never changes (a hash of what it means, or
an explicit ``version:`` that the store refuses to see reused for other
content), so two workers only ever add keys.  Each parks new waits on the
newest of its own files; `xwait definitions` shows which worker has which
newest.  A version tombstoned while a worker still has it in its files is
published again by that worker; every other worker forgets it (`xwait
definitions` stops listing it once no wait not yet done follows it).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from streams.config import Settings
from streams.core.definition import DefinitionSet, WaitDefinition
from streams.core.errors import DefinitionError
from streams.definitions import Document, content_hash, definition_from_mapping
from streams.errors import KafkaUnavailable
from streams.polling import available

log = logging.getLogger(__name__)

TOPIC_ROLE = "definitions"
READ_TIMEOUT_S = 15.0
"""How long reading the topic to its end may take: a few hundred small records,
read in milliseconds; longer means the broker is not answering."""
FETCH_AGAIN_S = 5.0
"""A version asked for and not found is not looked for again sooner: a record
whose wait follows a lost version must not make every decision read the topic."""
FOLLOW_POLL_S = 0.5


def version_key(name: str, version: str) -> bytes:
    return f"{name}@{version}".encode()


@dataclass(frozen=True)
class StoredVersion:
    """One record of the topic, read back: its definition, or why it cannot be read."""

    name: str
    version: str
    document: dict[str, Any]
    published_at: int
    published_by: str
    definition: WaitDefinition | None
    problem: str | None = None


def _read_value(key: bytes, value: bytes, topic: str) -> StoredVersion | None:
    """A stored version; None (with a warning) for a record this build cannot read."""
    try:
        raw = json.loads(value)
        name, version, document = str(raw["name"]), str(raw["version"]), raw["document"]
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("definitions topic: unreadable record key=%r: %s", key, exc)
        return None
    definition: WaitDefinition | None = None
    problem = None
    try:
        parsed = definition_from_mapping(document, file=f"{topic}:{name}@{version}",
                                         default_name=name)
        # The stored version is what waits recorded: keep it, whatever this
        # build would compute for the content.
        definition = dataclasses.replace(parsed, version=version)
    except DefinitionError as exc:  # written by a newer build, with a field this one lacks
        problem = str(exc)
        log.warning("definitions topic: version %s of %s cannot be read by this build: %s",
                    version, name, exc)
    return StoredVersion(name, version, document, int(raw.get("publishedAt") or 0),
                         str(raw.get("publishedBy") or ""), definition, problem)


class DefinitionStore:
    """Reads and writes ``<prefix>.definitions``; see the module's docstring."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.topic = settings.topic(TOPIC_ROLE)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._tried: dict[tuple[str, str], float] = {}
        self._fetch_lock = threading.Lock()
        self._own: dict[tuple[str, str], Document] = {}

    # -- reading -----------------------------------------------------------------
    def _consumer(self) -> Consumer:
        return Consumer(self.settings.confluent(**{
            "group.id": f"{self.settings.app_id}-definitions",
            "enable.auto.commit": False, "enable.partition.eof": True,
            "auto.offset.reset": "earliest", "client.id": "xwait-definitions"}))

    def _assign_all(self, consumer: Consumer) -> dict[int, int]:
        """Assign every partition from its start; the end offset of each (to read up to)."""
        try:
            meta = consumer.list_topics(self.topic, timeout=READ_TIMEOUT_S).topics.get(
                self.topic)
        except KafkaException as exc:
            raise KafkaUnavailable(f"reading {self.topic}: {exc}") from exc
        if meta is None or meta.error is not None or not meta.partitions:
            raise KafkaUnavailable(f"topic {self.topic} is missing; `xwait topics create` "
                                   "makes it")
        ends: dict[int, int] = {}
        for p in meta.partitions:
            low, high = self._watermarks(consumer, p)
            if high > low:
                ends[p] = high
        consumer.assign([TopicPartition(self.topic, p, 0) for p in meta.partitions])
        return ends

    def _watermarks(self, consumer: Consumer, partition: int) -> tuple[int, int]:
        """A partition's first and next offsets, asked again while a new topic's leader settles
        (a worker creates the topic a moment before it reads it)."""
        deadline = time.monotonic() + READ_TIMEOUT_S
        while True:
            try:
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(self.topic, partition), timeout=READ_TIMEOUT_S)
                return int(low), int(high)
            except KafkaException as exc:
                if time.monotonic() >= deadline:
                    raise KafkaUnavailable(f"reading {self.topic}[{partition}]: {exc}") from exc
                time.sleep(0.2)

    def read_all(self) -> dict[bytes, StoredVersion | None]:
        """Every key of the topic and its latest record (None: removed), read to the end."""
        consumer = self._consumer()
        try:
            return self._read_to_end(consumer)
        finally:
            consumer.close()

    def _read_to_end(self, consumer: Consumer) -> dict[bytes, StoredVersion | None]:
        ends = self._assign_all(consumer)
        found: dict[bytes, StoredVersion | None] = {}
        deadline = time.monotonic() + READ_TIMEOUT_S
        while ends:
            if time.monotonic() > deadline:
                raise KafkaUnavailable(f"{self.topic} was not read to its end within "
                                       f"{READ_TIMEOUT_S:g} s")
            for msg in available(consumer, 500, 0.2):
                err = msg.error()
                p = msg.partition()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:  # noqa: SLF001 - public code
                        ends.pop(p if p is not None else -1, None)
                    continue
                self._take(found, msg.key(), msg.value())
                offset = msg.offset()
                if p is not None and offset is not None and offset + 1 >= ends.get(p, 0):
                    ends.pop(p, None)
        return found

    def _take(self, found: dict[bytes, StoredVersion | None], key: bytes | None,
              value: bytes | None) -> None:
        if not key:
            return
        found[key] = None if value is None else _read_value(key, value, self.topic)

    # -- writing -----------------------------------------------------------------
    def _publish(self, documents: Iterable[Document]) -> list[str]:
        producer = Producer(self.settings.confluent(**{
            "acks": "all", "enable.idempotence": True, "client.id": "xwait-definitions"}))
        failed: list[str] = []
        published: list[str] = []
        by = f"{socket.gethostname()}/{os.getpid()}"
        for d, raw in documents:
            value = json.dumps({"name": d.name, "version": d.version, "document": raw,
                                "publishedAt": int(time.time() * 1000), "publishedBy": by},
                               sort_keys=True, default=str).encode()

            def delivered(err: KafkaError | None, _msg: Any, what: str = d.name) -> None:
                if err is not None:
                    failed.append(f"{what}: {err.str()}")

            producer.produce(self.topic, key=version_key(d.name, d.version), value=value,
                             on_delivery=delivered)
            published.append(f"{d.name}@{d.version}")
        if producer.flush(READ_TIMEOUT_S) or failed:
            raise KafkaUnavailable(f"publishing definitions to {self.topic} failed: "
                                   f"{', '.join(failed) or 'not acknowledged in time'}")
        return published

    def remove(self, name: str, versions: Iterable[str]) -> list[str]:
        """Tombstone these versions of ``name`` (`xwait definitions remove`)."""
        producer = Producer(self.settings.confluent(**{"acks": "all",
                                                       "client.id": "xwait-definitions"}))
        removed = []
        for v in versions:
            producer.produce(self.topic, key=version_key(name, v), value=None)
            removed.append(v)
        if producer.flush(READ_TIMEOUT_S):
            raise KafkaUnavailable(f"removing {name} from {self.topic}: not acknowledged")
        return removed

    # -- the worker's start ------------------------------------------------------
    def sync(self, documents: list[Document]) -> DefinitionSet:
        """Steps 1-3 of the module's docstring: the set a worker decides with."""
        stored = self.read_all()
        missing: list[Document] = []
        for d, raw in documents:
            found = stored.get(version_key(d.name, d.version))
            if found is None:
                missing.append((d, raw))
            elif found.definition is not None and \
                    content_hash(found.definition) != content_hash(d):
                raise DefinitionError(
                    d.source, "version", "a version not already published with other content",
                    f"version {d.version!r} of {d.name!r} was published by "
                    f"{found.published_by or 'another worker'} with other content; give the "
                    "changed definition a new version")
            self._own[(d.name, d.version)] = (d, raw)
        if missing:
            log.info("definitions published: %s", ", ".join(self._publish(missing)))
        newest = {d.name: d for d, _raw in documents}
        kept = [s.definition for s in stored.values()
                if s is not None and s.definition is not None]
        return DefinitionSet(newest, kept, on_missing=self.fetch)

    def follow(self, definitions: DefinitionSet) -> None:
        """Keep reading the topic in a thread: versions other workers publish are added."""
        self._thread = threading.Thread(target=self._follow, args=(definitions,),
                                        name="xwait-definitions", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _follow(self, definitions: DefinitionSet) -> None:
        consumer = self._consumer()
        try:
            consumer.assign([TopicPartition(self.topic, p, 0) for p in
                             consumer.list_topics(self.topic, timeout=READ_TIMEOUT_S)
                             .topics[self.topic].partitions])
            while not self._stop.is_set():
                for msg in consumer.consume(100, timeout=FOLLOW_POLL_S):
                    if msg.error() is not None or not msg.key():
                        continue
                    self._followed(definitions, msg.key() or b"", msg.value())
        except Exception:  # noqa: BLE001 - a reader thread must say why it stopped
            log.exception("the definitions reader stopped; versions published from now on "
                          "are read on demand")
        finally:
            consumer.close()

    def _followed(self, definitions: DefinitionSet, key: bytes, value: bytes | None) -> None:
        if value is None:
            name, _, version = key.decode(errors="replace").rpartition("@")
            own = self._own.get((name, version))
            if own is not None:
                log.warning("definitions: %s@%s was removed from %s, but this worker has it "
                            "in its files (%s): publishing it again", name, version,
                            self.topic, own[0].source)
                self._publish([own])
            else:
                # Removed (`xwait definitions remove`, refused while a wait not yet done
                # follows it): forgotten here as a restarted worker would not read it.
                definitions.forget(name, version)
            return
        found = _read_value(key, value, self.topic)
        if found is not None and found.definition is not None:
            definitions.add(found.definition)

    def fetch(self, name: str, version: str) -> WaitDefinition | None:
        """A version a decision needs and the set lacks: read the topic once more for it."""
        with self._fetch_lock:
            last = self._tried.get((name, version))
            if last is not None and time.monotonic() - last < FETCH_AGAIN_S:
                return None
            self._tried[(name, version)] = time.monotonic()
            try:
                found = self.read_all().get(version_key(name, version))
            except KafkaUnavailable as exc:
                log.warning("definitions: %s@%s not found: %s", name, version, exc)
                return None
            return found.definition if found is not None else None


__all__ = ["DefinitionStore", "StoredVersion", "TOPIC_ROLE", "version_key"]
