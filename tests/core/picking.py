"""Reading what decide() said: the effects a test asserts on, picked out of a decision.

The ``the_`` helpers insist on exactly one; `the_reject` also checks the reason is
written as rejections are ("Expected ..., but ...", house style 2).
"""

from __future__ import annotations

from streams import core


def outcomes(effects: tuple[core.Effect, ...]) -> list[core.EmitOutcome]:
    return [e for e in effects if isinstance(e, core.EmitOutcome)]


def the_outcome(effects: tuple[core.Effect, ...]) -> core.EmitOutcome:
    (outcome,) = outcomes(effects)
    return outcome


def actions(effects: tuple[core.Effect, ...],
            kind: core.ActionKind | None = None) -> list[core.EmitAction]:
    return [e for e in effects
            if isinstance(e, core.EmitAction) and (kind is None or e.action is kind)]


def rejects(effects: tuple[core.Effect, ...]) -> list[core.Reject]:
    return [e for e in effects if isinstance(e, core.Reject)]


def the_reject(effects: tuple[core.Effect, ...]) -> core.Reject:
    (reject,) = rejects(effects)
    assert reject.detail.startswith("Expected "), reject.detail
    assert ", but " in reject.detail, reject.detail
    return reject
