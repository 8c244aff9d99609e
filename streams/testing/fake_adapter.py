"""The test kit's channel adapter (`streams.testing.kit`): it records every action of a
test's waits and reports the send results the test tells it to, so that a test
shows the on_send_failure path of a definition without a real channel."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from streams.client import Action, ActionKind

__all__ = ["DELIVERED", "FakeAdapter", "SendResult", "action_kind", "failed"]


@dataclass(frozen=True)
class SendResult:
    """What the fake adapter reports for a send: delivered, or failed with an error."""

    delivered: bool
    error: str | None = None
    permanent: bool = False
    """A failure sending again cannot help: the definition's on_send_failure path at once."""


DELIVERED = SendResult(True)


def failed(error: str, *, permanent: bool = False) -> SendResult:
    """A failed send's result (``permanent``: sending again cannot help)."""
    return SendResult(False, error, permanent)


@dataclass
class _Rule:
    kind: ActionKind | None
    result: SendResult
    times: int | None  # None: every matching send


class FakeAdapter:
    """A channel adapter for tests: records every action of the test's waits, in order, and
    reports a result for the sends it is told to, at once (at the test's now).

    By default it reports nothing (a wait whose sends nobody reports goes on as if
    they were delivered).  ``fail`` and ``deliver`` set what it reports;
    ``handler``, when set, decides instead: called with each new action (your
    adapter's code, say), it returns the result to report, or None.
    """

    def __init__(self) -> None:
        self.received: list[Action] = []
        self.handler: Callable[[Action], SendResult | None] | None = None
        self._rules: list[_Rule] = []

    def fail(self, action: ActionKind | str | None = None, error: str = "send failed", *,
             permanent: bool = False, times: int | None = 1) -> None:
        """Report the next ``times`` sends of kind ``action`` (None: any send) failed
        (``times=None``: every one from now on)."""
        self._rules.append(_Rule(action_kind(action), failed(error, permanent=permanent), times))

    def deliver(self, action: ActionKind | str | None = None, *,
                times: int | None = None) -> None:
        """Report sends of kind ``action`` (None: any) delivered, every one by default."""
        self._rules.append(_Rule(action_kind(action), DELIVERED, times))

    def result_for(self, action: Action) -> SendResult | None:
        """What to report for a send: the handler's answer, else the first rule that matches
        with times left."""
        if self.handler is not None:
            return self.handler(action)
        for rule in self._rules:
            if rule.kind in (None, action.action) and rule.times != 0:
                if rule.times is not None:
                    rule.times -= 1
                return rule.result
        return None


def action_kind(action: ActionKind | str | None) -> ActionKind | None:
    """`action` as an ActionKind (None: any kind)."""
    return None if action is None else ActionKind(action)
