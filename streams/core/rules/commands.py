"""Rules 4, 9, 11 and 13: an operator's suspend, resume, cancel, deliver, reschedule, review,
migrate."""

from __future__ import annotations

from streams.core.copying import replace
from streams.core.definition import (
    WaitDefinition,
    definition_for,
)
from streams.core.durations import (
    format_span_ms,
    format_utc_ms,
    parse_duration_ms,
    parse_signed_duration_ms,
)
from streams.core.effects import (
    Discard,
    DiscardReason,
    OutcomeKind,
    OutcomeReason,
    RejectReason,
)
from streams.core.events import (
    Command,
    CommandKind,
    Reply,
    ReviewOutcome,
    TimerKind,
    split_correlation_key,
)
from streams.core.operations import carries, operation_id_problem
from streams.core.rules.context import (
    OPERATOR_CHANNEL,
    _by,
    _Ctx,
    _ended,
    _missing_definition,
    _timer_order,
    _trace,
)
from streams.core.rules.early import _buffer_early_command
from streams.core.rules.ending import _end
from streams.core.rules.replies import _accept, _judge
from streams.core.rules.results import _on_result
from streams.core.rules.sends import _shift_retries
from streams.core.state import (
    MAX_HELD_REPLIES,
    HeldReply,
    HeldResult,
    Slot,
    Suspension,
    Wait,
    WaitStatus,
)
from streams.core.validation import parse_json, schema_issue


# Alike in shape with replies.py's and results.py's entries (duplicates lists the pairs),
# deliberately: each kind of record its own rule, as native/src/rules/ mirrors them.
def _on_command(slot: Slot | None, cmd: Command, ctx: _Ctx) -> Slot | None:
    if slot is None or slot.wait is None:
        return _buffer_early_command(slot, cmd, ctx)
    w = slot.wait
    new = _command_on_wait(w, cmd, ctx)
    return slot if new is w else replace(slot, wait=new)


def _command_on_wait(w: Wait, cmd: Command, ctx: _Ctx) -> Wait:
    outer = ctx.by
    ctx.by = (cmd.operator, cmd.reason)
    try:
        return _apply_command(w, cmd, ctx)
    finally:
        ctx.by = outer


def _apply_command(w: Wait, cmd: Command, ctx: _Ctx) -> Wait:
    if cmd.operation_id is not None and not _first_of_operation(w, cmd, ctx):
        return w
    if w.status is WaitStatus.DONE:
        ctx.reject(RejectReason.LATE, f"{_ended(w)}; {cmd.command.value} does nothing")
        return w
    d = ctx.definition_of(w)
    if cmd.command is CommandKind.CANCEL:
        return _cancel(w, d, ctx, cmd)
    if cmd.command is CommandKind.MIGRATE:
        return _migrate(w, ctx, cmd)
    if d is None:
        ctx.reject(RejectReason.UNKNOWN_DEFINITION, _missing_definition(w))
        return w
    if cmd.command is CommandKind.SUSPEND:
        return _suspend(w, ctx, cmd)
    if cmd.command is CommandKind.RESUME:
        return _resume(w, d, ctx, cmd)
    if cmd.command is CommandKind.DELIVER:
        return _deliver(w, d, ctx, cmd)
    if cmd.command is CommandKind.RESCHEDULE:
        return _reschedule(w, ctx, cmd)
    return _review(w, d, ctx, cmd)


def _signed(cmd: Command) -> str:
    """How the trace entry of a command the wait takes ends: reason, operator, operation."""
    return _by(cmd.reason, cmd.operator, cmd.operation_id)


def _first_of_operation(w: Wait, cmd: Command, ctx: _Ctx) -> bool:
    """Whether the wait may take this command of a bulk operation: its id is well formed
    and the wait's kept trace does not already name it (streams.core.operations).

    A re-run of an operation skips the waits that carry its mark; this refusal
    covers the command the crashed run had sent but no worker had decided yet.
    """
    operation = cmd.operation_id or ""
    problem = operation_id_problem(operation)
    if problem is not None:
        ctx.reject(RejectReason.INVALID_COMMAND, f"{problem} (the command's operationId)")
        return False
    for entry in w.trace:
        if carries((entry.detail,), operation):
            ctx.reject(RejectReason.DUPLICATE,
                       f"Expected a wait operation {operation} has not commanded yet, but it "
                       f"took the operation's command at {format_utc_ms(entry.at)} "
                       f"({entry.event}); this {cmd.command.value} does nothing")
            return False
    return True


def _suspend(w: Wait, ctx: _Ctx, cmd: Command) -> Wait:
    """Rule 9: keep the wait's place and what is left of each timer; decide nothing."""
    if w.status is WaitStatus.SUSPENDED:
        ctx.effects.append(Discard(DiscardReason.ALREADY_SUSPENDED,
                                   "Expected a wait to suspend, but it is already suspended"))
        return w
    # Negative when a timer was already due but not yet fired: it stays overdue on resume
    # and fires at once, but only once (each kind is armed once).
    remaining = tuple((t.kind, t.due_at - ctx.now) for t in sorted(w.timers, key=_timer_order))
    suspension = Suspension(reason=cmd.reason, at=ctx.now, resume_to=w.status,
                            remaining=remaining, operator=cmd.operator)
    w = replace(w, status=WaitStatus.SUSPENDED, suspension=suspension, timers=())
    return _trace(w, ctx.now, "suspended", _signed(cmd))


def _resume(w: Wait, d: WaitDefinition, ctx: _Ctx, cmd: Command) -> Wait:
    """Rule 9: restore each timer with what was left, then decide the recorded replies."""
    if w.status is not WaitStatus.SUSPENDED or w.suspension is None:
        ctx.effects.append(Discard(DiscardReason.NOT_SUSPENDED,
                                   f"Expected a suspended wait, but it is {w.status.value}"))
        return w
    s = w.suspension
    timers = tuple(ctx.arm(kind, ctx.now + left) for kind, left in s.remaining)
    held: list[HeldReply | HeldResult] = sorted(
        [*w.held, *w.held_results],
        key=lambda h: (h.received_at, isinstance(h, HeldResult)))
    w = replace(w, status=s.resume_to, suspension=None, timers=timers, held=(),
                held_results=())
    w = _shift_retries(w, ctx.now - s.at)
    w = _trace(w, ctx.now, "resumed", f"after {format_span_ms(ctx.now - s.at)} suspended: "
                                      f"{_signed(cmd)}")
    resumed_by = ctx.by
    for h in held:
        if isinstance(h, HeldResult):
            ctx.by, ctx.held_result = None, h.result
            w = _on_result(w, h.result, ctx)
            ctx.held_result = None
            continue
        if w.status is not WaitStatus.PARKED:
            ctx.reject(
                RejectReason.LATE,
                "Expected the wait to be waiting for a reply, but "
                + ("it ended before this recorded reply was decided"
                   if w.status is WaitStatus.DONE
                   else "an earlier reply won and is in review"),
                h.reply,
            )
            continue
        _, party = split_correlation_key(h.reply.correlation_key)
        # Whoever sent the recorded reply settles the wait, not whoever resumed it.
        ctx.by = (h.operator, h.reason) if h.by_operator else None
        w = _judge(w, d, ctx, h.reply.response_data, h.reply.channel, party, h.reply,
                   by_operator=h.by_operator)
    ctx.by = resumed_by
    return w


def _cancel(w: Wait, d: WaitDefinition | None, ctx: _Ctx, cmd: Command) -> Wait:
    w = _trace(w, ctx.now, "cancelled", _signed(cmd))
    if w.held:
        w = _trace(w, ctx.now, "undecided",
                   f"{len(w.held)} replies recorded while suspended were not decided")
    if w.held_results:
        w = _trace(w, ctx.now, "undecided",
                   f"{len(w.held_results)} results recorded while suspended were not decided")
    return _end(w, d, ctx, OutcomeKind.CANCELLED, OutcomeReason.CANCELLED_BY_OPERATOR)


def _deliver(w: Wait, d: WaitDefinition, ctx: _Ctx, cmd: Command) -> Wait:
    """Manual delivery by an operator: still validated, never channel- or tenant-checked."""
    if cmd.response_data is None:
        ctx.reject(RejectReason.INVALID_COMMAND,
                   "Expected responseData with DELIVER, but none was given")
        return w
    reply = Reply(correlation_key=w.key, response_data=cmd.response_data, tenant=w.tenant,
                  channel=OPERATOR_CHANNEL)
    if w.status is WaitStatus.SUSPENDED:
        if len(w.held) >= MAX_HELD_REPLIES:
            ctx.reject(RejectReason.OVERFLOW,
                       f"Expected at most {MAX_HELD_REPLIES} replies recorded while suspended, "
                       f"but {len(w.held)} are already recorded")
            return w
        w = replace(w, held=(*w.held, HeldReply(reply, ctx.now, by_operator=True,
                                                operator=cmd.operator, reason=cmd.reason)))
        return _trace(w, ctx.now, "delivery_recorded", _signed(cmd))
    if w.status is WaitStatus.IN_REVIEW:
        ctx.reject(RejectReason.INVALID_COMMAND,
                   "Expected a parked wait for DELIVER, but it is in review: answer with REVIEW")
        return w
    w = _trace(w, ctx.now, "delivered", _signed(cmd))
    return _judge(w, d, ctx, cmd.response_data, OPERATOR_CHANNEL, None, None, by_operator=True)


def _reschedule(w: Wait, ctx: _Ctx, cmd: Command) -> Wait:
    """Rule 11: move the current stage and level's deadline, to ``deadline`` from now or by
    ``move_by``; the wait is as the command's time left it (``_catch_up`` ran first).

    Only the deadline moves: reminders and polls keep their schedule (a
    deadline moved before a reminder simply ends the reminders when it
    passes).  A suspended wait's deadline is paused, so what moves is the
    time it will have left on resume.  A new deadline that is not in the
    future is refused, never applied as an instant escalation: the operator
    who wants that can say so with CANCEL.
    """
    given = [name for name, v in (("deadline", cmd.deadline), ("moveBy", cmd.move_by))
             if v is not None]
    if len(given) != 1:
        ctx.reject(RejectReason.INVALID_COMMAND,
                   "Expected exactly one of deadline and moveBy with RESCHEDULE, but got "
                   + (" and ".join(given) if given else "neither"))
        return w
    try:
        if cmd.deadline is not None:
            to, shift = parse_duration_ms(cmd.deadline), None
        else:
            to, shift = None, parse_signed_duration_ms(cmd.move_by or "")
    except ValueError as exc:
        ctx.reject(RejectReason.INVALID_COMMAND, f"{exc} (the RESCHEDULE's {given[0]})")
        return w
    if w.status is WaitStatus.IN_REVIEW:
        ctx.reject(RejectReason.INVALID_COMMAND,
                   "Expected a parked or suspended wait to reschedule, but it is in review: "
                   "the reply under review stopped its deadline")
        return w
    why = _signed(cmd)
    if w.status is WaitStatus.SUSPENDED and w.suspension is not None:
        s = w.suspension
        left = next((ms for kind, ms in s.remaining if kind is TimerKind.DEADLINE), None)
        if left is None:
            ctx.reject(RejectReason.INVALID_COMMAND,
                       "Expected a paused deadline to move, but the suspended wait has none")
            return w
        new_left = to if to is not None else left + (shift or 0)
        if new_left <= 0:
            ctx.reject(RejectReason.DEADLINE_PASSED,
                       f"Expected the moved deadline to leave time when the wait resumes, but "
                       f"it would be {format_span_ms(-new_left)} past")
            return w
        remaining = tuple((kind, new_left if kind is TimerKind.DEADLINE else ms)
                          for kind, ms in s.remaining)
        w = replace(w, suspension=Suspension(s.reason, s.at, s.resume_to, remaining, s.operator))
        return _trace(w, ctx.now, "rescheduled",
                      f"deadline left on resume {format_span_ms(left)} -> "
                      f"{format_span_ms(new_left)}: {why}")
    deadline = next((t for t in w.timers if t.kind is TimerKind.DEADLINE), None)
    if deadline is None:
        ctx.reject(RejectReason.INVALID_COMMAND,
                   f"Expected an armed deadline to move, but the {w.status.value} wait has none")
        return w
    due = ctx.now + to if to is not None else deadline.due_at + (shift or 0)
    if due <= ctx.now:
        ctx.reject(RejectReason.DEADLINE_PASSED,
                   f"Expected a new deadline after the command's time {format_utc_ms(ctx.now)}, "
                   f"but {format_utc_ms(due)} has passed")
        return w
    timers = tuple(t for t in w.timers if t is not deadline)
    w = replace(w, timers=(*timers, ctx.arm(TimerKind.DEADLINE, due)))
    moved = due - deadline.due_at
    return _trace(w, ctx.now, "rescheduled",
                  f"deadline {format_utc_ms(deadline.due_at)} -> {format_utc_ms(due)} "
                  f"({'+' if moved >= 0 else ''}{format_span_ms(moved)}): {why}")


def _review(w: Wait, d: WaitDefinition, ctx: _Ctx, cmd: Command) -> Wait:
    """Rule 4: a person's decision on an invalid reply ends the wait (or stage) received."""
    if w.status is not WaitStatus.IN_REVIEW:
        ctx.reject(RejectReason.INVALID_COMMAND,
                   f"Expected the wait to be in review, but it is {w.status.value}")
        return w
    if cmd.review_outcome == ReviewOutcome.ACCEPT.value:
        data, valid, reason = w.response_data, False, OutcomeReason.REVIEW_ACCEPTED
    elif cmd.review_outcome == ReviewOutcome.SUBMIT_CORRECTION.value:
        issue = correction_issue(d, cmd.response_data)
        if issue is not None:
            ctx.reject(RejectReason.INVALID_COMMAND, f"{issue} (in the submitted correction)")
            return w
        data, valid, reason = cmd.response_data, True, OutcomeReason.REVIEW_CORRECTED
    else:
        ctx.reject(
            RejectReason.INVALID_COMMAND,
            f"Expected reviewOutcome {ReviewOutcome.ACCEPT.value!r} or "
            f"{ReviewOutcome.SUBMIT_CORRECTION.value!r}, but got {cmd.review_outcome!r}",
        )
        return w
    w = replace(w, review_outcome=cmd.review_outcome, review_note=cmd.review_note,
                status=WaitStatus.PARKED)
    # The note is the reviewer's reason; a command's own reason (the console sends one)
    # is kept beside it.
    why = "; ".join(text for text in (cmd.review_note, cmd.reason) if text) or None
    w = _trace(w, ctx.now, "reviewed",
               f"{cmd.review_outcome}: {_by(why, cmd.operator, cmd.operation_id)}")
    return _accept(w, d, ctx, data, valid=valid, reason=reason, winner=None)


def correction_issue(d: WaitDefinition, data: str | None) -> str | None:
    """What is wrong with a reviewer's corrected data, or None (rule 4; asked by the native
    rules too, so the texts are the same)."""
    parsed = parse_json(data)
    return parsed.issue or schema_issue(d.response_schema, parsed.value)


def _migrate(w: Wait, ctx: _Ctx, cmd: Command) -> Wait:
    """Rule 13: the wait follows another version of its definition from now on.

    Only an operator moves a wait (new versions never reach parked waits by
    themselves).  What is armed stays armed - a deadline keeps its due time
    (RESCHEDULE moves it) - and every later decision uses the new version.
    The wait must fit it: the same variant, its stage and escalation level
    still there.
    """
    newest = ctx.definitions.get(w.definition)
    target = newest if cmd.version is None else definition_for(
        ctx.definitions, w.definition, cmd.version)
    if target is None:
        which = "a newest version" if cmd.version is None else f"version {cmd.version!r}"
        ctx.reject(RejectReason.UNKNOWN_DEFINITION,
                   f"Expected {which} of definition {w.definition!r} to migrate to, but it "
                   "is not loaded")
        return w
    if w.definition_version is not None and target.version == w.definition_version:
        ctx.effects.append(Discard(DiscardReason.SAME_VERSION,
                                   f"Expected another version than {target.version!r}, but "
                                   "the wait already follows it"))
        return w
    issue = _misfit(w, ctx.definition_of(w), target)
    if issue is not None:
        ctx.reject(RejectReason.INVALID_COMMAND, issue)
        return w
    old = w.definition_version or "(none)"
    w = replace(w, definition_version=target.version or None)
    return _trace(w, ctx.now, "migrated",
                  f"definition {w.definition} version {old} -> {target.version or '(none)'}: "
                  f"{_signed(cmd)}")


def _misfit(w: Wait, current: WaitDefinition | None, target: WaitDefinition) -> str | None:
    """Why the wait, where it stands, cannot follow `target`; None when it can."""
    if current is not None and current.variant is not target.variant:
        return (f"Expected a version of the same variant {current.variant.value!r}, but "
                f"version {target.version!r} is {target.variant.value!r}")
    if w.stage >= len(target.stages):
        return (f"Expected version {target.version!r} to have the wait's stage {w.stage + 1}, "
                f"but it has {len(target.stages)}")
    levels = len(target.stages[w.stage].escalation)
    if w.level > levels:
        return (f"Expected version {target.version!r} to have the wait's escalation level "
                f"{w.level}, but it has {levels}")
    return None
