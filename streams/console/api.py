"""The console's JSON API, served by the worker's own faust web server.

    GET  /xwait/api/waits?state=&definition=&version=&tenant=&key=&outcome=&reason=
                          &parkedFrom=&parkedTo=&dueFrom=&dueTo=&endedFrom=&endedTo=
                          &after=&limit=
                                                                waits, a page at a time
    GET  /xwait/api/waits/{key}                                 one wait's status
    GET  /xwait/api/review?limit=                               waits in review + latest rejected
    POST /xwait/api/waits/{key}/{suspend|resume|cancel|deliver|review|reschedule|migrate}

Access.  With no token configured, reads are open and commands disabled (a
developer's loopback worker).  With `XWAIT_CONSOLE_TOKEN` (commands and
reads) and/or `XWAIT_CONSOLE_READ_TOKEN` (reads only), every request needs
`Authorization: Bearer <token>`: a wait key is the capability a reply needs,
and lists, payloads and rejected originals are not for whoever reaches the
port.  The token is checked before the body of a command is read.  A key the
processor's input would refuse (NUL, or longer than `MAX_KEY_BYTES`:
streams.core.keys) is refused with 400; any other key is served, `/` (as
%2F) included.

Routing.  A key lives in the partition its utf-8 bytes hash to (murmur2,
`streams.partitioning`); a worker that does not own that partition forwards
the request, with the caller's Authorization header, to the worker that
does, found in faust's assignment (`ConsoleHost.owners`: web URL -> the
partitions each worker owns).  A forwarded request carries
`X-Xwait-Forwarded`, so it is never forwarded twice (a partition that is
moving answers 503).  A list is the merge of every worker's own list
(`local=1` asks one worker for its partitions only).  Mutations are not
forwarded: they are Command records on Kafka, which reach the owner of the
key by themselves.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import threading
from datetime import datetime
from enum import StrEnum
from typing import Any

import aiohttp
from faust.web import Request, Response, View
from yarl import URL

from streams.client import ClientError, KafkaUnavailable, TopicMissing, XwaitClient
from streams.client.errors import DeliveryFailed, InvalidRequest
from streams.console import review, waits
from streams.console.host import ConsoleHost
from streams.core.keys import key_problem
from streams.partitioning import partition_for

log = logging.getLogger(__name__)

FORWARDED = "X-Xwait-Forwarded"
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
# Largest command body read.  A command is a few hundred bytes; a delivered
# or corrected answer may be larger, and the Command record must fit Kafka's
# default 1 MB limit anyway.
MAX_BODY_BYTES = 900_000
# How long a worker waits for another worker's answer.  A list walks the
# other worker's table, which may take seconds with a large one; much longer
# leaves an operator staring at a spinner when a worker hangs.
PEER_TIMEOUT_S = 15.0
ACTIONS = ("suspend", "resume", "cancel", "deliver", "review", "reschedule", "migrate")
REVIEW_OUTCOMES = ("Accept", "Submit Correction")
LIST_PARAMS = ("state", "definition", "tenant", "key", "outcome", "reason", "parkedFrom",
               "parkedTo", "endedFrom", "endedTo", "version", "dueFrom", "dueTo", "after",
               "limit")


class Access(StrEnum):
    READ = "read"
    COMMAND = "command"


class ApiError(Exception):
    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.body = {"error": message, **extra}


def _same(a: str, b: str) -> bool:
    ua, ub = URL(a), URL(b)
    return (ua.host, ua.port) == (ub.host, ub.port)


def check_key(key: str) -> str:
    """A wait key as the processor's input takes it (streams.core.keys), or 400.

    Every key the input accepts is served: at most MAX_KEY_BYTES, any
    character but NUL, `/` included (percent-encoded as %2F, the router
    matches the raw path, so `a%2Fb/resume` is key `a/b`, action `resume`).
    """
    if not key:
        raise ApiError(400, "Expected a wait key, but the path has none")
    problem = key_problem(key.encode("utf-8", "surrogatepass"))
    if problem is not None:
        raise ApiError(400, f"{problem}; no wait can have such a key")
    return key


def _bearer(header: str | None) -> str:
    if header and header.startswith("Bearer "):
        return header[len("Bearer "):].strip()
    return ""


class Console:
    """What the views share: the worker, a command producer, the peers' URLs."""

    def __init__(self, host: ConsoleHost) -> None:
        self.host = host
        self._client: XwaitClient | None = None
        self._client_lock = threading.Lock()  # XwaitClient is not thread-safe
        self.producer_failures = 0  # commands Kafka did not take (for the metrics)

    # -- access ----------------------------------------------------------------
    def authorize(self, header: str | None, need: Access) -> None:
        """Let the request through, or raise 401 (no or wrong token) / 503 (commands off)."""
        s = self.host.settings
        command_token, read_token = s.console_token, s.console_read_token
        if need is Access.COMMAND and not command_token:
            raise ApiError(503, "commands are disabled on this worker: start it with "
                                "XWAIT_CONSOLE_TOKEN set to enable them")
        accepted = [t for t in (command_token, read_token if need is Access.READ else None)
                    if t]
        if not accepted:
            return  # no token configured: reads are open
        given = _bearer(header)
        # Say which setting holds the token: the person reading this runs the
        # CLI or the SDK (which send XWAIT_CONSOLE_*), or the console's page.
        which = ("XWAIT_CONSOLE_TOKEN" if need is Access.COMMAND
                 else "XWAIT_CONSOLE_READ_TOKEN or XWAIT_CONSOLE_TOKEN")
        if not given:
            raise ApiError(401, f"this {need.value} needs the worker's token: set {which} "
                                "to it for the CLI and the SDK, type it at the top of the "
                                "console, or send 'Authorization: Bearer <token>'")
        if not any(hmac.compare_digest(given.encode(), t.encode()) for t in accepted):
            raise ApiError(401, f"the token sent is not one this worker accepts for a "
                                f"{need.value}: expected the worker's {which}")

    # -- cluster -------------------------------------------------------------
    @property
    def own_url(self) -> str:
        return str(self.host.app.conf.canonical_url)

    def worker_urls(self) -> dict[str, set[int]]:
        """Web URL of every worker of the group -> the waits partitions it owns."""
        urls = self.host.owners()
        if not any(_same(u, self.own_url) for u in urls):
            urls[self.own_url] = self.host.owned_partitions()
        return urls

    def owner_of(self, partition: int) -> str | None:
        for url, parts in self.worker_urls().items():
            if partition in parts:
                return url
        return None

    async def fetch(self, url: str, path_qs: str, auth: str | None) -> tuple[int, Any]:
        app: Any = self.host.app
        session: aiohttp.ClientSession = app.http_client
        headers = {FORWARDED: self.own_url}
        if auth:
            headers["Authorization"] = auth
        async with session.get(URL(url).join(URL(path_qs, encoded=True)), headers=headers,
                               timeout=aiohttp.ClientTimeout(total=PEER_TIMEOUT_S)) as resp:
            return resp.status, await resp.json(content_type=None)

    # -- reads ---------------------------------------------------------------
    def local_status(self, key: str, partition: int) -> dict[str, Any]:
        value = self.host.read_row(key.encode(), partition)
        try:
            slot = waits.read_slot(value)
        except ValueError as exc:
            raise ApiError(500, f"the stored row of {key!r} cannot be read: {exc}") from exc
        if slot is None or slot.wait is None:
            replies, commands = ((0, 0) if slot is None
                                 else (len(slot.early_replies), len(slot.early_commands)))
            raise ApiError(404, f"no wait with key {key!r}", key=key, earlyReplies=replies,
                           earlyCommands=commands)
        return waits.status(key, slot, partition, self.host.definitions) | {
            "worker": self.own_url}

    async def status(self, key: str, forwarded: bool, path_qs: str,
                     auth: str | None) -> tuple[int, Any]:
        check_key(key)
        partition = partition_for(key.encode(), self.host.settings.partitions)
        if partition in self.host.owned_partitions():
            return 200, self.local_status(key, partition)
        owner = self.owner_of(partition)
        if forwarded or owner is None or _same(owner, self.own_url):
            raise ApiError(503, f"partition {partition} of key {key!r} has no owner right now "
                           "(a rebalance is under way); retry shortly", partition=partition)
        try:
            return await self.fetch(owner, path_qs, auth)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise ApiError(503, f"the worker owning partition {partition} ({owner}) did not "
                           f"answer: {exc or type(exc).__name__}", partition=partition) from exc

    async def local_list(self, filters: waits.Filters, limit: int,
                         after: waits.SortKey | None) -> list[dict[str, Any]]:
        h = self.host
        found: list[dict[str, Any]] = []
        owned = h.owned_partitions()
        armed = h.index.armed_in_order(owned, waits.index_start(filters, after))
        first = None if armed is None else await waits.first_waits_by_due(
            armed, h.read_row, filters, limit, after)
        if first is None:
            first = await waits.first_waits(h.owned_rows(), filters, limit, after)
        for key, partition, sort in first:
            try:
                slot = waits.read_slot(h.read_row(key, partition))
            except ValueError:
                continue
            if slot is not None and slot.wait is not None:
                found.append(waits.summary(slot.wait, partition, h.definitions, sort))
        return found

    async def cluster_list(self, filters: waits.Filters, limit: int, local: bool,
                           query: dict[str, str], after: waits.SortKey | None,
                           auth: str | None) -> dict[str, Any]:
        mine = await self.local_list(filters, limit, after)
        answered, missing = [self.own_url], []
        merged = list(mine)
        if not local:
            peers = [u for u in self.worker_urls() if not _same(u, self.own_url)]
            path = str(URL("/xwait/api/waits").with_query({**query, "local": "1"}))
            results = await asyncio.gather(*(self.fetch(u, path, auth) for u in peers),
                                           return_exceptions=True)
            for url, result in zip(peers, results, strict=True):
                if isinstance(result, BaseException) or result[0] != 200:
                    log.warning("list: worker did not answer url=%s error=%s", url, result)
                    missing.append(url)
                    continue
                answered.append(url)
                merged.extend(result[1].get("waits", []))
        merged.sort(key=waits.sort_key)
        page = merged[:limit]
        return {"waits": page, "count": len(page), "workers": answered,
                "unavailable": missing, "complete": not missing,
                # More may follow only when the page is full.
                "next": page[-1]["cursor"] if len(page) == limit else None}

    # -- commands --------------------------------------------------------------
    def _send(self, key: str, action: str, body: dict[str, Any]) -> dict[str, Any]:
        """Produce the command through the SDK (blocking: runs in a thread)."""
        operator = _required(_opt_str(body, "operator"), "operator")
        reason = _opt_str(body, "reason")
        record: dict[str, Any] = {"correlationKey": key, "command": action.upper(),
                                  "operator": operator, "reason": reason}
        with self._client_lock:
            if self._client is None:
                # The console already knows the key (it just read it): no key check,
                # which would be a blocking HTTP call back into this worker.
                self._client = XwaitClient(self.host.settings, check_keys=False)
            c = self._client
            if action == "suspend":
                c.suspend(key, _required(reason, "reason"), operator=operator)
            elif action == "resume":
                c.resume(key, reason=reason, operator=operator)
            elif action == "cancel":
                c.cancel(key, _required(reason, "reason"), operator=operator)
            elif action == "deliver":
                if body.get("responseData") is None:
                    raise ApiError(400, "deliver needs 'responseData' (JSON)")
                c.deliver(key, body["responseData"], reason=reason, operator=operator)
                record["responseData"] = body["responseData"]
            elif action == "reschedule":
                deadline, move_by = _opt_str(body, "deadline"), _opt_str(body, "moveBy")
                c.reschedule(key, deadline=deadline, move_by=move_by, reason=reason,
                             operator=operator)
                record.update(deadline=deadline, moveBy=move_by)
            elif action == "migrate":
                version = _opt_str(body, "version")
                c.migrate(key, version=version, reason=reason, operator=operator)
                record.update(version=version)
            else:
                outcome = body.get("outcome")
                if outcome not in REVIEW_OUTCOMES:
                    raise ApiError(400, "review needs 'outcome': 'Accept' or "
                                        "'Submit Correction'")
                note = _required(_opt_str(body, "note"), "note")
                c.review(key, outcome, note, corrected_data=body.get("responseData"),
                         operator=operator, reason=reason)
                record.update(command="REVIEW", reviewOutcome=outcome, reviewNote=note,
                              responseData=body.get("responseData"))
        return record

    async def command(self, key: str, action: str, auth: str | None,
                      request: Any) -> tuple[int, Any]:
        """Check the action, the key and the token, and only then read the body."""
        if action not in ACTIONS:
            raise ApiError(404, f"unknown command {action!r}; expected one of "
                                f"{', '.join(ACTIONS)}")
        check_key(key)
        self.authorize(auth, Access.COMMAND)
        body = await read_json_body(request, "a command body")
        loop = asyncio.get_running_loop()
        try:
            record = await loop.run_in_executor(None, self._send, key, action, body)
        except InvalidRequest as exc:
            raise ApiError(400, str(exc)) from exc
        except (KafkaUnavailable, TopicMissing) as exc:
            self.producer_failures += 1
            raise ApiError(503, str(exc)) from exc
        except (DeliveryFailed, ClientError) as exc:
            self.producer_failures += 1
            raise ApiError(502, str(exc)) from exc
        topic = self.host.settings.topic("commands")
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


def _time(query: Any, name: str) -> int | None:
    """Epoch milliseconds, or an ISO 8601 date and time (UTC unless it says otherwise)."""
    raw = query.get(name)
    if raw is None or raw == "":
        return None
    if raw.lstrip("-").isdigit():
        return int(raw)
    try:
        when = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise ApiError(400, f"{name} must be epoch milliseconds or an ISO 8601 date and time "
                            f"(2026-11-30T16:00:00Z), got {raw!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.now().astimezone().tzinfo).astimezone()
    return int(when.timestamp() * 1000)


def _filters(query: Any) -> waits.Filters:
    state = query.get("state") or None
    if state is not None and state not in (*waits.STATES, waits.ALL):
        raise ApiError(400, f"state must be one of {', '.join((*waits.STATES, waits.ALL))}, "
                            f"got {state!r}")
    outcome = query.get("outcome") or None
    if outcome is not None and outcome not in waits.OUTCOMES:
        raise ApiError(400, f"outcome must be one of {', '.join(waits.OUTCOMES)}, "
                            f"got {outcome!r}")
    reason = query.get("reason") or None
    if reason is not None and reason not in waits.REASONS:
        raise ApiError(400, f"reason must be one of {', '.join(waits.REASONS)}, got {reason!r}")
    ended_from, ended_to = _time(query, "endedFrom"), _time(query, "endedTo")
    ended = [name for name, value in (("an outcome", outcome), ("a reason", reason),
                                      ("an end time", ended_from), ("an end time", ended_to))
             if value is not None]
    if ended and state not in (None, "done", waits.ALL):
        raise ApiError(400, f"{ended[0]} is only found on finished waits, not on state {state!r}")
    due_from, due_to = _time(query, "dueFrom"), _time(query, "dueTo")
    if (due_from is not None or due_to is not None) and (ended or state == "done"):
        raise ApiError(400, "a next due time is only found on waits not done")
    key = query.get("key") or None
    if key is not None:
        check_key(key)
    return waits.Filters(state=state, definition=query.get("definition") or None,
                         tenant=query.get("tenant") or None, key_prefix=key, outcome=outcome,
                         parked_from=_time(query, "parkedFrom"),
                         parked_to=_time(query, "parkedTo"), reason=reason,
                         ended_from=ended_from, ended_to=ended_to,
                         version=query.get("version") or None, due_from=due_from,
                         due_to=due_to)


def _after(query: Any) -> waits.SortKey | None:
    raw = query.get("after")
    if not raw:
        return None
    try:
        return waits.parse_cursor(raw)
    except ValueError as exc:
        raise ApiError(400, str(exc)) from None


def answer(view: View, status: int, body: Any) -> Response:
    """A JSON answer; a 401 names the scheme the token goes with (Bearer)."""
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return view.json(body, status=status, headers=headers)


def denied(view: View, console: Console, request: Any, access: Access) -> Response | None:
    """The answer to a request without the token `access` needs (401, or 503 when none is
    configured); None when it has it."""
    try:
        console.authorize(request.headers.get("Authorization"), access)
    except ApiError as exc:
        return answer(view, exc.status, exc.body)
    return None


async def read_json_body(request: Any, what: str = "a body") -> dict[str, Any]:
    """The request's JSON object (an empty body reads as {}), or 413 / 400."""
    if (request.content_length or 0) > MAX_BODY_BYTES:
        raise ApiError(413, f"{what} is at most {MAX_BODY_BYTES} bytes")
    raw = await request.text()
    try:
        body = json.loads(raw) if raw.strip() else {}
    except ValueError as exc:
        raise ApiError(400, f"the body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object")
    return body


def register(host: ConsoleHost, console: Console) -> None:
    app = host.app

    @app.page("/xwait/api/waits")
    class WaitList(View):
        """Waits not done (or of the given `state`: `parked`, `in_review`, `suspended`,
        `done`, `all`; an `outcome` implies done), filtered by key prefix (`key`),
        `definition`, its `version`, `tenant`, park time (`parkedFrom`, `parkedTo`:
        epoch ms or ISO 8601, both included) and next due time (`dueFrom`, `dueTo`:
        waits not done with a timer armed), ordered by next due time, `limit` at a
        time, merged from every
        worker. Each carries its `cursor`; `next` is the cursor to pass as `after`
        for the next page (null on the last); `unavailable` names workers that did
        not answer."""
        async def get(self, request: Request, **kwargs: Any) -> Response:
            req: Any = request
            try:
                auth = req.headers.get("Authorization")
                console.authorize(auth, Access.READ)
                query = {k: v for k, v in req.query.items() if k in LIST_PARAMS}
                body = await console.cluster_list(
                    _filters(req.query), _limit(req.query.get("limit")),
                    req.query.get("local") == "1", query, _after(req.query), auth)
            except ApiError as exc:
                return answer(self, exc.status, exc.body)
            return answer(self, 200, body)

    @app.page("/xwait/api/waits/{key}")
    class WaitStatus(View):
        """One wait's status, finished waits included (outcome, response, operator,
        trace, `purgeAt`). 404 for an unknown key (the body counts replies and
        commands held for it before its request: `earlyReplies`, `earlyCommands`),
        503 while its partition has no owner (a rebalance). A key another worker
        owns is forwarded to it, with the caller's token."""
        async def get(self, request: Request, **kwargs: Any) -> Response:
            req: Any = request
            try:
                auth = req.headers.get("Authorization")
                console.authorize(auth, Access.READ)
                status, body = await console.status(
                    str(kwargs.get("key", "")), FORWARDED in req.headers, str(req.rel_url),
                    auth)
            except ApiError as exc:
                return answer(self, exc.status, exc.body)
            return answer(self, status, body)

    @app.page("/xwait/api/waits/{key}/{action}")
    class WaitCommand(View):
        """An operator's command (POST): `suspend`, `resume`, `cancel`, `deliver`,
        `review`, `reschedule` or `migrate`, with a JSON body of `operator`
        (required), `reason`, `responseData`, `outcome`, `note`, `deadline`,
        `moveBy`, `version`. 202 once the Command record is produced, 400 for a bad
        body, 401 without the command token, 503 when no command token is
        configured. The token is checked before the body is read."""
        async def get(self, request: Request, **kwargs: Any) -> Response:
            # A key's '/' arrives as %2F and is matched as part of {key} (the router
            # matches the raw path): a GET here is of a command's path.
            return answer(self, 405, {"error": "commands are POST requests"})

        async def post(self, request: Request, **kwargs: Any) -> Response:
            req: Any = request
            try:
                status, body = await console.command(
                    str(kwargs.get("key", "")), str(kwargs.get("action", "")),
                    req.headers.get("Authorization"), req)
            except ApiError as exc:
                return answer(self, exc.status, exc.body)
            return answer(self, status, body)

    @app.page("/xwait/api/review")
    class ReviewQueue(View):
        """The waits in review (`inReview`), merged from every worker, and the newest
        records of the rejected topic (`rejected`)."""
        async def get(self, request: Request, **kwargs: Any) -> Response:
            req: Any = request
            try:
                auth = req.headers.get("Authorization")
                console.authorize(auth, Access.READ)
                limit = _limit(req.query.get("limit"))
                in_review = await console.cluster_list(
                    waits.Filters(state="in_review"), limit, False, {"state": "in_review"},
                    None, auth)
            except ApiError as exc:
                return answer(self, exc.status, exc.body)
            body: dict[str, Any] = {"inReview": in_review["waits"],
                                    "unavailable": in_review["unavailable"]}
            loop = asyncio.get_running_loop()
            try:
                body["rejected"] = await loop.run_in_executor(
                    None, review.latest_rejected, host.settings, limit)
            except review.ReviewReadFailed as exc:
                body["rejected"], body["rejectedError"] = [], str(exc)
            return answer(self, 200, body)
