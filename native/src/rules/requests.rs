//! streams/core/rules/requests.py, function for function (see `super` for how to read it).

use super::*;

// _on_start
pub(super) fn on_start(slot: S, ev: &StartWait, ctx: &mut Ctx) -> R<S> {
    let key = &ev.correlation_key;
    if key.is_empty() || key.contains(PARTY_SEPARATOR) {
        let detail = format!("Expected a correlation key without '{}', but got {}", PARTY_SEPARATOR, ctx.repr(key)?);
        ctx.reject(RejectReason::InvalidRequest, detail, None);
        return Ok(slot);
    }
    if let Some(s) = &slot {
        if let Some(w) = &s.wait {
            let detail = format!("Expected no wait under key {}, but one parked at {} is {}",
                                 ctx.repr(key)?, format_utc_ms(w.parked_at), w.status.value());
            ctx.reject(RejectReason::Duplicate, detail, None);
            return Ok(slot);
        }
    }
    let d = match ctx.o.newest(&ev.definition) {
        Some(d) => d,
        None => {
            let names = ctx.o.repr_list(&ctx.o.defs.sorted_names)?;
            let detail = format!("Expected one of the definitions {}, but the request names {}", names, ctx.repr(&ev.definition)?);
            ctx.reject(RejectReason::UnknownDefinition, detail, None);
            return Ok(slot);
        }
    };
    let mut deadline_override: Option<i64> = None;
    if let Some(text) = &ev.deadline {
        match ctx.o.duration(text, false)? {
            Ok(ms) => deadline_override = Some(ms),
            Err(message) => {
                ctx.reject(RejectReason::InvalidRequest, format!("{} (the request's deadline)", message), None);
                return Ok(slot);
            }
        }
    }
    let parties: Vec<String> = if ev.parties.is_empty() { d.parties.clone() } else { ev.parties.clone() };
    if d.variant == Variant::FirstValid && parties.is_empty() {
        let detail = format!("Expected parties for the first-valid definition {}, but neither the request nor the definition names any",
                             ctx.repr(&d.name)?);
        ctx.reject(RejectReason::InvalidRequest, detail, None);
        return Ok(slot);
    }
    let distinct = parties.iter().enumerate().all(|(i, p)| !parties[..i].contains(p));
    if !distinct || parties.iter().any(|p| p.is_empty() || p.contains(PARTY_SEPARATOR)) {
        let detail = format!("Expected distinct, non-empty party names without '{}', but got {}",
                             PARTY_SEPARATOR, ctx.o.repr_list(&parties)?);
        ctx.reject(RejectReason::InvalidRequest, detail, None);
        return Ok(slot);
    }
    let parked_at = ev.requested_at.min(ctx.now);
    let mut wait = Wait::new(key.clone(), d.name.clone(), ev.tenant.clone(), parked_at);
    wait.payload = ev.payload.clone();
    wait.parties = parties;
    wait.deadline_override_ms = deadline_override;
    wait.trace = vec![TraceEntry { at: parked_at, event: "requested".into(), detail: format!("definition {}", d.name) }];
    wait.definition_version = if d.version.is_empty() { None } else { Some(d.version.clone()) };
    let wait = open_stage(&Rc::new(wait), &d, ctx, parked_at)?;
    match &slot {
        Some(s) if !(s.early_replies.is_empty() && s.early_commands.is_empty()) => {
            let s = s.clone();
            let parked = apply_early(&wait, &d, &s, ctx)?;
            Ok(match (parked, &ev.traceparent) {
                (Some(p), Some(tp)) => Some(with_slot(&p, |x| x.traceparent = Some(tp.clone()))),
                (parked, _) => parked,
            })
        }
        _ => {
            let mut s = Slot::empty();
            s.wait = Some(wait);
            s.next_generation = ctx.generation;
            s.traceparent = ev.traceparent.clone();
            Ok(Some(Rc::new(s)))
        }
    }
}

// _apply_early
pub(super) fn apply_early(wait: &W, d: &Definition, held_by: &Slot, ctx: &mut Ctx) -> R<S> {
    let request_at = ctx.now;
    let mut s0 = Slot::empty();
    s0.wait = Some(wait.clone());
    let mut slot: S = Some(Rc::new(s0));
    let mut early: Vec<Held> = held_by.early_replies.iter().cloned().map(Held::Reply)
        .chain(held_by.early_commands.iter().cloned().map(Held::Command)).collect();
    early.sort_by_key(|h| (h.received_at(), h.seq())); // stable, as Python's sorted
    for held in &early {
        let waited = sub(request_at, held.received_at())?;
        if waited > d.early_reply_ttl_ms {
            let detail = format!("Expected the request within the early-reply TTL of {} of the {}, but it came {} later",
                                 format_span_ms(d.early_reply_ttl_ms), held.what(), format_span_ms(waited));
            refuse_held(held, ctx, detail, false);
            continue;
        }
        let at = held.received_at().max(wait.parked_at);
        slot = catch_up_slot(slot, at, ctx)?;
        ctx.now = at;
        let Some((current, w)) = parked(&slot) else {
            let detail = format!("Expected the wait {} to be kept when the {} was appended, but it had ended and its retention had passed",
                                 ctx.repr(&wait.key)?, held.what());
            refuse_held(held, ctx, detail, true);
            continue;
        };
        let decided = match held {
            Held::Reply(h) => on_reply(&w, &h.reply, d, ctx, true)?,
            Held::Command(h) => {
                ctx.held_command = Some(h.command.clone());
                let r = command_on_wait(&w, &h.command, ctx);
                ctx.held_command = None;
                r?
            }
        };
        slot = Some(with_slot(&current, |s| s.wait = Some(decided)));
    }
    Ok(slot)
}
