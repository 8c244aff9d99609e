"""One small cluster for the console tests: two real workers sharing 4 partitions.

Package-scoped: every module of tests/console uses the same topics and the
same two `xwait worker` processes (started with a command token and a
read-only token), because starting workers costs seconds; each test uses
keys and tenants of its own.  The workers run the fast test definitions of
tests/e2e/waits and the six shipped ones (streams/topology/waits), whose
diagrams the console must draw legibly.  `http` sends the command token unless told
otherwise: reads need a token on these workers too.
"""

from __future__ import annotations

import json
import shutil
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from streams import topics
from streams.config import Settings
from streams.partitioning import partition_for
from tests.conftest import NO_CONSOLE
from tests.e2e.harness import REPO, Client, WorkerProcess, e2e_settings
from tests.prefixes import unique_prefix

SHIPPED = REPO / "streams" / "topology" / "waits"  # the definitions a user starts with
TOKEN = "test-console-token"  # noqa: S105 - the test workers' own token
READ_TOKEN = "test-read-token"  # noqa: S105 - reads only


class ConsoleWorker(WorkerProcess):
    """A worker started with XWAIT_CONSOLE_TOKEN set."""

    def __init__(self, settings: Settings, folder: Path, name: str = "w1") -> None:
        super().__init__(settings, folder, name, env={"XWAIT_CONSOLE_TOKEN": TOKEN,
                                                      "XWAIT_CONSOLE_READ_TOKEN": READ_TOKEN})

    def start(self, wait_owned: bool = True, timeout: float = 90) -> ConsoleWorker:
        super().start(wait_owned, timeout)
        return self


def http(method: str, url: str, body: Any = None, token: str | None = TOKEN,
         timeout: float = 30) -> tuple[int, Any]:
    """(status, JSON or text body); with the command token unless `token` says otherwise."""
    status, _, answer = http_full(method, url, body, token, timeout)
    return status, answer


def http_full(method: str, url: str, body: Any = None, token: str | None = TOKEN,
              timeout: float = 30, raw: bytes | None = None) -> tuple[int, Any, Any]:
    """(status, headers, JSON or text body) of one request."""
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"} if data is not None else {}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=data, method=method,  # noqa: S310 - http only
                                 headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - loopback
            got = resp.read()
            ctype = resp.headers.get("Content-Type", "")
            return resp.status, resp.headers, json.loads(got) if "json" in ctype else got.decode()
    except urllib.error.HTTPError as exc:
        got = exc.read()
        try:
            answer = json.loads(got or b"null")
        except ValueError:
            answer = got.decode(errors="replace")
        return exc.code, exc.headers, answer


def eventually(fetch: Any, check: Any, timeout: float = 60, what: str = "") -> Any:
    """Call fetch() until check(result) holds; no timing assertions, generous timeouts."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = fetch()
        if check(last):
            return last
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")


@dataclass
class Cluster:
    settings: Settings
    w1: ConsoleWorker
    w2: ConsoleWorker
    client: Client

    @property
    def workers(self) -> list[ConsoleWorker]:
        return [self.w1, self.w2]

    def owner(self, key: str) -> ConsoleWorker:
        p = partition_for(key.encode(), self.settings.partitions)
        for w in self.workers:
            stats = w.stats()
            if stats is not None and p in stats["ownedPartitions"]:
                return w
        raise AssertionError(f"no worker owns partition {p}")

    def status(self, key: str, via: ConsoleWorker | None = None) -> tuple[int, Any]:
        return http("GET", f"{(via or self.w1).url}/xwait/api/waits/{key}")

    def wait_state(self, key: str, state: str, timeout: float = 60) -> dict[str, Any]:
        _, body = eventually(lambda: self.status(key),
                             lambda r: r[0] == 200 and r[1]["state"] == state, timeout,
                             f"{key} in state {state}")
        result: dict[str, Any] = body
        return result

    def start(self, key: str, definition: str = "slow-approval", **fields: Any) -> None:
        self.client.start(key, definition, **fields)
        self.client.flush()


@pytest.fixture(scope="package")
def cluster(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    folder: Path = tmp_path_factory.mktemp("console")
    prefix = unique_prefix("c")
    base = Settings(bootstrap=kafka_bootstrap, topic_prefix=prefix, app_id=f"{prefix}-processor",
                    partitions=4, console_url=NO_CONSOLE)
    s = e2e_settings(base, folder)
    for shipped in SHIPPED.glob("*.yaml"):
        shutil.copy(shipped, Path(s.topology) / "waits" / shipped.name)
    topics.create(s, topics.load_specs(s))
    w1 = ConsoleWorker(s, folder, "w1")
    w2 = ConsoleWorker(s, folder, "w2")
    try:
        w1.start()
        w2.start(wait_owned=False)
        # Settled: the two workers own disjoint halves and each knows the other.
        for w in (w1, w2):
            w.wait_until(lambda st: len(st["ownedPartitions"]) == 2, 120,
                         "did not settle on 2 of 4 partitions")
        eventually(lambda: http("GET", f"{w1.url}/xwait/api/waits?local=0"),
                   lambda r: r[0] == 200 and len(r[1]["workers"]) == 2, 60,
                   "both workers in the assignment")
        yield Cluster(s, w1, w2, Client(s))
    finally:
        w1.stop()
        w2.stop()


def new_key() -> str:
    return uuid.uuid4().hex


def processor_carries_issue_12_fields() -> bool:
    """Whether the processor's record mapping passes RESCHEDULE's deadline/moveBy to the core
    and the outcome's operator/operatorReason to the Outcome record.

    The mapping (streams/processor/records.py) belongs to the processor; issue 12 asked
    for those few lines (see the issue's report).  Until they are in, the end-to-end tests
    of those two capabilities are reported as expected failures without running (each
    would only wait out its timeout); the day the lines land, the marker below stops
    applying and the tests run and must pass.
    """
    from streams.core import Command, EmitOutcome, OutcomeKind, OutcomeReason
    from streams.processor.model import Role
    from streams.processor.records import outcome_record, to_event

    event = to_event(Role.COMMANDS, {"correlationKey": "k", "command": "RESCHEDULE",
                                     "moveBy": "PT1M"})
    outcome = outcome_record(EmitOutcome(
        "o", "k", "d", None, OutcomeKind.CANCELLED, OutcomeReason.CANCELLED_BY_OPERATOR, None,
        False, None, None, None, 0, 0, 0, 0, (), operator="op", operator_reason="why"))
    return (isinstance(event, Command) and event.move_by == "PT1M"
            and outcome.get("operatorReason") == "why")


needs_processor_mapping = pytest.mark.xfail(
    not processor_carries_issue_12_fields(), run=False,
    reason="streams/processor/records.py does not pass Command.deadline/moveBy and "
           "Outcome.operator/operatorReason yet (asked of the processor's owner in issue 12)")
