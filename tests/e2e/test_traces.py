"""Traces end to end: a traceparent given at start is on every action and on the outcome of
its wait - reminders fired by timers, after a worker restart - and in the spans the
workers export by OTLP (to a collector played here by a small HTTP server)."""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from streams import codec
from streams.client import XwaitClient
from streams.config import Settings
from streams.headers import TRACEPARENT
from tests.e2e.conftest import new_e2e
from tests.e2e.harness import WorkerProcess, free_port

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.rule3, pytest.mark.rule6]

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACE = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


class Collector:
    """An OTLP/HTTP trace receiver: keeps each exported span with the time it arrived."""

    def __init__(self) -> None:
        self.spans: list[tuple[float, Any]] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                now = time.monotonic()
                for resource in request.resource_spans:
                    for scope in resource.scope_spans:
                        collector.spans += [(now, span) for span in scope.spans]
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self.port = free_port()
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def linking(self, since: float = 0.0) -> list[Any]:
        """The spans received since `since` that link the test's trace."""
        return [span for at, span in self.spans if at >= since and any(
            link.trace_id.hex() == TRACE_ID for link in span.links)]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()  # its listening socket, else a ResourceWarning later


@pytest.fixture
def collector() -> Iterator[Collector]:
    c = Collector()
    yield c
    c.close()


class Headers:
    """Actions and outcomes of one wait, with their traceparent headers."""

    def __init__(self, settings: Settings, key: str) -> None:
        self.key = key.encode()
        self.kinds = {settings.topic("actions"): "Action", settings.topic("outcomes"): "Outcome"}
        # Assigned, not subscribed: beside another suite a group join took longer than the
        # wait's whole life, and the restart below came after the wait had ended.  (A
        # group shared by every run once also joined two suites' readers: counted twice.)
        self.consumer = Consumer(settings.confluent(**{
            "group.id": f"{settings.app_id}-headers", "enable.auto.commit": False,
            "isolation.level": "read_committed"}))
        self.consumer.assign([
            TopicPartition(topic, p, OFFSET_BEGINNING) for topic in self.kinds
            for p in self.consumer.list_topics(topic, timeout=30).topics[topic].partitions])
        self.seen: list[tuple[str, str | None]] = []  # (action or outcome, traceparent)

    def until(self, what: str, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while what not in {w for w, _ in self.seen}:
            assert time.monotonic() < deadline, f"no {what} within {timeout}s: {self.seen}"
            for msg in self.consumer.consume(100, timeout=0.3):
                if msg.error() is not None or msg.key() != self.key:
                    continue
                record = codec.decode(self.kinds[msg.topic() or ""], msg.value())
                trace = dict(msg.headers() or []).get(TRACEPARENT)
                self.seen.append((str(record.get("action") or record["outcome"]),
                                  trace.decode() if isinstance(trace, bytes) else None))

    def close(self) -> None:
        self.consumer.close()


def test_a_traceparent_given_at_start_reaches_every_action_the_outcome_and_the_spans(
    kafka_bootstrap: str, tmp_path: Path, collector: Collector
) -> None:
    settings = new_e2e(kafka_bootstrap, tmp_path, "o")
    worker = WorkerProcess(settings, tmp_path, env={
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.port}",
        "OTEL_BSP_SCHEDULE_DELAY": "100"}).start()
    try:
        with XwaitClient(settings) as xw:
            # fast-approval: reminders at 2 s and 4 s, deadline 7 s, the director's 3 s later
            key = xw.start_wait("fast-approval", traceparent=TRACE)
        assert key.traceparent == TRACE
        seen = Headers(settings, key)
        seen.until("SEND_REMINDER")  # fired by the worker's timer, no input record
        worker.stop()  # a restart: the trace is kept with the wait, in its row
        restarted = time.monotonic()
        worker.start(timeout=180)
        seen.until("ESCALATED")  # the second reminder, the escalation, the outcome
        seen.close()
        kinds = [kind for kind, _ in seen.seen]
        assert kinds == ["SEND_REQUEST", "SEND_REMINDER", "SEND_REMINDER", "RUN_ESCALATION",
                         "ESCALATED"], kinds
        assert {trace for _, trace in seen.seen} == {TRACE}

        # The batches that decided them link the trace: before the restart and after.
        deadline = time.monotonic() + 30
        while not collector.linking(since=restarted) and time.monotonic() < deadline:
            time.sleep(0.2)
        spans = collector.linking()
        assert {s.name for s in spans} == {"xwait.decide", "xwait.commit"}
        assert collector.linking(since=restarted), "the restarted worker's spans link it too"
        assert all(s.trace_id.hex() != TRACE_ID for s in spans)  # each batch its own trace
    finally:
        worker.stop()
