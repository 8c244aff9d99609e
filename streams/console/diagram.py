"""Each definition as its BPMN diagram, with where its waits stand and what they did.

    GET /xwait/api/definitions                  the definitions this worker runs
    GET /xwait/api/definitions/{name}           its BPMN (streams.bpmn) and counts on its
                                                nodes, summed over every worker
    GET /xwait/api/definitions/{name}?local=1   this worker's raw counts only
    GET /xwait/static/bpmn-js/<version>/<file>  the vendored bpmn-js viewer (no CDN)

Counts on the nodes:

* the first wait (its event-based gateway, or a probe's poll timer): waits
  parked and suspended now, from the worker's census (by definition: a
  chained or escalated wait is counted there whatever its stage or level);
* the review task: waits in review now;
* send tasks, escalations, polls: actions sent over the last hour, per
  stage and level (`streams.console.activity`);
* the two end events: outcomes over the last hour by reason (cancelled
  waits are listed beside the diagram: an operator can cancel anywhere).

Every badge says which waits it counts, so a click lists them through the
console's list API (`state`, `outcome`, `definition`).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping
from importlib import resources
from typing import Any

import aiohttp
from faust.web import Request, Response, View
from yarl import URL

from streams.bpmn import shape, to_bpmn
from streams.console.activity import WINDOW_S, Activity
from streams.console.api import Access, ApiError, Console, check_key
from streams.console.host import ConsoleHost
from streams.core import WaitDefinition, WaitStatus

__all__ = ["BPMN_JS_VERSION", "STATIC_PREFIX", "node_counts", "register_diagram"]

BPMN_JS_VERSION = "18.31.1"  # as in static/bpmn-js/VERSION; see static/README.md to update
STATIC_PREFIX = f"/xwait/static/bpmn-js/{BPMN_JS_VERSION}"
_STATIC = {
    "bpmn-viewer.production.min.js": "text/javascript",
    "bpmn-js.css": "text/css",
    "diagram-js.css": "text/css",
    "LICENSE": "text/plain",
}
# A year: the version is in the URL, so a new viewer is a new URL.
STATIC_CACHE = "public, max-age=31536000, immutable"


def _badge(label: str, count: int, **query: str) -> dict[str, Any]:
    return {"label": label, "count": count, "list": query}


def node_counts(d: WaitDefinition, census: Mapping[str, int],
                activity: Mapping[str, int]) -> dict[str, list[dict[str, Any]]]:
    """Node id -> its badges (label, count, the list query that shows those waits)."""
    roles = shape(d).roles
    nodes: dict[str, list[dict[str, Any]]] = {}

    def put(role: tuple[object, ...], badge: dict[str, Any]) -> None:
        node = roles.get(role)
        if node is not None:
            nodes.setdefault(node, []).append(badge)

    several = len(d.stages) > 1 or any(s.escalation for s in d.stages)
    where = " (all stages and levels)" if several else ""
    put(("wait", 0, 0), _badge(f"parked{where}", census.get("parked", 0), state="parked"))
    if census.get("suspended", 0):
        put(("wait", 0, 0), _badge(f"suspended{where}", census["suspended"],
                                   state="suspended"))
    put(("review", 0), _badge("in review", census.get("in_review", 0), state="in_review"))
    for key, n in sorted(activity.items()):
        parts = key.split("|")
        kind = parts[0]
        if kind == "outcome":
            outcome, reason = parts[1], parts[2]
            end = {"RECEIVED": "end_received", "ESCALATED": "end_escalated"}.get(outcome)
            if end is not None:
                put((end,), _badge(f"{reason} (1 h)", n, state="done", outcome=outcome))
            continue
        ints = tuple(int(p) for p in parts[1:])
        label = {"send_request": "requests", "reminder": "reminders",
                 "escalation": "escalations", "review": "reviews", "poll": "polls",
                 "close_out": "close-outs"}[kind]
        role: tuple[object, ...] = (kind, *ints)
        if kind == "send_request" and role not in roles:
            role = ("fan_out",)  # first-valid: one request per party, from the fan-out
            roles.setdefault(role, "fan_out")
        put(role, _badge(f"{label} (1 h)", n))
    return nodes


def _local(host: ConsoleHost, activity: Activity, name: str) -> dict[str, Any]:
    owned = host.owned_partitions()
    census = {state: n for (state, d), n in host.census.totals(owned).items() if d == name}
    return {"census": census, "activity": activity.totals(name), "worker": str(
        host.app.conf.canonical_url)}


def register_diagram(host: ConsoleHost, console: Console, activity: Activity) -> None:
    app = host.app
    static = resources.files("streams.console.static").joinpath("bpmn-js")
    files = {name: (static.joinpath(name).read_bytes(), ctype)
             for name, ctype in _STATIC.items()}

    def answer(view: View, status: int, body: Any) -> Response:
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        return view.json(body, status=status, headers=headers)

    def definition(name: str) -> WaitDefinition:
        check_key(name)
        d = host.definitions.get(name)
        if d is None:
            raise ApiError(404, f"no definition {name!r} on this worker; it runs "
                                f"{', '.join(sorted(host.definitions)) or 'none'}")
        return d

    async def merged(name: str, auth: str | None) -> dict[str, Any]:
        mine = _local(host, activity, name)
        me = URL(console.own_url)
        peers = [u for u in console.worker_urls()
                 if (URL(u).host, URL(u).port) != (me.host, me.port)]
        path = str(URL(f"/xwait/api/definitions/{name}").with_query({"local": "1"}))
        results = await asyncio.gather(*(console.fetch(u, path, auth) for u in peers),
                                       return_exceptions=True)
        census: Counter[str] = Counter(mine["census"])
        counts: Counter[str] = Counter(mine["activity"])
        answered, missing = [mine["worker"]], []
        for url, result in zip(peers, results, strict=True):
            if isinstance(result, BaseException) or result[0] != 200:
                missing.append(url)
                continue
            census.update(result[1].get("census", {}))
            counts.update(result[1].get("activity", {}))
            answered.append(url)
        return {"census": dict(census), "activity": dict(counts), "workers": answered,
                "unavailable": missing, "complete": not missing}

    @app.page("/xwait/api/definitions")
    class Definitions(View):
        """The definitions the worker runs: name, variant, stages."""
        async def get(self, request: Request, **kwargs: Any) -> Response:
            req: Any = request
            try:
                console.authorize(req.headers.get("Authorization"), Access.READ)
            except ApiError as exc:
                return answer(self, exc.status, exc.body)
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
                    return answer(self, 200, _local(host, activity, d.name))
                counts = await merged(d.name, auth)
            except ApiError as exc:
                return answer(self, exc.status, exc.body)
            except aiohttp.ClientError as exc:  # pragma: no cover - gathered above
                return answer(self, 503, {"error": str(exc)})
            cancelled = sum(n for k, n in counts["activity"].items()
                            if k.startswith("outcome|CANCELLED|"))
            return answer(self, 200, {
                "name": d.name, "variant": d.variant.value, "bpmn": to_bpmn(d),
                "windowSeconds": WINDOW_S,
                "census": {s.value: counts["census"].get(s.value, 0) for s in WaitStatus},
                "nodes": node_counts(d, counts["census"], counts["activity"]),
                "cancelled": cancelled, "workers": counts["workers"],
                "unavailable": counts["unavailable"], "complete": counts["complete"]})

    @app.page(f"{STATIC_PREFIX}/{{file}}")
    class Static(View):
        """The vendored bpmn-js viewer the console draws with (nothing from a CDN)."""
        async def get(self, request: Request, **kwargs: Any) -> Response:
            found = files.get(str(kwargs.get("file", "")))
            if found is None:
                return answer(self, 404, {"error": "no such file"})
            return self.bytes(found[0], content_type=found[1],
                              headers={"Cache-Control": STATIC_CACHE})
