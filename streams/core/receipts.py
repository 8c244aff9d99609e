"""What became of one input record, as its sender's receipt says: a pure function of the
decision that took it.

A sender that asks for a receipt (the ``xwait-receipt`` header on a reply or a
command) is told one verdict, decided by the worker from the same decision
that produced the record's other outputs, so it can never disagree with them:

    replies    won, recorded, held, in_review, escalated,
               late, duplicate, tenant_mismatch, rejected
    commands   applied, held, unchanged, refused
    (a request or an action result with the header: applied, unchanged, refused)

Which effects of a decision are the input's own: ``decide`` first fires the
timers due by the input's time (rule 2: ``catch_up``), then handles the
input; a reminder, a deadline or an expired early reply fired on the way
belongs to time, not to the reply.  Both run the same code from the same
slot, so the decision's effects (less the timer bookkeeping ``_finish``
appends) are exactly ``catch_up``'s followed by the input's own; when
nothing is due by then (nearly always) there is no catch-up to take away.

Nothing here reads a clock or the outside world: the receipt of an input
decided again (a takeover, at-least-once) is the same receipt.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from streams.core import effects as fx
from streams.core.definition import WaitDefinition
from streams.core.events import (
    ActionResult,
    Command,
    CommandKind,
    Reply,
    StartWait,
    split_correlation_key,
)
from streams.core.rules import Decision, catch_up
from streams.core.state import Slot, Wait, WaitStatus

__all__ = [
    "COMMAND_VERDICTS",
    "REPLY_VERDICTS",
    "Receipt",
    "Verdict",
    "own_effects",
    "receipt_for",
    "refusal",
]


class Verdict(StrEnum):
    """What became of the record (contract values: `Receipt.verdict`)."""

    WON = "won"
    """The reply settled the race: the wait ended with it (``outcome``; the winning
    ``party`` of a first-valid wait), or a chained wait's stage did and the next opened."""
    RECORDED = "recorded"
    """Taken, nothing settled: a probe's result that says it is not ready yet."""
    HELD = "held"
    """Kept undecided: before its request (until ``heldUntil``, then ``unmatched``),
    or while its wait is suspended (decided when it resumes)."""
    IN_REVIEW = "in_review"
    """It won the race but failed validation (``validationIssue``): a person decides."""
    ESCALATED = "escalated"
    """It won the race but failed validation, and the definition escalates invalid
    replies: the next level runs, or the wait ended ESCALATED."""
    LATE = "late"
    """The wait had ended (``endedAt``), or an earlier reply won and is in review."""
    DUPLICATE = "duplicate"
    """Its reply id was seen before by this wait (or is already held for its key)."""
    TENANT_MISMATCH = "tenant_mismatch"
    """It names another tenant than the wait's; it changed nothing."""
    REJECTED = "rejected"
    """Refused for another ``reason`` (the Rejected record's, e.g. ``unmatched``,
    ``unacceptable``, ``overflow``, ``undecodable``)."""
    APPLIED = "applied"
    """The command (or request, or result) took effect; ``outcome`` when it ended the wait."""
    UNCHANGED = "unchanged"
    """The command asked for what already was (``already_suspended``, ``not_suspended``,
    ``same_version``; a result already reported): nothing changed, nothing refused."""
    REFUSED = "refused"
    """The command (or request, or result) was refused: ``reason`` and ``detail`` say why."""


REPLY_VERDICTS = frozenset({
    Verdict.WON, Verdict.RECORDED, Verdict.HELD, Verdict.IN_REVIEW, Verdict.ESCALATED,
    Verdict.LATE, Verdict.DUPLICATE, Verdict.TENANT_MISMATCH, Verdict.REJECTED,
})
COMMAND_VERDICTS = frozenset({Verdict.APPLIED, Verdict.HELD, Verdict.UNCHANGED,
                              Verdict.REFUSED})

_REJECTED_AS = {
    fx.RejectReason.LATE: Verdict.LATE,
    fx.RejectReason.DUPLICATE: Verdict.DUPLICATE,
    fx.RejectReason.TENANT_MISMATCH: Verdict.TENANT_MISMATCH,
}
_UNCHANGED = frozenset({fx.DiscardReason.ALREADY_SUSPENDED, fx.DiscardReason.NOT_SUSPENDED,
                        fx.DiscardReason.SAME_VERSION, fx.DiscardReason.DUPLICATE_RESULT,
                        fx.DiscardReason.STALE_RESULT})
_BOOKKEEPING = (fx.ArmTimer, fx.DisarmTimer, fx.Purge)


# Alike in shape with other records (definition.py's Stage, events.py's Command; the
# SDK's Receipt field for field; duplicates lists the pairs), deliberately: the SDK
# reads the contract's record, this is what the worker decides it from.
@dataclass(frozen=True, slots=True)
class Receipt:
    """One input record's verdict, and the times and facts that decided it."""

    verdict: Verdict
    decided_at: int
    """The time it was decided at: its broker append time (rule 2)."""
    reason: str | None = None
    """For a refusal, the Rejected record's reason; for ``unchanged``, why."""
    detail: str | None = None
    held_until: int | None = None
    """``held`` before its request: when it is given up (``unmatched``) without one."""
    outcome: str | None = None
    outcome_reason: str | None = None
    outcome_id: str | None = None
    party: str | None = None
    ended_at: int | None = None
    """When the wait ended: by this record (with ``outcome``), or before it (``late``)."""
    validation_issue: str | None = None
    action_id: str | None = None
    """The REVIEW_NEEDED or RUN_ESCALATION action this record caused."""


def own_effects(slot: Slot | None, decision: Decision, now_ms: int,
                definitions: Mapping[str, WaitDefinition]
                ) -> tuple[tuple[fx.Effect, ...], Wait | None]:
    """The effects of ``decision`` that are its input's own (see the module docstring),
    and the wait as the passing of time alone left it by ``now_ms`` (what the input met)."""
    plain = tuple(e for e in decision.effects if not isinstance(e, _BOOKKEEPING))
    if slot is None or not any(t.due_at <= now_ms for t in slot.armed_in_any_order()):
        return plain, slot.wait if slot is not None else None
    aged = catch_up(slot, now_ms, definitions)
    by_time = sum(1 for e in aged.effects if not isinstance(e, _BOOKKEEPING))
    return plain[by_time:], aged.slot.wait if aged.slot is not None else None


def receipt_for(slot: Slot | None, event: Reply | Command | StartWait | ActionResult,
                decision: Decision, now_ms: int,
                definitions: Mapping[str, WaitDefinition]) -> Receipt:
    """The receipt of ``event``, decided at ``now_ms`` on ``slot`` into ``decision``
    (``decide(slot, event, now_ms, definitions)``)."""
    own, met = own_effects(slot, decision, now_ms, definitions)
    after = decision.slot.wait if decision.slot is not None else None
    refused = next((e for e in own if isinstance(e, fx.Reject) and e.reply is None
                    and e.command is None and e.result is None), None)
    if refused is not None:
        verdict = (_REJECTED_AS.get(refused.reason, Verdict.REJECTED)
                   if isinstance(event, Reply) else Verdict.REFUSED)
        ended = (met.ended_at if refused.reason is fx.RejectReason.LATE and met is not None
                 and met.status is WaitStatus.DONE else None)
        return Receipt(verdict, now_ms, refused.reason.value, refused.detail, ended_at=ended)
    if isinstance(event, Reply):
        return _reply(event, own, met, after, now_ms)
    if isinstance(event, Command):
        return _command(event, own, met, after, now_ms)
    unchanged = next((e for e in own if isinstance(e, fx.Discard) and e.reason in _UNCHANGED),
                     None)
    if unchanged is not None:
        return Receipt(Verdict.UNCHANGED, now_ms, unchanged.reason.value, unchanged.detail)
    return _applied(own, after, now_ms)


def refusal(about_reply: bool, reason: str, detail: str, now_ms: int) -> Receipt:
    """The receipt of a record refused before any decision (undecodable, a bad key, too
    large, an internal error): ``rejected`` for a reply, else ``refused``."""
    return Receipt(Verdict.REJECTED if about_reply else Verdict.REFUSED, now_ms, reason, detail)


def _reply(reply: Reply, own: tuple[fx.Effect, ...], met: Wait | None, after: Wait | None,
           now_ms: int) -> Receipt:
    for e in own:
        if isinstance(e, fx.BufferEarlyReply):
            return Receipt(Verdict.HELD, now_ms, held_until=e.expires_at,
                           detail="Held until its request arrives: no wait has the key yet")
    outcome = next((e for e in own if isinstance(e, fx.EmitOutcome)), None)
    issue = after.validation_issue if after is not None else None
    if outcome is not None:
        if outcome.reason is fx.OutcomeReason.INVALID_REPLY_ESCALATED:
            return _with_outcome(Receipt(Verdict.ESCALATED, now_ms, validation_issue=issue,
                                         detail=issue), outcome)
        return _with_outcome(Receipt(Verdict.WON, now_ms,
                                     party=split_correlation_key(reply.correlation_key)[1]),
                             outcome)
    for e in own:
        if isinstance(e, fx.EmitAction) and e.action is fx.ActionKind.REVIEW_NEEDED:
            return Receipt(Verdict.IN_REVIEW, now_ms, validation_issue=issue, detail=issue,
                           action_id=e.action_id)
        if isinstance(e, fx.EmitAction) and e.action is fx.ActionKind.RUN_ESCALATION:
            return Receipt(Verdict.ESCALATED, now_ms, validation_issue=issue, detail=issue,
                           action_id=e.action_id)
    if met is not None and met.status is WaitStatus.SUSPENDED:
        return Receipt(Verdict.HELD, now_ms, detail="Recorded while the wait is suspended: "
                                                    "decided when it resumes")
    if met is not None and after is not None and after.stage > met.stage:
        return Receipt(Verdict.WON, now_ms, detail=_last_trace(after),
                       party=split_correlation_key(reply.correlation_key)[1])
    return Receipt(Verdict.RECORDED, now_ms, detail=_last_trace(after))


# Alike in shape with _reply (duplicates lists the pair), deliberately: each kind of
# input its own verdicts; only being held before its request reads the same.
def _command(cmd: Command, own: tuple[fx.Effect, ...], met: Wait | None, after: Wait | None,
             now_ms: int) -> Receipt:
    for e in own:
        if isinstance(e, fx.BufferEarlyCommand):
            return Receipt(Verdict.HELD, now_ms, held_until=e.expires_at,
                           detail="Held until its request arrives: no wait has the key yet")
        if isinstance(e, fx.Discard) and e.reason in _UNCHANGED:
            return Receipt(Verdict.UNCHANGED, now_ms, e.reason.value, e.detail)
    if (cmd.command is CommandKind.DELIVER and met is not None
            and met.status is WaitStatus.SUSPENDED):
        return Receipt(Verdict.HELD, now_ms, detail="Recorded while the wait is suspended: "
                                                    "decided when it resumes")
    return _applied(own, after, now_ms)


def _applied(own: tuple[fx.Effect, ...], after: Wait | None, now_ms: int) -> Receipt:
    receipt = Receipt(Verdict.APPLIED, now_ms, detail=_last_trace(after))
    for e in own:
        if isinstance(e, fx.EmitAction) and e.action is fx.ActionKind.REVIEW_NEEDED:
            issue = after.validation_issue if after is not None else None
            return Receipt(Verdict.APPLIED, now_ms, detail=_last_trace(after),
                           validation_issue=issue, action_id=e.action_id)
    outcome = next((e for e in own if isinstance(e, fx.EmitOutcome)), None)
    return receipt if outcome is None else _with_outcome(receipt, outcome)


def _with_outcome(receipt: Receipt, outcome: fx.EmitOutcome) -> Receipt:
    return Receipt(receipt.verdict, receipt.decided_at, receipt.reason, receipt.detail,
                   receipt.held_until, outcome.outcome.value, outcome.reason.value,
                   outcome.outcome_id, receipt.party, outcome.ended_at,
                   receipt.validation_issue or outcome.validation_issue, receipt.action_id)


def _last_trace(w: Wait | None) -> str | None:
    """What the wait's trace says last: the input's own line, or what it led to (a
    RESUME's last line may be a recorded reply it decided)."""
    if w is None or not w.trace:
        return None
    entry = w.trace[-1]
    return f"{entry.event}: {entry.detail}" if entry.detail else entry.event
