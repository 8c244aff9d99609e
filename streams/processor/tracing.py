"""OpenTelemetry spans of the worker's batches, exported by OTLP (HTTP/protobuf).

Two spans per batch, in one trace of their own:

    xwait.decide   the batch's decisions (`Applier._decide`)             root
    xwait.commit   its outputs, transactions and RocksDB write           child of decide
                   (`Applier._commit`; an error status when it failed)

Each links to the trace of every wait the batch decided for (`Handled.traceparent`:
the W3C trace its request came with, kept with the wait, or the header of the
input itself), so a wait's trace leads to the batches that decided it - its
reply, its reminders fired by timers days later, its outcome - and a batch's
to the waits in it.  Links rather than children: one batch decides for
hundreds of waits, and a wait is decided by many batches on many workers.

Only when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``)
is set, and neither ``OTEL_SDK_DISABLED=true`` nor ``OTEL_TRACES_EXPORTER=none``:
otherwise `from_env` returns None, no OpenTelemetry module is imported and no
span is made.  The exporter reads the other standard ``OTEL_*`` variables
itself (headers, timeout, ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``);
spans leave in a background thread (`BatchSpanProcessor`), never on the event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from streams.headers import trace_id_of

log = logging.getLogger(__name__)

SERVICE_NAME = "xwait-worker"
"""``service.name`` unless ``OTEL_SERVICE_NAME`` says otherwise."""

class BatchTracer:
    """Makes the two spans of a batch on an OpenTelemetry tracer (see the module)."""

    def __init__(self, tracer: Any, provider: Any = None) -> None:
        from opentelemetry import trace

        self._trace = trace
        self._tracer = tracer
        self._provider = provider

    def links(self, traceparents: Iterable[str | None]) -> list[Any]:
        """One link per distinct trace among `traceparents` (the parent span each names)."""
        trace = self._trace
        seen: dict[str, Any] = {}
        for tp in traceparents:
            if tp is None or tp in seen:
                continue
            seen[tp] = trace.Link(trace.SpanContext(
                trace_id=int(trace_id_of(tp), 16), span_id=int(tp[36:52], 16),
                is_remote=True, trace_flags=trace.TraceFlags(int(tp[53:55], 16))),
                {"xwait.trace_id": trace_id_of(tp)})
        return list(seen.values())

    def decided(self, links: list[Any], started_ns: int, ended_ns: int,
                attributes: Mapping[str, Any]) -> Any:
        """The batch's decide span (ended); its context is the commit span's parent."""
        span = self._tracer.start_span("xwait.decide", links=links, start_time=started_ns,
                                       attributes=dict(attributes))
        span.end(end_time=ended_ns)
        return span

    def committed(self, decide: Any, links: list[Any], started_ns: int, ended_ns: int,
                  attributes: Mapping[str, Any], error: BaseException | None = None) -> None:
        trace = self._trace
        span = self._tracer.start_span(
            "xwait.commit", context=trace.set_span_in_context(decide), links=links,
            start_time=started_ns, attributes=dict(attributes))
        if error is not None:
            span.set_status(trace.Status(trace.StatusCode.ERROR, f"{type(error).__name__}: "
                                                                 f"{error}"))
        span.end(end_time=ended_ns)

    def shutdown(self) -> None:
        """Export what is left (the worker stops)."""
        if self._provider is not None:
            self._provider.shutdown()


def enabled(env: Mapping[str, str]) -> bool:
    """Whether the environment asks for spans to be exported (see the module)."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return bool(env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
                or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip())


def from_env(env: Mapping[str, str], app_id: str, max_links: int = 1000,
             exporter: Any = None) -> BatchTracer | None:
    """A tracer exporting by OTLP/HTTP, or None when the environment asks for none.

    `max_links`: links one span keeps (OpenTelemetry's default, 128, would drop
    most of a full batch's): the most records and timers a batch decides
    (`Tuning.batch_max` + `Tuning.timers_max`).  `exporter` replaces the OTLP
    exporter (a test's in-memory one): spans are made whatever the environment then.
    """
    if exporter is None and not enabled(env):
        return None
    from opentelemetry.sdk.resources import SERVICE_NAME as SERVICE_KEY
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import SpanLimits, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    resource = Resource.create({SERVICE_KEY: env.get("OTEL_SERVICE_NAME") or SERVICE_NAME,
                                "xwait.app_id": app_id})
    provider = TracerProvider(resource=resource, span_limits=SpanLimits(max_links=max_links))
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        log.info("traces: batch spans exported by OTLP/HTTP to %s",
                 env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                 or env.get("OTEL_EXPORTER_OTLP_ENDPOINT"))
    else:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    return BatchTracer(provider.get_tracer("xwait.worker"), provider)


__all__ = ["SERVICE_NAME", "BatchTracer", "enabled", "from_env"]
