//! streams/core/rules/early.py, function for function (see `super` for how to read it).

use super::*;

pub(super) enum Held {
    Reply(HeldReply),
    Command(HeldCommand),
}

impl Held {
    pub(super) fn received_at(&self) -> i64 {
        match self {
            Held::Reply(h) => h.received_at,
            Held::Command(h) => h.received_at,
        }
    }
    pub(super) fn seq(&self) -> i64 {
        match self {
            Held::Reply(h) => h.seq,
            Held::Command(h) => h.seq,
        }
    }
    pub(super) fn what(&self) -> &'static str {
        match self {
            Held::Reply(_) => "reply",
            Held::Command(_) => "command",
        }
    }
}

// _refuse_held
pub(super) fn refuse_held(held: &Held, ctx: &mut Ctx, detail: String, late: bool) {
    let reason = if late { RejectReason::Late } else { RejectReason::Unmatched };
    match held {
        Held::Reply(h) => ctx.reject(reason, detail, Some(h.reply.clone())),
        Held::Command(h) => ctx.effects.push(Effect::Reject { reason, detail, reply: None, command: Some(h.command.clone()), result: None }),
    }
}

// _buffer_early
pub(super) fn buffer_early(slot: S, reply: &Rc<Reply>, ctx: &mut Ctx) -> R<S> {
    let early: Vec<HeldReply> = slot.as_ref().map(|s| s.early_replies.clone()).unwrap_or_default();
    if let Some(id) = &reply.reply_id {
        if early.iter().any(|h| h.reply.reply_id.as_ref() == Some(id)) {
            let detail = format!("Expected a new reply id, but {} is already held for this key", ctx.repr(id)?);
            ctx.reject(RejectReason::Duplicate, detail, None);
            return Ok(slot);
        }
    }
    // Alike with the commands' overflow below (duplicates lists the pair), deliberately:
    // each its own rejection text, word for word the Python rule's, which marks it too.
    if early.len() >= MAX_HELD_REPLIES {
        let detail = format!("Expected at most {} early replies for key {}, but {} are already held",
                             MAX_HELD_REPLIES, ctx.repr(&reply.correlation_key)?, early.len());
        ctx.reject(RejectReason::Overflow, detail, None);
        return Ok(slot);
    }
    let expires_at = add(ctx.now, ctx.o.defs.longest_ttl)?;
    ctx.effects.push(Effect::BufferReply { reply: reply.clone(), received_at: ctx.now, expires_at });
    let seq = ctx.stamp();
    let held = HeldReply { reply: reply.clone(), received_at: ctx.now, by_operator: false, seq, operator: None, reason: None };
    Ok(Some(holding(slot, expires_at, ctx, |s| s.early_replies.push(held))))
}

// _buffer_early_command
pub(super) fn buffer_early_command(slot: S, cmd: &Rc<Command>, ctx: &mut Ctx) -> R<S> {
    let held: Vec<HeldCommand> = slot.as_ref().map(|s| s.early_commands.clone()).unwrap_or_default();
    if held.len() >= MAX_HELD_REPLIES {
        let detail = format!("Expected at most {} commands held for key {} before its request, but {} are already held",
                             MAX_HELD_REPLIES, ctx.repr(&cmd.correlation_key)?, held.len());
        ctx.reject(RejectReason::Overflow, detail, None);
        return Ok(slot);
    }
    let expires_at = add(ctx.now, ctx.o.defs.longest_ttl)?;
    ctx.effects.push(Effect::BufferCommand { command: cmd.clone(), received_at: ctx.now, expires_at });
    let seq = ctx.stamp();
    let h = HeldCommand { command: cmd.clone(), received_at: ctx.now, seq };
    Ok(Some(holding(slot, expires_at, ctx, |s| s.early_commands.push(h))))
}

/// The `replace(slot or Slot(), ..., early_timer=_early_timer(...), next_generation=ctx.generation)`
/// both `_buffer_early*` end with: the slot (or a new one) with the item `hold` adds.
fn holding(slot: S, expires_at: i64, ctx: &mut Ctx, hold: impl FnOnce(&mut Slot)) -> Rc<Slot> {
    let timer = early_timer(&slot, expires_at, ctx);
    let g = ctx.generation;
    let base = slot.map(|s| (*s).clone()).unwrap_or_else(Slot::empty);
    with_slot(&base, |s| {
        hold(s);
        s.early_timer = Some(timer);
        s.next_generation = g;
    })
}

// _early_timer
pub(super) fn early_timer(slot: &S, expires_at: i64, ctx: &mut Ctx) -> ArmedTimer {
    if let Some(s) = slot {
        if let Some(t) = s.early_timer {
            return t;
        }
    }
    ctx.arm(TimerKind::EarlyReply, expires_at)
}

// _expire_early
pub(super) fn expire_early(slot: &Rc<Slot>, armed: ArmedTimer, ctx: &mut Ctx) -> R<S> {
    let ttl = ctx.o.defs.longest_ttl;
    let cutoff = ctx.now.max(armed.due_at);
    let mut kept: Vec<HeldReply> = vec![];
    for held in &slot.early_replies {
        if add(held.received_at, ttl)? <= cutoff {
            let key = split_correlation_key(&held.reply.correlation_key).0.to_string();
            let detail = format!("Expected a request for key {} within {} of its reply, but none arrived",
                                 ctx.repr(&key)?, format_span_ms(ttl));
            ctx.reject(RejectReason::Unmatched, detail, Some(held.reply.clone()));
        } else {
            kept.push(held.clone());
        }
    }
    let mut kept_commands: Vec<HeldCommand> = vec![];
    for hc in &slot.early_commands {
        if add(hc.received_at, ttl)? <= cutoff {
            let detail = format!("Expected a request for key {} within {} of its {} command, but none arrived",
                                 ctx.repr(&hc.command.correlation_key)?, format_span_ms(ttl), hc.command.command.value());
            ctx.effects.push(Effect::Reject { reason: RejectReason::Unmatched, detail, reply: None, command: Some(hc.command.clone()), result: None });
        } else {
            kept_commands.push(hc.clone());
        }
    }
    if kept.is_empty() && kept_commands.is_empty() {
        return Ok(None);
    }
    let first = kept.iter().map(|h| h.received_at).chain(kept_commands.iter().map(|h| h.received_at)).min().unwrap();
    let timer = ctx.arm(TimerKind::EarlyReply, add(first, ttl)?);
    Ok(Some(with_slot(slot, |s| {
        s.early_replies = kept;
        s.early_commands = kept_commands;
        s.early_timer = Some(timer);
    })))
}
