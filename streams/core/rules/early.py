"""Rule 7: replies and commands that overtook their request, held for a TTL."""

from __future__ import annotations

from collections.abc import Mapping

from streams.core.copying import replace
from streams.core.definition import (
    DEFAULT_EARLY_REPLY_TTL_MS,
    WaitDefinition,
)
from streams.core.durations import (
    format_span_ms,
)
from streams.core.effects import (
    BufferEarlyCommand,
    BufferEarlyReply,
    Reject,
    RejectReason,
)
from streams.core.events import (
    Command,
    Reply,
    TimerKind,
    split_correlation_key,
)
from streams.core.rules.context import _Ctx
from streams.core.state import (
    MAX_HELD_REPLIES,
    ArmedTimer,
    HeldCommand,
    HeldReply,
    Slot,
)


def _held_what(held: HeldReply | HeldCommand) -> str:
    return "reply" if isinstance(held, HeldReply) else "command"


def _refuse_held(held: HeldReply | HeldCommand, ctx: _Ctx, detail: str, *,
                 late: bool = False) -> None:
    reason = RejectReason.LATE if late else RejectReason.UNMATCHED
    if isinstance(held, HeldReply):
        ctx.reject(reason, detail, held.reply)
    else:
        ctx.effects.append(Reject(reason, detail, command=held.command))


def _arrival(held: HeldReply | HeldCommand) -> tuple[int, int]:
    """Append order: by append time, then arrival number (several in one millisecond)."""
    return held.received_at, held.seq


def _buffer_early(slot: Slot | None, reply: Reply, ctx: _Ctx) -> Slot | None:
    """Rule 7: hold a reply that beat its request, for the longest TTL any definition allows.

    The reply does not say which definition it belongs to, so it is held for the
    longest TTL; when the request arrives its own definition's TTL is applied.
    """
    early = slot.early_replies if slot is not None else ()
    if reply.reply_id is not None and any(h.reply.reply_id == reply.reply_id for h in early):
        ctx.reject(
            RejectReason.DUPLICATE,
            f"Expected a new reply id, but {reply.reply_id!r} is already held for this key",
        )
        return slot
    # Alike with the commands' overflow below (duplicates lists the pair), deliberately:
    # each its own rejection text, which the native rules repeat word for word.
    if len(early) >= MAX_HELD_REPLIES:
        ctx.reject(
            RejectReason.OVERFLOW,
            f"Expected at most {MAX_HELD_REPLIES} early replies for key "
            f"{reply.correlation_key!r}, but {len(early)} are already held",
        )
        return slot
    expires_at = ctx.now + _longest_early_ttl(ctx.definitions)
    ctx.effects.append(BufferEarlyReply(reply=reply, received_at=ctx.now, expires_at=expires_at))
    return replace(
        slot or Slot(),
        early_replies=(*early, HeldReply(reply=reply, received_at=ctx.now, seq=ctx.stamp())),
        early_timer=_early_timer(slot, expires_at, ctx),
        next_generation=ctx.generation,
    )


def _buffer_early_command(slot: Slot | None, cmd: Command, ctx: _Ctx) -> Slot | None:
    """Rule 7 for commands: a command that beat its request is held like an early reply.

    Commands travel on their own topic, so a SUSPEND sent just after a request
    (or while the requests topic has a backlog) can be processed first.
    """
    held = slot.early_commands if slot is not None else ()
    if len(held) >= MAX_HELD_REPLIES:
        ctx.reject(
            RejectReason.OVERFLOW,
            f"Expected at most {MAX_HELD_REPLIES} commands held for key "
            f"{cmd.correlation_key!r} before its request, but {len(held)} are already held",
        )
        return slot
    expires_at = ctx.now + _longest_early_ttl(ctx.definitions)
    ctx.effects.append(BufferEarlyCommand(command=cmd, received_at=ctx.now,
                                          expires_at=expires_at))
    return replace(
        slot or Slot(),
        early_commands=(*held, HeldCommand(command=cmd, received_at=ctx.now, seq=ctx.stamp())),
        early_timer=_early_timer(slot, expires_at, ctx),
        next_generation=ctx.generation,
    )


def _early_timer(slot: Slot | None, expires_at: int, ctx: _Ctx) -> ArmedTimer:
    """The one timer that expires a key's early input: the first held item's, kept if armed."""
    if slot is not None and slot.early_timer is not None:
        return slot.early_timer
    return ctx.arm(TimerKind.EARLY_REPLY, expires_at)


def _longest_early_ttl(definitions: Mapping[str, WaitDefinition]) -> int:
    return max((d.early_reply_ttl_ms for d in definitions.values()),
               default=DEFAULT_EARLY_REPLY_TTL_MS)


def _expire_early(slot: Slot, armed: ArmedTimer, ctx: _Ctx) -> Slot | None:
    """Rule 7: early replies and commands whose TTL passed without a request become
    ``unmatched``."""
    ttl = _longest_early_ttl(ctx.definitions)
    cutoff = max(ctx.now, armed.due_at)
    kept: list[HeldReply] = []
    for held in slot.early_replies:
        if held.received_at + ttl <= cutoff:
            ctx.reject(
                RejectReason.UNMATCHED,
                f"Expected a request for key {_held_key(held)!r} within {format_span_ms(ttl)} "
                "of its reply, but none arrived",
                held.reply,
            )
        else:
            kept.append(held)
    kept_commands: list[HeldCommand] = []
    for hc in slot.early_commands:
        if hc.received_at + ttl <= cutoff:
            ctx.effects.append(Reject(
                RejectReason.UNMATCHED,
                f"Expected a request for key {hc.command.correlation_key!r} within "
                f"{format_span_ms(ttl)} of its {hc.command.command.value} command, but none "
                "arrived",
                command=hc.command,
            ))
        else:
            kept_commands.append(hc)
    if not kept and not kept_commands:
        return None
    first = min([h.received_at for h in kept] + [h.received_at for h in kept_commands])
    timer = ctx.arm(TimerKind.EARLY_REPLY, first + ttl)
    return replace(slot, early_replies=tuple(kept), early_commands=tuple(kept_commands),
                   early_timer=timer)


def _held_key(held: HeldReply) -> str:
    return split_correlation_key(held.reply.correlation_key)[0]
