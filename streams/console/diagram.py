"""Each definition as its BPMN diagram, with where its waits stand and how they ended.

    GET /xwait/api/definitions                  the definitions this worker runs
    GET /xwait/api/definitions/{name}           its BPMN (streams.bpmn) and counts on its
                                                nodes, summed over every worker
    GET /xwait/api/definitions/{name}?local=1&endedFrom=&endedTo=
                                                this worker's own counts, for that window
    GET /xwait/static/bpmn-js/<version>/<file>  the vendored bpmn-js viewer (no CDN)

Counts on the nodes, each with the list query that shows exactly the waits
it counts (a click on it fills the console's list with that query):

* the first wait (its event-based gateway, or a probe's poll timer): waits
  parked and suspended now, from the worker's census (by definition: a
  chained or escalated wait is counted there whatever its stage or level);
* the review task: waits in review now;
* the two end events: waits that ended in the last hour, by reason
  (`streams.console.activity`: read from the stored rows of finished waits,
  so they survive a restart), listed by `endedFrom`/`endedTo` and `reason`;
* cancelled waits end wherever an operator cancels them: they are counted
  beside the diagram (`exits`), as every outcome of the hour is.

A worker decodes at most `streams.console.activity.COUNT_BUDGET` finished
waits for one diagram; past it `countedAll` is false and the counts of the
hour are lower bounds (the list still shows every wait).

Every badge has a `tone` the page colours it by: `now` (where waits stand),
`received`, `escalated`, `send_failed` (an escalated wait whose send failed
for good: it never reached anyone) and `cancelled`.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Mapping
from importlib import resources
from typing import Any

import aiohttp
from faust.web import Request, Response, View
from yarl import URL

from streams.bpmn import shape, to_bpmn
from streams.console.activity import WINDOW_MS, Window, ended_counts
from streams.console.api import Access, ApiError, Console, answer, check_key, denied
from streams.console.host import ConsoleHost
from streams.core import OutcomeKind, OutcomeReason, WaitDefinition, WaitStatus

__all__ = ["BPMN_JS_VERSION", "STATIC_PREFIX", "VIEWER", "exits", "node_counts",
           "register_diagram", "tone"]

BPMN_JS_VERSION = "18.31.1"  # as in static/vendor/bpmn-js/VERSION; see vendor/README.md
STATIC_PREFIX = f"/xwait/static/bpmn-js/{BPMN_JS_VERSION}"
# The navigated viewer: the plain viewer plus zoom and pan (mouse, wheel, keyboard).
VIEWER = "bpmn-navigated-viewer.production.min.js"
_STATIC = {
    VIEWER: "text/javascript",
    "bpmn-js.css": "text/css",
    "diagram-js.css": "text/css",
    "LICENSE": "text/plain",
}
# A year: the version is in the URL, so a new viewer is a new URL.
STATIC_CACHE = "public, max-age=31536000, immutable"
_END = {OutcomeKind.RECEIVED.value: "end_received", OutcomeKind.ESCALATED.value: "end_escalated"}


def tone(outcome: str, reason: str | None = None) -> str:
    """The colour family of an outcome on the page: received, escalated, send_failed,
    cancelled."""
    if outcome == OutcomeKind.ESCALATED.value and reason == OutcomeReason.SEND_FAILED.value:
        return "send_failed"
    return outcome.lower()


def _badge(label: str, count: int, tone_: str, query: Mapping[str, str]) -> dict[str, Any]:
    return {"label": label, "count": count, "tone": tone_, "list": dict(query)}


def node_counts(d: WaitDefinition, census: Mapping[str, int], ended: Mapping[str, int],
                window: Window) -> dict[str, list[dict[str, Any]]]:
    """Node id -> its badges (label, count, tone, the list query that shows those waits).

    `census`: waits by state now; `ended`: waits that ended in `window` by
    "OUTCOME|reason" (`streams.console.activity.ended_key`).
    """
    roles = shape(d).roles
    nodes: dict[str, list[dict[str, Any]]] = {}

    def put(role: tuple[object, ...], badge: dict[str, Any]) -> None:
        node = roles.get(role)
        if node is not None:
            nodes.setdefault(node, []).append(badge)

    several = len(d.stages) > 1 or any(s.escalation for s in d.stages)
    where = " (all stages and levels)" if several else ""
    put(("wait", 0, 0), _badge(f"parked{where}", census.get("parked", 0), "now",
                               {"state": "parked"}))
    if census.get("suspended", 0):
        put(("wait", 0, 0), _badge(f"suspended{where}", census["suspended"], "now",
                                   {"state": "suspended"}))
    put(("review", 0), _badge("in review", census.get("in_review", 0), "now",
                              {"state": "in_review"}))
    for outcome, end in _END.items():
        reasons = sorted((key.split("|", 1)[1], n) for key, n in ended.items()
                         if key.split("|", 1)[0] == outcome)
        for reason, n in reasons:
            put((end,), _badge(f"{reason} (1 h)", n, tone(outcome, reason),
                               window.query(outcome, reason)))
        if not reasons:  # say what the exit counts, even when it counted nothing
            put((end,), _badge(f"{outcome.lower()} (1 h)", 0, tone(outcome),
                               window.query(outcome)))
    return nodes


def exits(ended: Mapping[str, int], window: Window) -> list[dict[str, Any]]:
    """Every outcome of the hour by exit, cancelled ones too (they have no node): the
    legend beside the diagram."""
    out = []
    for outcome in OutcomeKind:
        n = sum(c for key, c in ended.items() if key.split("|", 1)[0] == outcome.value)
        out.append(_badge(f"{outcome.value.lower()} (1 h)", n, tone(outcome.value),
                          window.query(outcome.value)))
    failed = ended.get(f"{OutcomeKind.ESCALATED.value}|{OutcomeReason.SEND_FAILED.value}", 0)
    out.append(_badge("send failed (1 h)", failed, "send_failed",
                      window.query(OutcomeKind.ESCALATED.value,
                                   OutcomeReason.SEND_FAILED.value)))
    return out


async def _local(host: ConsoleHost, name: str, window: Window) -> dict[str, Any]:
    owned = host.owned_partitions()
    census = {state: n for (state, d), n in host.census.totals(owned).items() if d == name}
    ended = await ended_counts(host, name, window)
    return {"census": census, "ended": ended.counts, "endedComplete": ended.complete,
            "worker": str(host.app.conf.canonical_url)}


def _window(query: Any) -> Window | None:
    """The window a peer was asked for (`endedFrom`/`endedTo`), or None."""
    try:
        since, until = int(query.get("endedFrom", "")), int(query.get("endedTo", ""))
    except ValueError:
        return None
    return Window(since, until) if 0 <= until - since <= WINDOW_MS else None


def register_diagram(host: ConsoleHost, console: Console) -> None:
    app = host.app
    static = resources.files("streams.console.static").joinpath("vendor", "bpmn-js")
    files = {name: (static.joinpath(name).read_bytes(), ctype)
             for name, ctype in _STATIC.items()}

    def definition(name: str) -> WaitDefinition:
        check_key(name)
        d = host.definitions.get(name)
        if d is None:
            raise ApiError(404, f"no definition {name!r} on this worker; it runs "
                                f"{', '.join(sorted(host.definitions)) or 'none'}")
        return d

    async def merged(name: str, auth: str | None, window: Window) -> dict[str, Any]:
        mine = await _local(host, name, window)
        me = URL(console.own_url)
        peers = [u for u in console.worker_urls()
                 if (URL(u).host, URL(u).port) != (me.host, me.port)]
        path = str(URL(f"/xwait/api/definitions/{name}").with_query({
            "local": "1", "endedFrom": str(window.since), "endedTo": str(window.until)}))
        results = await asyncio.gather(*(console.fetch(u, path, auth) for u in peers),
                                       return_exceptions=True)
        census: Counter[str] = Counter(mine["census"])
        ended: Counter[str] = Counter(mine["ended"])
        answered, missing = [mine["worker"]], []
        counted_all = mine["endedComplete"]
        for url, result in zip(peers, results, strict=True):
            if isinstance(result, BaseException) or result[0] != 200:
                missing.append(url)
                continue
            census.update(result[1].get("census", {}))
            ended.update(result[1].get("ended", {}))
            counted_all = counted_all and result[1].get("endedComplete", False)
            answered.append(url)
        return {"census": dict(census), "ended": dict(ended), "workers": answered,
                "unavailable": missing, "complete": not missing, "countedAll": counted_all}

    @app.page("/xwait/api/definitions")
    class Definitions(View):
        """The definitions the worker runs: name, variant, stages."""
        async def get(self, request: Request, **kwargs: Any) -> Response:
            if (refused := denied(self, console, request, Access.READ)) is not None:
                return refused
            return answer(self, 200, {"definitions": [
                {"name": d.name, "variant": d.variant.value, "stages": len(d.stages)}
                for d in sorted(host.definitions.values(), key=lambda d: d.name)]})

    @app.page("/xwait/api/definitions/{name}")
    class DefinitionDiagram(View):
        """One definition as BPMN (`bpmn`), the census of its waits by state, and
        `nodes`: node id -> counts (`label`, `count`, and the `list` query that lists
        those waits), summed over every worker (`local=1`: this worker's own)."""
        async def get(self, request: Request, **kwargs: Any) -> Response:
            req: Any = request
            try:
                auth = req.headers.get("Authorization")
                console.authorize(auth, Access.READ)
                d = definition(str(kwargs.get("name", "")))
                if req.query.get("local") == "1":
                    asked = _window(req.query)
                    if asked is None:
                        raise ApiError(400, "Expected endedFrom and endedTo (epoch ms, at most "
                                            "an hour apart) with local=1")
                    return answer(self, 200, await _local(host, d.name, asked))
                window = Window.ending(int(time.time() * 1000))
                counts = await merged(d.name, auth, window)
            except ApiError as exc:
                return answer(self, exc.status, exc.body)
            except aiohttp.ClientError as exc:  # pragma: no cover - gathered above
                return answer(self, 503, {"error": str(exc)})
            ended = counts["ended"]
            cancelled = sum(n for k, n in ended.items()
                            if k.startswith(f"{OutcomeKind.CANCELLED.value}|"))
            return answer(self, 200, {
                "name": d.name, "variant": d.variant.value, "bpmn": to_bpmn(d),
                "windowSeconds": WINDOW_MS // 1000,
                "window": {"from": window.since, "to": window.until},
                "census": {s.value: counts["census"].get(s.value, 0) for s in WaitStatus},
                "nodes": node_counts(d, counts["census"], ended, window),
                "exits": exits(ended, window), "cancelled": cancelled,
                "countedAll": counts["countedAll"],
                "workers": counts["workers"], "unavailable": counts["unavailable"],
                "complete": counts["complete"]})

    @app.page(f"{STATIC_PREFIX}/{{file}}")
    class Static(View):
        """The vendored bpmn-js viewer the console draws with (nothing from a CDN)."""
        async def get(self, request: Request, **kwargs: Any) -> Response:
            found = files.get(str(kwargs.get("file", "")))
            if found is None:
                return answer(self, 404, {"error": "no such file"})
            return self.bytes(found[0], content_type=found[1],
                              headers={"Cache-Control": STATIC_CACHE})
