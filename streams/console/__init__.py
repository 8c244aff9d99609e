"""The operator-facing side of a worker: JSON API, ops console, Prometheus metrics.

Everything is served by the worker's own faust web server (bound to
`XWAIT_WEB_HOST`, 127.0.0.1 unless told otherwise, port `XWAIT_WEB_PORT`):

    GET  /xwait/console                         the ops console (one HTML page, no data in it)
    GET  /xwait/api/waits, /xwait/api/waits/{key}, /xwait/api/review,
         /xwait/api/versions                    (the definitions' versions and their waits)
                                                with a token configured: `Authorization:
                                                Bearer` the read or the command token
    POST /xwait/api/waits/{key}/{command}       `Authorization: Bearer $XWAIT_CONSOLE_TOKEN`
    POST /xwait/api/bulk, GET /xwait/api/bulk/{operation}
                                                a command for every wait of a filter
                                                (`streams.console.bulk`)
    GET  /xwait/api/definitions, /xwait/api/definitions/{name}
                                                each definition's BPMN diagram and the counts
                                                on its nodes (`streams.console.diagram`)
    GET  /xwait/static/bpmn-js/<version>/...    the vendored bpmn-js viewer the page draws with
    GET  /metrics                               Prometheus text format 0.0.4 (counts only)
    GET  /healthz, /readyz                      liveness and readiness (`streams.console.health`)

Every response carries a Content-Security-Policy and X-Frame-Options: DENY
(the page may not be framed, and runs only its own script).  The console
depends on the small `ConsoleHost` interface (`streams.console.host`), not on
the worker's module.  See `streams.console.api` (access, routing between
workers) and `streams.console.metrics`.
"""

from __future__ import annotations

from typing import Any

from faust.web import Request, Response, View

from streams.console.api import Console, register
from streams.console.bulk import register as register_bulk
from streams.console.diagram import register_diagram
from streams.console.health import Health
from streams.console.host import ConsoleHost
from streams.console.metrics import CONTENT_TYPE, Metrics
from streams.console.page import PAGE, PAGE_CSP
from streams.console.versions import register as register_versions

__all__ = ["ConsoleHost", "install"]

# Everything but the page: JSON and metrics never run script or load anything.
API_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
SECURITY_HEADERS = {
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


async def _security_headers(request: Any, response: Any) -> None:
    """aiohttp's on_response_prepare: every response of the worker's web server."""
    headers = response.headers
    headers.setdefault("Content-Security-Policy",
                       PAGE_CSP if request.path == "/xwait/console" else API_CSP)
    for name, value in SECURITY_HEADERS.items():
        headers.setdefault(name, value)
    if request.path.startswith("/xwait/api/"):
        headers.setdefault("Cache-Control", "no-store")


def install(host: ConsoleHost) -> None:
    """Register the console's views on `host.app`, its observers and its response headers."""
    app = host.app
    console = Console(host)
    metrics = Metrics(host, lambda: console.producer_failures)
    host.observers.append(metrics.observations)
    register(host, console)
    register_versions(host, console)
    register_bulk(host, console)
    register_diagram(host, console)

    health = Health(host, host.settings.ready_max_lag)
    app.task(health.beat_forever)

    async def count_rebalance(sender: Any, assigned: Any = None, **kwargs: Any) -> None:
        metrics.collector.rebalances += 1
        health.reassigned()

    app.on_partitions_assigned.connect(count_rebalance)
    web_app = getattr(app.web, "web_app", None)  # faust's aiohttp driver
    if web_app is not None:
        web_app.on_response_prepare.append(_security_headers)

    @app.page("/xwait/console")
    class ConsolePage(View):
        """The ops console: one HTML page, no data in it (it reads the JSON API)."""
        async def get(self, request: Request, **kwargs: Any) -> Response:
            return self.html(PAGE)

    @app.page("/healthz")
    class Healthz(View):
        """Liveness: 200 `{"status": "ok"}` while the worker's event loop turns; 503
        `stuck` once it was held more than 30 s (`longestHoldS`: the longest it was
        late). A worker that owns nothing, or waits for a rebalance, is alive."""
        async def get(self, request: Request, **kwargs: Any) -> Response:
            status, body = health.healthz()
            return self.json(body, status=status)

    @app.page("/readyz")
    class Readyz(View):
        """Readiness: 200 once the worker has taken its assigned partitions over and
        every input partition it owns is at most `XWAIT_READY_MAX_LAG` records behind
        (it then stays ready until its partitions move again, so a burst does not
        empty a Service); 503 with `reasons` before that. Body: `ready`, `reasons`,
        `ownedPartitions`, `maxLag`, `maxLagAllowed`."""
        async def get(self, request: Request, **kwargs: Any) -> Response:
            status, body = health.readyz()
            return self.json(body, status=status)

    @app.page("/metrics")
    class MetricsPage(View):
        """Prometheus text format 0.0.4 (counts only: no keys, tenants or payloads)."""
        async def get(self, request: Request, **kwargs: Any) -> Response:
            return self.bytes(metrics.render(), content_type=CONTENT_TYPE)
