"""The operator-facing side of a worker: JSON API, ops console, Prometheus metrics.

Everything is served by the worker's own faust web server (bound to
`XWAIT_WEB_HOST`, 127.0.0.1 unless told otherwise, port `XWAIT_WEB_PORT`):

    GET  /xwait/console                         the ops console (one HTML page)
    GET  /xwait/api/waits, /xwait/api/waits/{key}, /xwait/api/review
    POST /xwait/api/waits/{key}/{command}       needs `Authorization: Bearer $XWAIT_CONSOLE_TOKEN`
    GET  /metrics                               Prometheus text format 0.0.4

See `streams.console.api` (routing between workers) and `streams.console.metrics`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from faust.web import Request, Response, View

from streams.console.api import Console, register
from streams.console.metrics import CONTENT_TYPE, LatenessObserver, Metrics
from streams.console.page import PAGE

if TYPE_CHECKING:
    from streams.processor.app import Worker

__all__ = ["install"]


def install(worker: Worker) -> None:
    """Register the console's views on `worker.app` and its observers on the worker."""
    app = worker.app
    console = Console(worker)
    metrics = Metrics(worker)
    worker.observers.append(LatenessObserver(metrics.lateness))
    register(worker, console)

    @app.page("/xwait/console")
    class ConsolePage(View):
        async def get(self, request: Request, **kwargs: Any) -> Response:
            return self.html(PAGE)

    @app.page("/metrics")
    class MetricsPage(View):
        async def get(self, request: Request, **kwargs: Any) -> Response:
            return self.text(await metrics.render(), content_type=CONTENT_TYPE)
