"""The console's bulk action: one command for every wait of a filtered list.

    POST /xwait/api/bulk                  a dry run (the count and a sample), or start one
    GET  /xwait/api/bulk/{operation}      how far an operation this worker runs has got

It runs the same code as `xwait cancel --where ...` (streams.client.bulk),
in a thread of this worker: the list and each wait's status are read
through this worker's own API code on its event loop (so a list is merged
from every worker, as the CLI would get it), the commands go out through the
SDK, and a rejection is read from the rejected topic.  Progress and the
summary live in this worker's memory: the page that started an operation
polls the worker it asked.  An operation stopped by a restart is run again
by posting it with its `operation` id, from the console or the CLI
(`--operation ID`): the waits' traces say what it did.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from faust.web import Request, Response, View

from streams.client import ClientError, InvalidRequest, XwaitClient
from streams.client._console import wait_path
from streams.client.bulk import (
    SAMPLE,
    BulkCommand,
    BulkKind,
    NotAnswered,
    Operation,
    RejectedCommands,
    Summary,
    new_operation_id,
)
from streams.client.pacing import DEFAULT_RATE
from streams.client.where import Where
from streams.console.api import (
    LIST_PARAMS,
    Access,
    ApiError,
    Console,
    _after,
    _filters,
    _limit,
    _opt_str,
    answer,
    denied,
    read_json_body,
)
from streams.console.host import ConsoleHost

log = logging.getLogger(__name__)

KEPT_OPERATIONS = 20
"""Operations whose progress a worker remembers: the page polls the last one it started;
an older summary is in each wait's trace."""

CALL_TIMEOUT_S = 60.0
"""How long the operation's thread waits for one read on the event loop (a list page
merged from every worker takes seconds on a large table)."""


class LoopWaits:
    """:class:`streams.client.bulk.Waits` read through this worker's API code, run on its
    event loop from the operation's thread, with the caller's Authorization header."""

    def __init__(self, console: Console, loop: asyncio.AbstractEventLoop,
                 auth: str | None) -> None:
        self.console, self.loop, self.auth = console, loop, auth

    def _call(self, coro: Any) -> Any:
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(CALL_TIMEOUT_S)
        except TimeoutError as exc:
            future.cancel()
            raise NotAnswered(f"no answer within {CALL_TIMEOUT_S:g} s") from exc

    def page(self, query: Mapping[str, str]) -> Mapping[str, Any]:
        params = {k: v for k, v in query.items() if k in LIST_PARAMS}
        try:
            body: Mapping[str, Any] = self._call(self.console.cluster_list(
                _filters(params), _limit(params.get("limit")), False, params,
                _after(params), self.auth))
        except ApiError as exc:
            if exc.status == 400:
                raise InvalidRequest(str(exc)) from exc
            raise NotAnswered(str(exc)) from exc
        return body

    def status(self, key: str) -> Mapping[str, Any] | None:
        try:
            status, body = self._call(self.console.status(key, False, wait_path(key),
                                                          self.auth))
        except ApiError as exc:
            status, body = exc.status, exc.body
        if status == 404:
            return None
        if status != 200 or not isinstance(body, dict):
            raise NotAnswered(f"the status of {key}: HTTP {status}: {body.get('error')}"
                              if isinstance(body, dict) else f"the status of {key}: {status}")
        return body


@dataclass
class Job:
    """One operation this worker runs: what the page polls."""

    operation: Operation
    total: int
    done: int = 0
    summary: Summary | None = None
    finished: bool = False
    error: str | None = None

    def view(self) -> dict[str, Any]:
        op = self.operation
        return {"operation": op.id, "command": op.command.kind.value, "where": op.where.text,
                "total": self.total, "done": self.done, "finished": self.finished,
                "error": self.error,
                "summary": None if self.summary is None else self.summary.as_json()}


class BulkRunner:
    """Starts operations in threads of their own and remembers the last few."""

    def __init__(self, host: ConsoleHost, console: Console) -> None:
        self.host, self.console = host, console
        self.jobs: OrderedDict[str, Job] = OrderedDict()
        self.lock = threading.Lock()

    def operation(self, body: dict[str, Any], auth: str | None,
                  loop: asyncio.AbstractEventLoop) -> Operation:
        """The operation a request body describes; ApiError 400 for a bad one."""
        kind = _opt_str(body, "command")
        if kind not in tuple(BulkKind):
            raise ApiError(400, "'command' must be one of " + ", ".join(BulkKind))
        operator = _opt_str(body, "operator")
        if not operator:
            raise ApiError(400, "a bulk action needs 'operator'")
        rate = body.get("rate", DEFAULT_RATE)
        if isinstance(rate, bool) or not isinstance(rate, int | float):
            raise ApiError(400, "'rate' must be a number of waits a second")
        try:
            return Operation(
                LoopWaits(self.console, loop, auth), Where.parse(_opt_str(body, "where") or ""),
                BulkCommand(BulkKind(kind), reason=_opt_str(body, "reason"),
                            operator=operator, version=_opt_str(body, "version"),
                            deadline=_opt_str(body, "deadline"),
                            move_by=_opt_str(body, "moveBy")),
                _opt_str(body, "operation") or new_operation_id(kind), rate=float(rate))
        except InvalidRequest as exc:
            raise ApiError(400, str(exc)) from exc

    def start(self, op: Operation) -> Job:
        """Select now (so the answer carries the count), then command in a thread."""
        keys = list(op.select())
        job = Job(op, len(keys))
        with self.lock:
            if op.id in self.jobs and not self.jobs[op.id].finished:
                raise ApiError(409, f"operation {op.id} is already running on this worker")
            self.jobs[op.id] = job
            while len(self.jobs) > KEPT_OPERATIONS:
                self.jobs.popitem(last=False)
        threading.Thread(target=self._run, args=(job, keys), name=f"xwait-bulk-{op.id}",
                         daemon=True).start()
        return job

    def _run(self, job: Job, keys: list[str]) -> None:
        def progress(done: int, total: int, summary: Summary) -> None:
            job.done, job.summary = done, summary

        settings = self.host.settings
        rejections = RejectedCommands(settings)
        try:
            with XwaitClient(settings, check_keys=False) as client:
                job.summary = job.operation.run(keys, client, rejections, on_progress=progress)
        except (ClientError, OSError) as exc:
            job.error = str(exc)
            log.warning("bulk operation failed operation=%s error=%s", job.operation.id, exc)
        finally:
            rejections.close()
            job.finished = True
        summary = job.summary
        if summary is not None:
            log.info("bulk operation operation=%s command=%s selected=%d applied=%d "
                     "skipped=%d refused=%d unconfirmed=%d", job.operation.id,
                     summary.command, summary.selected, summary.applied,
                     sum(summary.skipped.values()), len(summary.refused),
                     len(summary.unconfirmed))


def register(host: ConsoleHost, console: Console) -> None:
    app = host.app
    runner = BulkRunner(host, console)

    @app.page("/xwait/api/bulk")
    class Bulk(View):
        """A bulk action (POST): `command` (`cancel`, `suspend`, `resume`, `migrate`,
        `reschedule`) for every wait `where` selects (the filter of `xwait cancel
        --where`), with `operator` (required), `reason`, `version`, `deadline`,
        `moveBy`, `rate` (waits a second, default 50). With `dryRun: true`: 200 with the
        `count` the filter selects and a `sample` of the waits. Else 202 with the
        `operation` id (give `operation` to run an interrupted one again) and its
        `total`: the waits are commanded from this worker, and `GET
        /xwait/api/bulk/{operation}` follows it. 400 for a bad filter or body, 401
        without the command token, 409 while that operation runs here already, 503
        when no command token is configured or a worker did not answer the list."""
        async def post(self, request: Request, **kwargs: Any) -> Response:
            req: Any = request
            loop = asyncio.get_running_loop()
            try:
                console.authorize(req.headers.get("Authorization"), Access.COMMAND)
                body = await read_json_body(req)
                op = runner.operation(body, req.headers.get("Authorization"), loop)
                if body.get("dryRun") is True:
                    count, sample = await loop.run_in_executor(None, op.preview, SAMPLE)
                    return answer(self, 200, {"dryRun": True, "command": body["command"],
                                              "where": op.where.text,
                                              "filter": op.where.describe(), "count": count,
                                              "sample": sample})
                job = await loop.run_in_executor(None, runner.start, op)
            except NotAnswered as exc:
                return answer(self, 503, {"error": str(exc)})
            except InvalidRequest as exc:
                return answer(self, 400, {"error": str(exc)})
            except ApiError as exc:
                return answer(self, exc.status, exc.body)
            log.info("console bulk operation=%s command=%s where=%s operator=%s total=%d",
                     op.id, op.command.kind.value, op.where.text, op.command.operator,
                     job.total)
            return answer(self, 202, job.view())

    @app.page("/xwait/api/bulk/{operation}")
    class BulkProgress(View):
        """How far a bulk action this worker runs has got: `total`, `done`, `finished`,
        and the `summary` so far (`applied`, `skipped` with `skippedBy`, `refused` with
        each `refusals`' reason, `unconfirmed`). 404 for an operation this worker does
        not run (another worker's, or one before its restart: the waits' traces name
        it)."""
        async def get(self, request: Request, **kwargs: Any) -> Response:
            if (refused := denied(self, console, request, Access.READ)) is not None:
                return refused
            job = runner.jobs.get(str(kwargs.get("operation", "")))
            if job is None:
                return answer(self, 404, {"error": "no operation with that id runs on this "
                                                   "worker"})
            return answer(self, 200, job.view())


__all__ = ["BulkRunner", "LoopWaits", "register"]
