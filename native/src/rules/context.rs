//! streams/core/rules/context.py, function for function (see `super` for how to read it).

use super::*;

// _act
#[allow(clippy::too_many_arguments)]
pub(super) fn act(ctx: &mut Ctx, w: &Wait, d: &Definition, kind: ActionKind, party: Option<&str>, attempt: i64,
       payload: Option<&str>, send_attempt: i64) {
    let per_party = d.variant == Variant::FirstValid && party.is_some_and(|p| w.parties.iter().any(|x| x == p));
    let key = if per_party { format!("{}{}{}", w.key, PARTY_SEPARATOR, party.unwrap()) } else { w.key.clone() };
    let first = action_id(&w.key, w.parked_at, kind.value(), w.stage, w.level, party, attempt, 1);
    let id = if send_attempt == 1 {
        first.clone()
    } else {
        action_id(&w.key, w.parked_at, kind.value(), w.stage, w.level, party, attempt, send_attempt)
    };
    ctx.effects.push(Effect::Action(EmitAction {
        action_id: id,
        correlation_key: key,
        definition: w.definition.clone(),
        tenant: w.tenant.clone(),
        action: kind,
        party: party.map(str::to_string),
        level: w.level,
        attempt,
        payload: payload.map(str::to_string),
        at: ctx.now,
        idempotency_key: first,
        send_attempt,
    }));
}

// _trace
pub(super) fn trace(w: &W, at: i64, event: &str, detail: String) -> W {
    with(w, |n| {
        n.trace.push(TraceEntry { at, event: event.to_string(), detail });
        if n.trace.len() > TRACE_HEAD + TRACE_TAIL {
            n.trace.remove(TRACE_HEAD);
            n.trace_dropped += 1;
        }
    })
}

// _remember_reply_id
pub(super) fn remember_reply_id(w: &W, reply: &Reply) -> W {
    match &reply.reply_id {
        None => w.clone(),
        Some(id) => with(w, |n| {
            n.reply_ids.push(id.clone());
            if n.reply_ids.len() > MAX_REPLY_IDS {
                let cut = n.reply_ids.len() - MAX_REPLY_IDS;
                n.reply_ids.drain(..cut);
            }
        }),
    }
}

// _ended
pub(super) fn ended(w: &Wait) -> String {
    let outcome = w.outcome.map(|o| o.value()).unwrap_or("?");
    let at = w.ended_at.map(format_utc_ms).unwrap_or_else(|| "?".to_string());
    format!("Expected a wait still waiting, but it ended {} at {}", outcome, at)
}

// _missing_definition
pub(super) fn missing_definition(ctx: &Ctx, w: &Wait) -> R<String> {
    let which = match &w.definition_version {
        None => format!("definition {}", ctx.repr(&w.definition)?),
        Some(v) => format!("version {} of definition {}", ctx.repr(v)?, ctx.repr(&w.definition)?),
    };
    Ok(format!("Expected {} of wait {} to be loaded, but it is not; restore it to let the wait finish",
               which, ctx.repr(&w.key)?))
}

// _who
pub(super) fn who(ctx: &Ctx, channel: &str, party: Option<&str>) -> R<String> {
    let mut s = format!("channel {}", ctx.repr(channel)?);
    if let Some(p) = party {
        s.push_str(&format!(", party {}", ctx.repr(p)?));
    }
    Ok(s)
}

// _by (operations.by)
pub(super) fn by(reason: Option<&str>, operator: Option<&str>, operation_id: Option<&str>) -> String {
    let reason = reason.filter(|r| !r.is_empty()).unwrap_or("no reason given");
    let operator = operator.filter(|r| !r.is_empty()).unwrap_or("unknown operator");
    match operation_id.filter(|o| !o.is_empty()) {
        Some(op) => format!("{} (by {}, operation {})", reason, operator, op),
        None => format!("{} (by {})", reason, operator),
    }
}

// _signed
pub(super) fn signed(cmd: &Command) -> String {
    by(cmd.reason.as_deref(), cmd.operator.as_deref(), cmd.operation_id.as_deref())
}
