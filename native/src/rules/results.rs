//! streams/core/rules/results.py, function for function (see `super` for how to read it).

use super::*;

// _on_result_record
pub(super) fn on_result_record(slot: S, res: &Rc<ActionResult>, ctx: &mut Ctx) -> R<S> {
    let Some((s, w)) = parked(&slot) else {
        let key = split_correlation_key(&res.correlation_key).0.to_string();
        let detail = format!("Expected a wait under key {} for the result of action {}, but there is none",
                             ctx.repr(&key)?, ctx.repr(&res.action_id)?);
        ctx.reject(RejectReason::Unmatched, detail, None);
        return Ok(slot);
    };
    let new = on_result(&w, res, ctx)?;
    Ok(with_wait(slot, &s, &w, new))
}

// _on_result
pub(super) fn on_result(w: &W, res: &Rc<ActionResult>, ctx: &mut Ctx) -> R<W> {
    let key = split_correlation_key(&res.correlation_key).0;
    if key != w.key {
        let detail = format!("Expected correlation key {}, but the result carries {}", ctx.repr(&w.key)?, ctx.repr(key)?);
        ctx.reject(RejectReason::Unmatched, detail, None);
        return Ok(w.clone());
    }
    if w.status == WaitStatus::Suspended {
        if ctx.full_while_suspended("results", w.held_results.len(), None) {
            return Ok(w.clone());
        }
        let now = ctx.now;
        let w = with(w, |n| n.held_results.push(HeldResult { result: res.clone(), received_at: now }));
        return Ok(trace(&w, ctx.now, "result_recorded", format!("{} {}", res.status.value(), res.action_id)));
    }
    let d = ctx.definition_of(w)?;
    let sends = all_sends(w, d.as_deref());
    let found = find_send(w, &sends, &res.action_id);
    let (send, tries) = match found {
        None => {
            if w.status == WaitStatus::Done {
                let detail = format!("{}; the result of action {} changes nothing", ended(w), ctx.repr(&res.action_id)?);
                ctx.reject(RejectReason::Late, detail, None);
            } else {
                let detail = format!("Expected the id of an action this wait sent and takes results for (SEND_REQUEST, SEND_REMINDER, RUN_ESCALATION), but {} is none of them",
                                     ctx.repr(&res.action_id)?);
                ctx.reject(RejectReason::Unmatched, detail, None);
            }
            return Ok(w.clone());
        }
        Some(f) => f,
    };
    if w.status == WaitStatus::InReview {
        let detail = format!("Expected the wait to be waiting for a reply, but an earlier reply won and is in review; the result of {} changes nothing", what(&send));
        ctx.reject(RejectReason::Late, detail, None);
        return Ok(w.clone());
    }
    if tries < send.tries {
        let detail = format!("Expected a result of send attempt {} of {}, but this is one of attempt {}", send.tries, what(&send), tries);
        ctx.effects.push(Effect::Discard { reason: DiscardReason::StaleResult, detail });
        return Ok(w.clone());
    }
    if res.status == ResultStatus::Delivered {
        return delivered(w, d.as_deref(), &send, ctx);
    }
    failed(w, d.as_deref(), &sends, &send, res, ctx)
}

// _find_send
pub(super) fn find_send(w: &Wait, sends: &[Send], wanted: &str) -> Option<(Send, i64)> {
    for s in sends {
        for tries in 1..=s.tries {
            if action_id(&w.key, w.parked_at, s.kind.value(), s.stage, s.level, s.party.as_deref(), s.attempt, tries) == wanted {
                return Some((s.clone(), tries));
            }
        }
    }
    None
}

// _delivered
pub(super) fn delivered(w: &W, d: Option<&Definition>, send: &Send, ctx: &mut Ctx) -> R<W> {
    if send.state == SendState::Delivered {
        ctx.effects.push(Effect::Discard { reason: DiscardReason::DuplicateResult,
                                           detail: format!("Expected one result of {}, but it was already reported delivered", what(send)) });
        return Ok(w.clone());
    }
    if send.state == SendState::Failed {
        let error = match &send.error {
            None => "None".to_string(),
            Some(e) => e.clone(),
        };
        ctx.reject(RejectReason::Duplicate, format!("Expected one result of {}, but it already failed for good ({})", what(send), error), None);
        return Ok(w.clone());
    }
    let mut s = send.clone();
    s.state = SendState::Delivered;
    s.retry_at = None;
    let w = stored(w, s);
    let w = trace(&w, ctx.now, "send_delivered", format!("{}, send attempt {}", what(send), send.tries));
    sync_retry(&w, d, ctx)
}

// _failed
pub(super) fn failed(w: &W, d: Option<&Definition>, sends: &[Send], send: &Send, res: &ActionResult, ctx: &mut Ctx) -> R<W> {
    if send.state == SendState::Delivered {
        ctx.reject(RejectReason::Duplicate, format!("Expected one result of {}, but it was already reported delivered", what(send)), None);
        return Ok(w.clone());
    }
    if matches!(send.state, SendState::Retrying | SendState::Failed) {
        ctx.effects.push(Effect::Discard { reason: DiscardReason::DuplicateResult,
                                           detail: format!("Expected one result of {}, but its failure was already reported", what(send)) });
        return Ok(w.clone());
    }
    let error = res.error.clone().filter(|e| !e.is_empty()).unwrap_or_else(|| "no error given".into());
    let what_tries = format!("{}, send attempt {}", what(send), send.tries);
    let policy = d.and_then(|d| d.on_send_failure.clone());
    let (d, policy) = match (d, policy) {
        (Some(d), Some(p)) if is_current(w, send, sends) => (d, p),
        (_, p) => {
            let note = if p.is_some() { "the wait has moved on: not sent again" } else { "the definition declares no on_send_failure" };
            let mut s = send.clone();
            s.state = SendState::Failed;
            s.error = Some(error.clone());
            let w = stored(w, s);
            let w = trace(&w, ctx.now, "send_failed", format!("{}: {} ({})", what_tries, error, note));
            return sync_retry(&w, d, ctx);
        }
    };
    if !res.permanent && send.tries <= policy.retries {
        let at = add(ctx.now, policy.backoff_ms)?;
        let mut s = send.clone();
        s.state = SendState::Retrying;
        s.retry_at = Some(at);
        s.error = Some(error.clone());
        let w = stored(w, s);
        let w = trace(&w, ctx.now, "send_failed", format!("{}: {}; retry {} of {} at {}", what_tries, error, send.tries, policy.retries, format_utc_ms(at)));
        return sync_retry(&w, Some(d), ctx);
    }
    let why = if res.permanent { "permanent".to_string() } else { format!("no retry left of {}", policy.retries) };
    let mut failed_send = send.clone();
    failed_send.state = SendState::Failed;
    failed_send.error = Some(error.clone());
    let send_error = format!("{}: {}", what(send), error);
    let w = with(&stored(w, failed_send.clone()), |n| n.send_error = Some(send_error));
    let w = trace(&w, ctx.now, "send_failed", format!("{}: {} ({})", what_tries, error, why));
    let w = sync_retry(&w, Some(d), ctx)?;
    take_path(&w, d, &failed_send, ctx, policy.then)
}

// _take_path
pub(super) fn take_path(w: &W, d: &Definition, send: &Send, ctx: &mut Ctx, then: SendFailureRoute) -> R<W> {
    if w.status == WaitStatus::Done {
        return review_send(w, d, send, ctx);
    }
    if d.variant == Variant::FirstValid && send.kind != ActionKind::RunEscalation {
        let mut reachable = reachable_parties(w, d);
        if !reachable.is_empty() {
            reachable.sort();
            let shown = ctx.o.repr_list(&reachable)?;
            return Ok(trace(w, ctx.now, "send_failed_path", format!("not taken: parties {} may still answer", shown)));
        }
    }
    if then == SendFailureRoute::Escalate {
        return escalate(&with(w, |n| n.timers = vec![]), d, ctx, OutcomeReason::SendFailed);
    }
    review_send(w, d, send, ctx)
}

// _reachable_parties
pub(super) fn reachable_parties(w: &Wait, d: &Definition) -> Vec<String> {
    let mut latest: Vec<(String, SendState)> = vec![];
    for s in all_sends(w, Some(d)) {
        if s.kind != ActionKind::RunEscalation && (s.stage, s.level) == (w.stage, w.level) {
            if let Some(p) = &s.party {
                match latest.iter_mut().find(|(q, _)| q == p) {
                    Some(entry) => entry.1 = s.state,
                    None => latest.push((p.clone(), s.state)),
                }
            }
        }
    }
    let mut out: Vec<String> = vec![];
    for p in &w.parties {
        let state = latest.iter().find(|(q, _)| q == p).map(|(_, s)| *s);
        if state != Some(SendState::Failed) && !out.contains(p) {
            out.push(p.clone());
        }
    }
    out
}

// _review_send
pub(super) fn review_send(w: &W, d: &Definition, send: &Send, ctx: &mut Ctx) -> R<W> {
    let reviews = w.reviews + 1;
    let w = with(w, |n| n.reviews = reviews);
    let error_text = send.error.clone().unwrap_or_else(|| "None".into());
    let issue = format!("send_failed: {}: {}", what(send), error_text);
    let failed_id = action_id(&w.key, w.parked_at, send.kind.value(), send.stage, send.level, send.party.as_deref(), send.attempt, send.tries);
    let mut payload = Vec::new();
    pyjson(&mut payload, &PyJ::Obj(vec![
        ("sendFailed", PyJ::Obj(vec![
            ("actionId", PyJ::Str(&failed_id)),
            ("action", PyJ::Str(send.kind.value())),
            ("party", PyJ::OptStr(send.party.as_deref())),
            ("level", PyJ::Int(send.level)),
            ("attempt", PyJ::Int(send.attempt)),
            ("sendAttempts", PyJ::Int(send.tries)),
            ("error", PyJ::OptStr(send.error.as_deref())),
        ])),
        ("validationIssue", PyJ::Str(&issue)),
    ]));
    let payload = String::from_utf8(payload).unwrap();
    act(ctx, &w, d, ActionKind::ReviewNeeded, None, reviews, Some(&payload), 1);
    Ok(trace(&w, ctx.now, "review_needed", issue))
}
