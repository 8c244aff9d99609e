"""A tiny driver for decide(): holds the slot and a clock the test moves by hand."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from streams import core
from streams.core import decide
from streams.definitions import load_definitions

REPO = Path(__file__).resolve().parents[2]
DEFINITIONS = load_definitions(REPO / "topology" / "waits")

SECOND = 1000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR
T0 = 1_700_000_000_000
KEY = "k-7f3a9c2e4b1d4e8f9a0b1c2d3e4f5a6b"

APPROVED = '{"decision": "approved", "by": "sam"}'


class Run:
    def __init__(self, definitions: Mapping[str, core.WaitDefinition] = DEFINITIONS) -> None:
        self.definitions = definitions
        self.slot: core.Slot | None = None
        self.now = T0
        self.history: list[tuple[core.Effect, ...]] = []

    @property
    def wait(self) -> core.Wait:
        assert self.slot is not None and self.slot.wait is not None
        return self.slot.wait

    def send(self, event: core.Event) -> tuple[core.Effect, ...]:
        decision = decide(self.slot, event, self.now, self.definitions)
        self.slot = decision.slot
        self.history.append(decision.effects)
        return decision.effects

    def advance(self, ms: int) -> Run:
        self.now += ms
        return self

    def start(self, definition: str = "expense-approval", **kw: object) -> tuple[core.Effect, ...]:
        return self.send(self.start_event(definition, **kw))

    def start_event(self, definition: str = "expense-approval", **kw: object) -> core.StartWait:
        fields: dict[str, object] = {"correlation_key": KEY, "definition": definition,
                                     "requested_at": self.now, "tenant": "acme"}
        fields.update(kw)
        return core.StartWait(**fields)  # type: ignore[arg-type]

    def reply(self, data: str = APPROVED, **kw: object) -> tuple[core.Effect, ...]:
        fields: dict[str, object] = {"correlation_key": KEY, "response_data": data,
                                     "tenant": "acme", "channel": "portal"}
        fields.update(kw)
        return self.send(core.Reply(**fields))  # type: ignore[arg-type]

    def result(self, action: core.EmitAction | str,
               status: core.ResultStatus = core.ResultStatus.DELIVERED, *,
               error: str | None = None, permanent: bool = False,
               key: str | None = None) -> tuple[core.Effect, ...]:
        """A channel adapter reports what became of `action` (rule 12)."""
        if isinstance(action, core.EmitAction):
            action_id, correlation_key = action.action_id, action.correlation_key
        else:
            action_id, correlation_key = action, KEY
        return self.send(core.ActionResult(key or correlation_key, action_id, status, error=error,
                                           permanent=permanent))

    def failed(self, action: core.EmitAction | str, error: str = "503 Service Unavailable", *,
               permanent: bool = False) -> tuple[core.Effect, ...]:
        return self.result(action, core.ResultStatus.FAILED, error=error, permanent=permanent)

    def command(self, kind: core.CommandKind, **kw: object) -> tuple[core.Effect, ...]:
        return self.send(core.Command(correlation_key=KEY, command=kind, operator="olga",
                                      **kw))  # type: ignore[arg-type]

    def due(self, kind: core.TimerKind) -> int:
        assert self.slot is not None
        matches = [t for t in self.slot.armed_timers() if t.kind is kind]
        assert len(matches) == 1, f"expected one armed {kind}, got {matches}"
        return matches[0].due_at

    def fire(self, kind: core.TimerKind) -> tuple[core.Effect, ...]:
        """Move the clock to the armed timer of ``kind`` and fire it, as the punctuator would."""
        assert self.slot is not None
        (timer,) = [t for t in self.slot.armed_timers() if t.kind is kind]
        self.now = max(self.now, timer.due_at)
        return self.send(core.TimerFired(KEY, timer.kind, timer.due_at, timer.generation))

