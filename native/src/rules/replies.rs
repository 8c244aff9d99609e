//! streams/core/rules/replies.py, function for function (see `super` for how to read it).

use super::*;

// _on_reply_record
pub(super) fn on_reply_record(slot: S, reply: &Rc<Reply>, ctx: &mut Ctx) -> R<S> {
    let Some((s, w)) = parked(&slot) else {
        return buffer_early(slot, reply, ctx);
    };
    let d = match ctx.definition_of(&w)? {
        Some(d) => d,
        None => {
            let m = missing_definition(ctx, &w)?;
            ctx.reject(RejectReason::UnknownDefinition, m, None);
            return Ok(slot);
        }
    };
    let new = on_reply(&w, reply, &d, ctx, false)?;
    Ok(with_wait(slot, &s, &w, new))
}

// _on_reply
pub(super) fn on_reply(w: &W, reply: &Rc<Reply>, d: &Definition, ctx: &mut Ctx, held: bool) -> R<W> {
    let about = if held { Some(reply.clone()) } else { None };
    let (key, party) = split_correlation_key(&reply.correlation_key);
    if key != w.key {
        let detail = format!("Expected correlation key {}, but the reply carries {}", ctx.repr(&w.key)?, ctx.repr(key)?);
        ctx.reject(RejectReason::Unmatched, detail, about);
        return Ok(w.clone());
    }
    if let Some(p) = party {
        if !w.parties.iter().any(|x| x == p) {
            let detail = format!("Expected a party of this wait {}, but the reply names {}", ctx.o.repr_list(&w.parties)?, ctx.repr(p)?);
            ctx.reject(RejectReason::Unmatched, detail, about);
            return Ok(w.clone());
        }
    }
    if party.is_none() && d.variant == Variant::FirstValid {
        let detail = format!("Expected a per-party key {}{}PARTY, but the reply carries {}", w.key, PARTY_SEPARATOR, ctx.repr(&reply.correlation_key)?);
        ctx.reject(RejectReason::Unmatched, detail, about);
        return Ok(w.clone());
    }
    if reply.tenant != w.tenant {
        let detail = format!("Expected tenant {}, but the reply is from {}", ctx.o.repr_opt(w.tenant.as_deref())?, ctx.o.repr_opt(reply.tenant.as_deref())?);
        ctx.reject(RejectReason::TenantMismatch, detail, about);
        return Ok(w.clone());
    }
    if let Some(id) = &reply.reply_id {
        if w.reply_ids.contains(id) {
            let detail = format!("Expected a new reply id, but {} was already seen by this wait", ctx.repr(id)?);
            ctx.reject(RejectReason::Duplicate, detail, about);
            return Ok(w.clone());
        }
    }
    if w.status == WaitStatus::Done {
        ctx.reject(RejectReason::Late, ended(w), about);
        return Ok(w.clone());
    }
    if w.status == WaitStatus::InReview {
        ctx.reject(RejectReason::Late, "Expected the wait to be waiting for a reply, but an earlier reply won and is in review".into(), about);
        return Ok(w.clone());
    }
    if w.status == WaitStatus::Suspended {
        if ctx.full_while_suspended("replies", w.held.len(), about) {
            return Ok(w.clone());
        }
        let w = remember_reply_id(w, reply);
        let now = ctx.now;
        let w = with(&w, |n| n.held.push(HeldReply { reply: reply.clone(), received_at: now, by_operator: false, seq: 0, operator: None, reason: None }));
        let who = who(ctx, &reply.channel, party)?;
        return Ok(trace(&w, ctx.now, "reply_recorded", who));
    }
    let w = remember_reply_id(w, reply);
    let party = party.map(str::to_string);
    judge(&w, d, ctx, &reply.response_data, &reply.channel, party.as_deref(), about, false)
}

// _judge
#[allow(clippy::too_many_arguments)]
pub(super) fn judge(w: &W, d: &Definition, ctx: &mut Ctx, data: &str, channel: &str, party: Option<&str>,
         about: Option<Rc<Reply>>, by_operator: bool) -> R<W> {
    let verdict = ctx.o.reply_verdict(d, data, channel, by_operator)?;
    if verdict.not_ready {
        return Ok(trace(w, ctx.now, "poll_result", "not ready; polling goes on".into()));
    }
    let who = who(ctx, channel, party)?;
    if d.variant == Variant::FirstValid {
        if let Some(issue) = &verdict.issue {
            ctx.reject(RejectReason::Unacceptable, format!("{}; the wait goes on", issue), about);
            return Ok(trace(w, ctx.now, "reply_unacceptable", format!("{}: {}", who, issue)));
        }
    }
    if let Some(issue) = verdict.issue {
        let w = with(w, |n| {
            n.response_data = Some(data.to_string());
            n.response_valid = false;
            n.validation_issue = Some(issue.clone());
        });
        let w = trace(&w, ctx.now, "reply_invalid", format!("{}: {}", who, issue));
        if d.invalid_reply_escalate {
            return escalate(&with(&w, |n| n.timers = vec![]), d, ctx, OutcomeReason::InvalidReplyEscalated);
        }
        return to_review(&w, d, ctx, channel);
    }
    let reason = if by_operator {
        OutcomeReason::Delivered
    } else if d.variant == Variant::Probe {
        OutcomeReason::ResultReady
    } else {
        OutcomeReason::ReplyValid
    };
    let w = trace(w, ctx.now, "reply_valid", who);
    accept(&w, d, ctx, Some(data), true, reason, party)
}

// _to_review
pub(super) fn to_review(w: &W, d: &Definition, ctx: &mut Ctx, channel: &str) -> R<W> {
    let reviews = w.reviews + 1;
    let w = with(w, |n| {
        n.status = WaitStatus::InReview;
        n.timers = vec![];
        n.reviews = reviews;
    });
    let mut payload = Vec::new();
    pyjson(&mut payload, &PyJ::Obj(vec![
        ("responseData", PyJ::OptStr(w.response_data.as_deref())),
        ("validationIssue", PyJ::OptStr(w.validation_issue.as_deref())),
        ("channel", PyJ::Str(channel)),
    ]));
    let payload = String::from_utf8(payload).unwrap();
    act(ctx, &w, d, ActionKind::ReviewNeeded, None, reviews, Some(&payload), 1);
    let issue = w.validation_issue.clone().unwrap_or_default();
    Ok(trace(&w, ctx.now, "review_needed", issue))
}

// _accept
#[allow(clippy::too_many_arguments)]
pub(super) fn accept(w: &W, d: &Definition, ctx: &mut Ctx, data: Option<&str>, valid: bool, reason: OutcomeReason,
          winner: Option<&str>) -> R<W> {
    let mut w = with(w, |n| {
        n.response_data = data.map(str::to_string);
        n.response_valid = valid;
    });
    if d.variant == Variant::Chained && w.stage >= 0 && ((w.stage + 1) as usize) < d.stages.len() {
        let done_stage = d.stages[stage_of(d, &w)?].name.clone();
        w = with(&w, |n| {
            n.stage += 1;
            n.level = 0;
            n.stage_reminders = 0;
            n.status = WaitStatus::Parked;
            n.stage_results.push(data.unwrap_or("").to_string());
            n.timers = vec![];
        });
        w = trace(&w, ctx.now, "stage_completed", format!("{} ({})", done_stage, reason.value()));
        return open_stage(&w, d, ctx, ctx.now);
    }
    if d.variant == Variant::Chained {
        let mut results = w.stage_results.clone();
        results.push(data.unwrap_or("").to_string());
        let combined = ctx.o.combine_stages(d, &results)?;
        w = with(&w, |n| n.response_data = Some(combined));
    }
    end(&w, Some(d), ctx, OutcomeKind::Received, reason, winner)
}
