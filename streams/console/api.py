"""The console's JSON API, served by the worker's own faust web server.

    GET  /xwait/api/waits?state=&definition=&tenant=&limit=   not-done waits by next due time
    GET  /xwait/api/waits/{key}                               one wait's status
    GET  /xwait/api/review?limit=                             waits in review + latest rejected
    POST /xwait/api/waits/{key}/{suspend|resume|cancel|deliver|review}   (Bearer token)

Routing.  A key lives in the partition its utf-8 bytes hash to (murmur2,
`streams.partitioning`); a worker that does not own that partition forwards
the request to the worker that does, found in faust's assignment
(`app.router.table_metadata("waits")`: web URL -> changelog partitions).
A forwarded request carries `X-Xwait-Forwarded`, so it is never forwarded
twice (a partition that is moving answers 503).  A list is the merge of
every worker's own list (`local=1` asks one worker for its partitions only).
Mutations are not forwarded: they are Command records on Kafka, which reach
the owner of the key by themselves.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import threading
from typing import TYPE_CHECKING, Any

import aiohttp
from faust.web import Request, Response, View
from yarl import URL

from streams.client import ClientError, KafkaUnavailable, TopicMissing, XwaitClient
from streams.client.errors import DeliveryFailed, InvalidRequest
from streams.console import review, waits
from streams.partitioning import partition_for
from streams.processor.table_scan import owned_rows

if TYPE_CHECKING:
    from streams.processor.app import Worker

log = logging.getLogger(__name__)

FORWARDED = "X-Xwait-Forwarded"
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
# How long a worker waits for another worker's answer.  A list walks the
# other worker's table, which may take seconds with a large one; much longer
# leaves an operator staring at a spinner when a worker hangs.
PEER_TIMEOUT_S = 15.0
ACTIONS = ("suspend", "resume", "cancel", "deliver", "review")
REVIEW_OUTCOMES = ("Accept", "Submit Correction")


class ApiError(Exception):
    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.body = {"error": message, **extra}


def _same(a: str, b: str) -> bool:
    ua, ub = URL(a), URL(b)
    return (ua.host, ua.port) == (ub.host, ub.port)


class Console:
    """What the views share: the worker, a command producer, the peers' URLs."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self._client: XwaitClient | None = None
        self._client_lock = threading.Lock()  # XwaitClient is not thread-safe

    # -- cluster -------------------------------------------------------------
    @property
    def own_url(self) -> str:
        return str(self.worker.app.conf.canonical_url)

    def worker_urls(self) -> dict[str, set[int]]:
        """Web URL of every worker of the group -> the waits partitions it owns."""
        app: Any = self.worker.app
        topic = self.worker.waits.changelog_topic.get_topic_name()
        try:
            meta = app.router.table_metadata(self.worker.waits.name)
        except KeyError:
            meta = {}
        urls = {str(url): set(tps.get(topic, ())) for url, tps in meta.items()}
        if not any(_same(u, self.own_url) for u in urls):
            urls[self.own_url] = self.worker.owned_partitions()
        return urls

    def owner_of(self, partition: int) -> str | None:
        for url, parts in self.worker_urls().items():
            if partition in parts:
                return url
        return None

    async def fetch(self, url: str, path_qs: str) -> tuple[int, Any]:
        app: Any = self.worker.app
        session: aiohttp.ClientSession = app.http_client
        async with session.get(URL(url).join(URL(path_qs)),
                               headers={FORWARDED: self.own_url},
                               timeout=aiohttp.ClientTimeout(total=PEER_TIMEOUT_S)) as resp:
            return resp.status, await resp.json(content_type=None)

    # -- reads ---------------------------------------------------------------
    def local_status(self, key: str, partition: int) -> dict[str, Any]:
        value = self.worker.waits.get(key.encode())
        try:
            slot = waits.read_slot(value)
        except ValueError as exc:
            raise ApiError(500, f"the stored row of {key!r} cannot be read: {exc}") from exc
        if slot is None or slot.wait is None:
            replies, commands = ((0, 0) if slot is None
                                 else (len(slot.early_replies), len(slot.early_commands)))
            raise ApiError(404, f"no wait with key {key!r}", key=key, earlyReplies=replies,
                           earlyCommands=commands)
        return waits.status(key, slot, partition) | {"worker": self.own_url}

    async def status(self, key: str, forwarded: bool, path_qs: str) -> tuple[int, Any]:
        if not key:
            raise ApiError(400, "expected a wait key")
        partition = partition_for(key.encode(), self.worker.settings.partitions)
        if partition in self.worker.owned_partitions():
            return 200, self.local_status(key, partition)
        owner = self.owner_of(partition)
        if forwarded or owner is None or _same(owner, self.own_url):
            raise ApiError(503, f"partition {partition} of key {key!r} has no owner right now "
                           "(a rebalance is under way); retry shortly", partition=partition)
        try:
            return await self.fetch(owner, path_qs)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise ApiError(503, f"the worker owning partition {partition} ({owner}) did not "
                           f"answer: {exc or type(exc).__name__}", partition=partition) from exc

    async def local_list(self, filters: waits.Filters, limit: int) -> list[dict[str, Any]]:
        w = self.worker
        found: list[dict[str, Any]] = []
        rows = owned_rows(w.waits, w.owned_partitions(), w.settings.partitions)
        for key, partition in await waits.first_waits(rows, filters, limit):
            try:
                slot = waits.read_slot(w.waits.get(key))
            except ValueError:
                continue
            if slot is not None and slot.wait is not None:
                found.append(waits.summary(slot.wait, partition))
        return found

    async def cluster_list(self, filters: waits.Filters, limit: int, local: bool,
                           query: dict[str, str]) -> dict[str, Any]:
        mine = await self.local_list(filters, limit)
        answered, missing = [self.own_url], []
        merged = list(mine)
        if not local:
            peers = [u for u in self.worker_urls() if not _same(u, self.own_url)]
            path = str(URL("/xwait/api/waits").with_query({**query, "local": "1"}))
            results = await asyncio.gather(*(self.fetch(u, path) for u in peers),
                                           return_exceptions=True)
            for url, result in zip(peers, results, strict=True):
                if isinstance(result, BaseException) or result[0] != 200:
                    log.warning("list: worker did not answer url=%s error=%s", url, result)
                    missing.append(url)
                    continue
                answered.append(url)
                merged.extend(result[1].get("waits", []))
        merged.sort(key=waits.sort_key)
        return {"waits": merged[:limit], "count": len(merged[:limit]), "workers": answered,
                "unavailable": missing, "complete": not missing}

    # -- commands --------------------------------------------------------------
    def check_token(self, header: str | None) -> None:
        token = self.worker.settings.console_token
        if not token:
            raise ApiError(503, "commands are disabled on this worker: start it with "
                                "XWAIT_CONSOLE_TOKEN set to enable them")
        given = ""
        if header and header.startswith("Bearer "):
            given = header[len("Bearer "):].strip()
        if not given:
            raise ApiError(401, "a command needs the header 'Authorization: Bearer <token>'")
        if not hmac.compare_digest(given.encode(), token.encode()):
            raise ApiError(401, "the token is not the one this worker was started with")

    def _send(self, key: str, action: str, body: dict[str, Any]) -> dict[str, Any]:
        """Produce the command through the SDK (blocking: runs in a thread)."""
        operator = _opt_str(body, "operator") or "console"
        reason = _opt_str(body, "reason")
        with self._client_lock:
            if self._client is None:
                # The console already knows the key (it just read it): no key check,
                # which would be a blocking HTTP call back into this worker.
                self._client = XwaitClient(self.worker.settings, check_keys=False)
            c = self._client
            record: dict[str, Any] = {"correlationKey": key, "command": action.upper(),
                                      "operator": operator}
            if action == "suspend":
                c.suspend(key, _required(reason, "reason"), operator=operator)
                record["reason"] = reason
            elif action == "resume":
                c.resume(key, reason=reason, operator=operator)
                record["reason"] = reason
            elif action == "cancel":
                c.cancel(key, _required(reason, "reason"), operator=operator)
                record["reason"] = reason
            elif action == "deliver":
                if body.get("responseData") is None:
                    raise ApiError(400, "deliver needs 'responseData' (JSON)")
                c.deliver(key, body["responseData"], reason=reason, operator=operator)
                record.update(reason=reason, responseData=body["responseData"])
            else:
                outcome = body.get("outcome")
                if outcome not in REVIEW_OUTCOMES:
                    raise ApiError(400, "review needs 'outcome': 'Accept' or "
                                        "'Submit Correction'")
                note = _required(_opt_str(body, "note"), "note")
                c.review(key, outcome, note, corrected_data=body.get("responseData"),
                         operator=operator)
                record.update(command="REVIEW", reviewOutcome=outcome, reviewNote=note,
                              responseData=body.get("responseData"))
        return record

    async def command(self, key: str, action: str, auth: str | None,
                      raw_body: str) -> tuple[int, Any]:
        if action not in ACTIONS:
            raise ApiError(404, f"unknown command {action!r}; expected one of "
                                f"{', '.join(ACTIONS)}")
        self.check_token(auth)
        try:
            body = json.loads(raw_body) if raw_body.strip() else {}
        except ValueError as exc:
            raise ApiError(400, f"the body is not JSON: {exc}") from exc
        if not isinstance(body, dict):
            raise ApiError(400, "the body must be a JSON object")
        loop = asyncio.get_running_loop()
        try:
            record = await loop.run_in_executor(None, self._send, key, action, body)
        except InvalidRequest as exc:
            raise ApiError(400, str(exc)) from exc
        except (KafkaUnavailable, TopicMissing) as exc:
            raise ApiError(503, str(exc)) from exc
        except (DeliveryFailed, ClientError) as exc:
            raise ApiError(502, str(exc)) from exc
        topic = self.worker.settings.topic("commands")
        log.info("console command key=%s command=%s operator=%s", key, record["command"],
                 record["operator"])
        return 202, {"accepted": True, "command": record, "topic": topic}


def _opt_str(body: dict[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ApiError(400, f"{name!r} must be a string")
    return value


def _required(value: str | None, name: str) -> str:
    if not value or not value.strip():
        raise ApiError(400, f"this command needs {name!r}")
    return value


def _limit(raw: str | None) -> int:
    if raw is None or raw == "":
        return DEFAULT_LIMIT
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(400, f"limit must be a whole number, got {raw!r}") from None
    if not 1 <= value <= MAX_LIMIT:
        raise ApiError(400, f"limit must be between 1 and {MAX_LIMIT}, got {value}")
    return value


def _filters(query: Any) -> waits.Filters:
    state = query.get("state") or None
    if state is not None and state not in waits.STATES:
        raise ApiError(400, f"state must be one of {', '.join(waits.STATES)}, got {state!r}")
    return waits.Filters(state=state, definition=query.get("definition") or None,
                         tenant=query.get("tenant") or None)


def register(worker: Worker, console: Console) -> None:
    app = worker.app

    def answer(view: View, status: int, body: Any) -> Response:
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        return view.json(body, status=status, headers=headers)

    @app.page("/xwait/api/waits")
    class WaitList(View):
        async def get(self, request: Request, **kwargs: Any) -> Response:
            req: Any = request
            try:
                query = {k: v for k, v in req.query.items()
                         if k in ("state", "definition", "tenant", "limit")}
                body = await console.cluster_list(_filters(req.query), _limit(req.query.get(
                    "limit")), req.query.get("local") == "1", query)
            except ApiError as exc:
                return answer(self, exc.status, exc.body)
            return answer(self, 200, body)

    @app.page("/xwait/api/waits/{key}")
    class WaitStatus(View):
        async def get(self, request: Request, **kwargs: Any) -> Response:
            req: Any = request
            try:
                status, body = await console.status(
                    str(kwargs.get("key", "")), FORWARDED in req.headers, str(req.rel_url))
            except ApiError as exc:
                return answer(self, exc.status, exc.body)
            return answer(self, status, body)

    @app.page("/xwait/api/waits/{key}/{action}")
    class WaitCommand(View):
        async def post(self, request: Request, **kwargs: Any) -> Response:
            req: Any = request
            try:
                status, body = await console.command(
                    str(kwargs.get("key", "")), str(kwargs.get("action", "")),
                    req.headers.get("Authorization"), await req.text())
            except ApiError as exc:
                return answer(self, exc.status, exc.body)
            return answer(self, status, body)

    @app.page("/xwait/api/review")
    class ReviewQueue(View):
        async def get(self, request: Request, **kwargs: Any) -> Response:
            req: Any = request
            try:
                limit = _limit(req.query.get("limit"))
                in_review = await console.cluster_list(waits.Filters(state="in_review"),
                                                       limit, False, {"state": "in_review"})
            except ApiError as exc:
                return answer(self, exc.status, exc.body)
            body: dict[str, Any] = {"inReview": in_review["waits"],
                                    "unavailable": in_review["unavailable"]}
            loop = asyncio.get_running_loop()
            try:
                body["rejected"] = await loop.run_in_executor(
                    None, review.latest_rejected, worker.settings, limit)
            except review.ReviewReadFailed as exc:
                body["rejected"], body["rejectedError"] = [], str(exc)
            return answer(self, 200, body)
