"""Spans of the worker's batches: made only when OTLP is configured, each linked to the
traces of the waits the batch decided for (a fake committer, OpenTelemetry's in-memory
exporter)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from streams.processor import tracing
from streams.processor.applier import Applier
from streams.processor.model import InputRecord
from tests.processor.test_applier import World, port
from tests.processor.test_records import handler, reply, request

TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
TRACE_ID = int("4bf92f3577b34da6a3ce929d0e0e4736", 16)


def traced(rec: InputRecord, traceparent: str = TRACE) -> InputRecord:
    return InputRecord(rec.role, rec.topic, rec.partition, rec.offset, rec.key, rec.value,
                       rec.timestamp, rec.log_append_time, rec.follows, traceparent)


class Traced(World):
    """The applier's world, its batches traced to an in-memory exporter."""

    def __init__(self, tmp_path: Path) -> None:
        super().__init__(tmp_path)
        self.exported = InMemorySpanExporter()
        tracer = tracing.from_env({}, "t-processor", exporter=self.exported)
        self.applier = Applier(replace(self.ctx, tracer=tracer), handler, self.sequencer,
                               self.stores, port(self.committer), self.book, self.index, None)

    async def batch(self, *records: InputRecord, error: BaseException | None = None) -> None:
        self.stage(*records)
        await self.applier.run_batch()
        await self.settle()
        if error is None:
            self.committer.gates[-1].set_result(None)
        else:
            self.committer.gates[-1].set_exception(error)
        await self.applier.drain()

    def spans(self) -> list[Any]:
        return list(self.exported.get_finished_spans())


def _linked(span: Any) -> set[int]:
    return {link.context.trace_id for link in span.links}


def test_each_batch_has_a_decide_and_a_commit_span_linked_to_its_waits_traces(
    tmp_path: Path
) -> None:
    async def scenario() -> None:
        w = Traced(tmp_path)
        await w.batch(traced(request(0)))
        # The reply carries no trace of its own: its batch links the wait's, kept with it.
        await w.batch(reply(0, {"decision": "approved"}))
        decide, commit, decide2, commit2 = w.spans()
        assert [s.name for s in w.spans()] == ["xwait.decide", "xwait.commit"] * 2
        for span in w.spans():
            assert _linked(span) == {TRACE_ID}
            assert span.context.trace_id != TRACE_ID  # a trace of the batch's own
        assert commit.parent is not None and commit.parent.span_id == decide.context.span_id
        assert commit2.parent is not None and commit2.parent.span_id == decide2.context.span_id
        [link] = decide.links
        assert link.context.span_id == int("00f067aa0ba902b7", 16)
        assert decide.attributes["xwait.records"] == 1
        assert commit.attributes["xwait.outputs"] == 1  # the SEND_REQUEST
        assert decide.end_time <= commit.start_time
        assert commit.status.status_code is StatusCode.UNSET
        assert w.failures == []

    asyncio.run(scenario())


# Begins alike in shape with test_applier.py's scenarios (duplicates lists the pair),
# deliberately: each scenario runs its own world in asyncio.run.
def test_an_untraced_batch_links_nothing_and_a_failed_commit_is_an_error(
    tmp_path: Path
) -> None:
    async def scenario() -> None:
        w = Traced(tmp_path)
        await w.batch(request(0), error=RuntimeError("refused by the broker"))
        decide, commit = w.spans()
        assert decide.links == () and commit.links == ()
        assert commit.status.status_code is StatusCode.ERROR
        assert "refused by the broker" in (commit.status.description or "")
        assert w.failures == ["a batch of 1 records: refused by the broker"]

    asyncio.run(scenario())


@pytest.mark.parametrize(("env", "wanted"), [
    ({}, False),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"},
     False),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_TRACES_EXPORTER": "none"},
     False),
])
def test_spans_are_exported_only_when_an_otlp_endpoint_is_set(
    env: dict[str, str], wanted: bool
) -> None:
    tracer = tracing.from_env(env, "t-processor")
    assert (tracer is not None) is wanted
    if tracer is not None:
        tracer.shutdown()


def test_without_an_endpoint_a_worker_imports_no_opentelemetry() -> None:
    """No cost when unset: not a span made, not a module loaded."""
    code = ("import os, sys\n"
            "from streams.processor import worker, tracing\n"
            "assert tracing.from_env({}, 'x') is None\n"
            "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "[]"


def test_a_full_batch_keeps_a_link_to_every_wait_it_decided_for() -> None:
    """OpenTelemetry keeps 128 links by default; a batch decides for up to 1,000 waits."""
    exported = InMemorySpanExporter()
    tracer = tracing.from_env({}, "t-processor", max_links=1000, exporter=exported)
    assert tracer is not None
    traces = [f"00-{n + 1:032x}-{n + 1:016x}-01" for n in range(1000)]
    span = tracer.decided(tracer.links([*traces, *traces, None]), 0, 1, {})
    tracer.committed(span, [], 1, 2, {})
    decide, _ = exported.get_finished_spans()
    assert len(decide.links) == 1000 and decide.dropped_links == 0
