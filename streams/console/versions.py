"""The versions of the wait definitions, and how many waits follow each (rule 13, docs/rules.md).

    GET /xwait/api/versions[?local=1]

Each worker answers for the partitions it owns (its census counts waits by
definition and version) and for its own files (the newest it parks new waits
on); without `local=1` the answer merges every worker's, so the counts are
the deployment's.  `xwait definitions` prints it and `xwait definitions
remove` refuses to remove a definition that waits not yet done still follow.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import Any

from faust.web import Request, Response, View
from yarl import URL

from streams.console.api import Access, ApiError, Console, _same
from streams.console.host import ConsoleHost
from streams.core import DefinitionSet, WaitStatus

log = logging.getLogger(__name__)

NOT_DONE = tuple(s.value for s in WaitStatus if s is not WaitStatus.DONE)
DONE = WaitStatus.DONE.value


def local_versions(host: ConsoleHost, url: str) -> dict[str, Any]:
    """This worker's files, the versions it keeps, and its census by version.

    A version is listed while this worker keeps it (its files, or the store)
    or while waits not yet done follow it.  Finished waits, kept until their
    retention, are counted on a listed version but do not list one: a
    definition removed with `xwait definitions remove` leaves the list once
    its last wait has ended.  "newest" compares versions (a hash of the
    content), not objects: after a restart the newest of the files and the
    same version read back from the store are two objects of one version.
    """
    defs = host.definitions
    kept = defs.kept() if isinstance(defs, DefinitionSet) else list(defs.values())
    rows: dict[tuple[str, str | None], dict[str, Any]] = {}
    for d in kept:
        newest = defs.get(d.name)
        rows[(d.name, d.version)] = {
            "definition": d.name, "version": d.version,
            "newest": newest is not None and newest.version == d.version,
            "source": d.source, "waits": {}}
    census = host.census.by_version(host.owned_partitions())
    # Waits not yet done first: only they add a version this worker does not keep.
    for (state, (name, version)), n in sorted(census.items(),
                                              key=lambda item: item[0][0] == DONE):
        if state == DONE and (name, version) not in rows:
            continue
        row = rows.setdefault((name, version), {
            "definition": name, "version": version, "newest": False, "source": None,
            "waits": {}})
        row["waits"][state] = row["waits"].get(state, 0) + n
    return {"worker": url, "newest": {name: d.version for name, d in defs.items()},
            "versions": sorted(rows.values(),
                               key=lambda r: (r["definition"], not r["newest"],
                                              r["version"] or ""))}


def merge(answers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every worker's versions as one list: waits summed, the workers that park on each."""
    rows: dict[tuple[str, str | None], dict[str, Any]] = {}
    for answer in answers:
        for v in answer.get("versions", []):
            row = rows.setdefault((v["definition"], v["version"]), {
                "definition": v["definition"], "version": v["version"], "newestOn": [],
                "waits": Counter()})
            row["waits"].update(v.get("waits", {}))
            if v.get("newest"):
                row["newestOn"].append(answer["worker"])
    out = []
    for row in rows.values():
        waits = {s: row["waits"].get(s, 0) for s in (*NOT_DONE, DONE)}
        out.append({**row, "waits": waits, "following": sum(waits[s] for s in NOT_DONE)})
    return sorted(out, key=lambda r: (r["definition"], not r["newestOn"], r["version"] or ""))


def register(host: ConsoleHost, console: Console) -> None:
    app = host.app

    @app.page("/xwait/api/versions")
    class Definitions(View):
        """Every definition version this worker keeps (`newest`: it parks new waits on
        it) and the waits not yet done that follow each, by state, merged from every
        worker (`newestOn`: the workers parking on it; `local=1`: this worker's own)."""
        async def get(self, request: Request, **kwargs: Any) -> Response:
            try:
                console.authorize(request.headers.get("Authorization"), Access.READ)
                mine = local_versions(host, console.own_url)
                if request.query.get("local") == "1":
                    return self.json(mine)
                peers = [u for u in console.worker_urls() if not _same(u, console.own_url)]
                path = str(URL("/xwait/api/versions").with_query({"local": "1"}))
                results = await asyncio.gather(
                    *(console.fetch(u, path, request.headers.get("Authorization"))
                      for u in peers), return_exceptions=True)
                answers, missing = [mine], []
                for url, result in zip(peers, results, strict=True):
                    if isinstance(result, BaseException) or result[0] != 200:
                        log.warning("definitions: worker did not answer url=%s error=%s",
                                    url, result)
                        missing.append(url)
                        continue
                    answers.append(result[1])
                return self.json({
                    "versions": merge(answers),
                    "workers": [{"worker": a["worker"], "newest": a["newest"]}
                                for a in answers],
                    "unavailable": missing, "complete": not missing})
            except ApiError as exc:
                return self.json(exc.body, status=exc.status)
