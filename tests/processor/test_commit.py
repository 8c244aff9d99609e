"""exactly_once's transactional ids with a fake producer: a takeover cut short fences no one.

A revocation cancels a takeover that may be inside `init_transactions` for
its partitions; the call goes on in its thread.  Had the revocation returned
at once, that init took the id after the partition's next owner had, and the
next owner's first commit failed _FENCED (two workers starting together
both stopped so in a CI run).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from streams.processor.commit import ExactlyOnce
from streams.processor.model import Role


class FakeProducer:
    """Records each `init_transactions`; every one waits for the test's gate."""

    entered: list[str] = []
    inited: list[str] = []
    gate = threading.Event()

    def __init__(self, conf: dict[str, Any]) -> None:
        self.transactional_id = conf["transactional.id"]

    def init_transactions(self, timeout: float) -> None:
        FakeProducer.entered.append(self.transactional_id)
        assert FakeProducer.gate.wait(30), "the test never opened the gate"
        FakeProducer.inited.append(self.transactional_id)


async def until(condition: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.01)


def test_a_revocation_waits_for_the_ids_a_cancelled_takeover_was_taking() -> None:
    FakeProducer.entered, FakeProducer.inited = [], []
    FakeProducer.gate.clear()

    async def scenario() -> None:
        committer = ExactlyOnce({}, {role: role.value for role in Role}, "changelog", "app", 2,
                                make_producer=FakeProducer)
        takeover = asyncio.ensure_future(committer.assign([0, 1]))
        await until(lambda: len(FakeProducer.entered) == 2, "both inits started")
        takeover.cancel()  # a revocation cuts the takeover short
        revoking = asyncio.ensure_future(committer.revoke([0, 1]))
        await asyncio.sleep(0.1)
        assert not revoking.done(), "the revocation returned while the inits still ran"
        FakeProducer.gate.set()
        await asyncio.wait_for(revoking, 30)
        assert sorted(FakeProducer.inited) == ["app-0", "app-1"]
        # What they made is dropped; a later assignment takes the id afresh.
        await committer.assign([1])
        assert FakeProducer.inited[-1] == "app-1" and len(FakeProducer.inited) == 3
        await committer.close()

    asyncio.run(scenario())
