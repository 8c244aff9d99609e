//! streams/core/rules/ending.py, function for function (see `super` for how to read it).

use super::*;

// emitted_trace
pub fn emitted_trace(w: &Wait) -> Vec<TraceEntry> {
    if w.trace_dropped == 0 {
        return w.trace.clone();
    }
    let head = &w.trace[..TRACE_HEAD.min(w.trace.len())];
    let tail = &w.trace[TRACE_HEAD.min(w.trace.len())..];
    let at = if let Some(t) = tail.first() { t.at } else { head.last().map(|t| t.at).unwrap_or(0) };
    let mut out = head.to_vec();
    out.push(TraceEntry { at, event: "trace_truncated".into(), detail: format!("{} entries omitted", w.trace_dropped) });
    out.extend_from_slice(tail);
    out
}

// _end
pub(super) fn end(w: &W, d: Option<&Definition>, ctx: &mut Ctx, kind: OutcomeKind, reason: OutcomeReason,
       winner: Option<&str>) -> R<W> {
    let w = trace(w, ctx.now, "ended", format!("{} ({})", kind.value(), reason.value()));
    let (operator, operator_reason) = ctx.by.clone().unwrap_or((None, None));
    ctx.effects.push(Effect::Outcome(EmitOutcome {
        outcome_id: outcome_id(&w.key, w.parked_at),
        correlation_key: w.key.clone(),
        definition: w.definition.clone(),
        tenant: w.tenant.clone(),
        outcome: kind,
        reason,
        response_data: w.response_data.clone(),
        response_valid: w.response_valid,
        validation_issue: w.validation_issue.clone(),
        review_outcome: w.review_outcome.clone(),
        review_note: w.review_note.clone(),
        reminders_sent: w.reminders_sent,
        escalation_level: w.level,
        parked_at: w.parked_at,
        ended_at: ctx.now,
        trace: emitted_trace(&w),
        operator: operator.clone(),
        operator_reason: operator_reason.clone(),
        send_error: w.send_error.clone(),
        definition_version: w.definition_version.clone(),
    }));
    if let Some(d) = d {
        if d.variant == Variant::FirstValid {
            for p in w.parties.clone() {
                if Some(p.as_str()) != winner {
                    act(ctx, &w, d, ActionKind::CloseOut, Some(&p), 1, None, 1);
                }
            }
        }
    }
    let retention = d.map(|d| d.retention_ms).unwrap_or(DEFAULT_RETENTION_MS);
    let keep_payload = w.payload.as_ref().is_none_or(|p| p.len() <= KEPT_PAYLOAD_BYTES);
    let sends: Vec<Send> = w.sends.iter().filter(|s| {
        kind == OutcomeKind::Escalated && s.kind == ActionKind::RunEscalation
            && (s.stage, s.level) == (w.stage, w.level)
            && matches!(s.state, SendState::Pending | SendState::Retrying)
    }).cloned().collect();
    let retention_at = add(ctx.now, retention)?;
    let timer = ctx.arm(TimerKind::Retention, retention_at);
    let mut done = Wait::new(w.key.clone(), w.definition.clone(), w.tenant.clone(), w.parked_at);
    done.status = WaitStatus::Done;
    done.payload = if keep_payload { w.payload.clone() } else { None };
    done.payload_dropped = !keep_payload;
    done.parties = w.parties.clone();
    done.deadline_override_ms = w.deadline_override_ms;
    done.stage = w.stage;
    done.level = w.level;
    done.reminders_sent = w.reminders_sent;
    done.polls = w.polls;
    done.reviews = w.reviews;
    done.response_data = w.response_data.clone();
    done.response_valid = w.response_valid;
    done.validation_issue = w.validation_issue.clone();
    done.review_outcome = w.review_outcome.clone();
    done.review_note = w.review_note.clone();
    done.outcome = Some(kind);
    done.reason = Some(reason);
    done.ended_at = Some(ctx.now);
    done.reply_ids = w.reply_ids.clone();
    done.trace = w.trace.clone();
    done.trace_dropped = w.trace_dropped;
    done.operator = operator;
    done.operator_reason = operator_reason;
    done.timers = vec![timer];
    done.send_error = w.send_error.clone();
    done.definition_version = w.definition_version.clone();
    let has_sends = !sends.is_empty();
    done.sends = sends;
    let done = Rc::new(done);
    if has_sends {
        sync_retry(&done, d, ctx)
    } else {
        Ok(done)
    }
}
