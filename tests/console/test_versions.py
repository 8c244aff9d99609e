"""`GET /xwait/api/versions` as one worker answers it (`local_versions`): which versions it
lists and which it parks new waits on, from its definitions and its census."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, cast

from streams.console.host import ConsoleHost
from streams.console.versions import local_versions
from streams.core import DefinitionSet, WaitDefinition
from tests.core.core_harness import DEFINITIONS

FILE = DEFINITIONS["expense-approval"]
OLDER = dataclasses.replace(FILE, version="0123456789ab")
REMOVED = dataclasses.replace(DEFINITIONS["vendor-quote"], version="feedfacecafe")


class FakeCensus:
    def __init__(self, counts: Mapping[tuple[str, tuple[str, str | None]], int]) -> None:
        self.counts = Counter(counts)

    def by_version(self, partitions: Iterable[int]
                   ) -> Counter[tuple[str, tuple[str, str | None]]]:
        return self.counts


@dataclasses.dataclass
class FakeHost:
    definitions: Mapping[str, WaitDefinition]
    census: FakeCensus

    def owned_partitions(self) -> set[int]:
        return {0}


def _rows(definitions: Mapping[str, WaitDefinition],
          census: Mapping[tuple[str, tuple[str, str | None]], int] | None = None
          ) -> dict[tuple[str, str | None], dict[str, Any]]:
    host = cast(ConsoleHost, FakeHost(definitions, FakeCensus(census or {})))
    answer = local_versions(host, "http://w1")
    return {(r["definition"], r["version"]): r for r in answer["versions"]}


def test_after_a_restart_the_files_version_read_back_from_the_store_is_the_newest() -> None:
    """A restarted worker keeps the store's copy of its file's version (another object of
    the same version): it is still the one new waits park on."""
    from_store = dataclasses.replace(FILE, source="xwait.definitions:expense-approval")
    restarted = DefinitionSet({**DEFINITIONS}, [from_store, OLDER])
    rows = _rows(restarted)
    assert rows[("expense-approval", FILE.version)]["newest"] is True
    assert rows[("expense-approval", OLDER.version)]["newest"] is False
    assert [d.version for d in restarted.kept() if d.name == "expense-approval"] == [
        FILE.version, OLDER.version]  # the newest first


def test_a_removed_version_whose_waits_all_ended_is_not_listed() -> None:
    definitions = DefinitionSet({**DEFINITIONS}, [REMOVED])
    definitions.forget(REMOVED.name, REMOVED.version)
    rows = _rows(definitions, {("done", (REMOVED.name, REMOVED.version)): 4,
                               ("done", ("no-longer-loaded", None)): 2})
    assert (REMOVED.name, REMOVED.version) not in rows
    assert ("no-longer-loaded", None) not in rows


def test_a_version_waits_not_yet_done_follow_is_listed_with_its_finished_waits() -> None:
    rows = _rows(DefinitionSet({**DEFINITIONS}),
                 {("done", (REMOVED.name, REMOVED.version)): 4,
                  ("parked", (REMOVED.name, REMOVED.version)): 1,
                  ("done", (FILE.name, FILE.version)): 3})
    assert rows[(REMOVED.name, REMOVED.version)]["waits"] == {"parked": 1, "done": 4}
    assert rows[(FILE.name, FILE.version)]["waits"] == {"done": 3}  # kept: listed


def test_forgetting_never_drops_the_newest_of_a_name() -> None:
    definitions = DefinitionSet({**DEFINITIONS}, [OLDER])
    definitions.forget(FILE.name, FILE.version)
    definitions.forget(OLDER.name, OLDER.version)
    assert definitions.version(FILE.name, FILE.version) is not None
    assert definitions.version(OLDER.name, OLDER.version) is None
