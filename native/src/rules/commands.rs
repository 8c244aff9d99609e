//! streams/core/rules/commands.py, function for function (see `super` for how to read it).

use super::*;

// _on_command
pub(super) fn on_command(slot: S, cmd: &Rc<Command>, ctx: &mut Ctx) -> R<S> {
    let Some((s, w)) = parked(&slot) else {
        return buffer_early_command(slot, cmd, ctx);
    };
    let new = command_on_wait(&w, cmd, ctx)?;
    Ok(with_wait(slot, &s, &w, new))
}

// _command_on_wait
pub(super) fn command_on_wait(w: &W, cmd: &Rc<Command>, ctx: &mut Ctx) -> R<W> {
    let outer = ctx.by.take();
    ctx.by = Some((cmd.operator.clone(), cmd.reason.clone()));
    let result = apply_command(w, cmd, ctx);
    ctx.by = outer;
    result
}

// _apply_command
pub(super) fn apply_command(w: &W, cmd: &Rc<Command>, ctx: &mut Ctx) -> R<W> {
    if cmd.operation_id.is_some() && !first_of_operation(w, cmd, ctx)? {
        return Ok(w.clone());
    }
    if w.status == WaitStatus::Done {
        ctx.reject(RejectReason::Late, format!("{}; {} does nothing", ended(w), cmd.command.value()), None);
        return Ok(w.clone());
    }
    let d = ctx.definition_of(w)?;
    if cmd.command == CommandKind::Cancel {
        return cancel(w, d.as_deref(), ctx, cmd);
    }
    if cmd.command == CommandKind::Migrate {
        return migrate(w, ctx, cmd);
    }
    let d = match d {
        Some(d) => d,
        None => {
            let m = missing_definition(ctx, w)?;
            ctx.reject(RejectReason::UnknownDefinition, m, None);
            return Ok(w.clone());
        }
    };
    match cmd.command {
        CommandKind::Suspend => suspend(w, ctx, cmd),
        CommandKind::Resume => resume(w, &d, ctx, cmd),
        CommandKind::Deliver => deliver(w, &d, ctx, cmd),
        CommandKind::Reschedule => reschedule(w, ctx, cmd),
        _ => review(w, &d, ctx, cmd),
    }
}

// operations.MAX_OPERATION_ID
pub(super) const MAX_OPERATION_ID: usize = 64;

// operations.operation_id_problem
pub(super) fn operation_id_problem(ctx: &Ctx, id: &str) -> R<Option<String>> {
    if id.is_empty() {
        return Ok(Some(format!("Expected an operation id, but got {}", ctx.repr(id)?)));
    }
    let length = id.chars().count();
    if length > MAX_OPERATION_ID {
        return Ok(Some(format!("Expected an operation id of at most {} characters, but it has {}", MAX_OPERATION_ID, length)));
    }
    if !id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')) {
        return Ok(Some(format!("Expected an operation id of letters, digits and . _ : - only, but got {}", ctx.repr(id)?)));
    }
    Ok(None)
}

// _first_of_operation
pub(super) fn first_of_operation(w: &Wait, cmd: &Command, ctx: &mut Ctx) -> R<bool> {
    let operation = cmd.operation_id.as_deref().unwrap_or("");
    if let Some(problem) = operation_id_problem(ctx, operation)? {
        ctx.reject(RejectReason::InvalidCommand, format!("{} (the command's operationId)", problem), None);
        return Ok(false);
    }
    let ending = format!(", operation {})", operation);
    if let Some(entry) = w.trace.iter().find(|e| e.detail.ends_with(&ending)) {
        let detail = format!("Expected a wait operation {} has not commanded yet, but it took the operation's command at {} ({}); this {} does nothing",
                             operation, format_utc_ms(entry.at), entry.event, cmd.command.value());
        ctx.reject(RejectReason::Duplicate, detail, None);
        return Ok(false);
    }
    Ok(true)
}

// _suspend
pub(super) fn suspend(w: &W, ctx: &mut Ctx, cmd: &Command) -> R<W> {
    if w.status == WaitStatus::Suspended {
        ctx.effects.push(Effect::Discard { reason: DiscardReason::AlreadySuspended,
                                           detail: "Expected a wait to suspend, but it is already suspended".into() });
        return Ok(w.clone());
    }
    let mut remaining = Vec::new();
    for t in timer_sorted(w.timers.clone()) {
        remaining.push((t.kind, sub(t.due_at, ctx.now)?));
    }
    let suspension = Suspension { reason: cmd.reason.clone(), at: ctx.now, resume_to: w.status, remaining, operator: cmd.operator.clone() };
    let w = with(w, |n| {
        n.status = WaitStatus::Suspended;
        n.suspension = Some(suspension);
        n.timers = vec![];
    });
    Ok(trace(&w, ctx.now, "suspended", signed(cmd)))
}

pub(super) enum HeldItem {
    Reply(HeldReply),
    Result(HeldResult),
}

// _resume
pub(super) fn resume(w: &W, d: &Definition, ctx: &mut Ctx, cmd: &Command) -> R<W> {
    let s = match (&w.suspension, w.status) {
        (Some(s), WaitStatus::Suspended) => s.clone(),
        _ => {
            ctx.effects.push(Effect::Discard { reason: DiscardReason::NotSuspended,
                                               detail: format!("Expected a suspended wait, but it is {}", w.status.value()) });
            return Ok(w.clone());
        }
    };
    let mut timers = Vec::new();
    for (kind, left) in &s.remaining {
        let at = add(ctx.now, *left)?;
        timers.push(ctx.arm(*kind, at));
    }
    let mut held: Vec<HeldItem> = w.held.iter().cloned().map(HeldItem::Reply)
        .chain(w.held_results.iter().cloned().map(HeldItem::Result)).collect();
    held.sort_by_key(|h| match h {
        HeldItem::Reply(r) => (r.received_at, false),
        HeldItem::Result(r) => (r.received_at, true),
    });
    let mut w = with(w, |n| {
        n.status = s.resume_to;
        n.suspension = None;
        n.timers = timers;
        n.held = vec![];
        n.held_results = vec![];
    });
    let paused = sub(ctx.now, s.at)?;
    w = shift_retries(&w, paused)?;
    w = trace(&w, ctx.now, "resumed", format!("after {} suspended: {}", format_span_ms(paused),
                                               signed(cmd)));
    let resumed_by = ctx.by.clone();
    for h in held {
        match h {
            HeldItem::Result(r) => {
                ctx.by = None;
                ctx.held_result = Some(r.result.clone());
                let got = on_result(&w, &r.result, ctx);
                ctx.held_result = None;
                w = got?;
            }
            HeldItem::Reply(h) => {
                if w.status != WaitStatus::Parked {
                    let detail = format!("Expected the wait to be waiting for a reply, but {}",
                                         if w.status == WaitStatus::Done { "it ended before this recorded reply was decided" }
                                         else { "an earlier reply won and is in review" });
                    ctx.reject(RejectReason::Late, detail, Some(h.reply.clone()));
                    continue;
                }
                let party = split_correlation_key(&h.reply.correlation_key).1.map(str::to_string);
                ctx.by = if h.by_operator { Some((h.operator.clone(), h.reason.clone())) } else { None };
                w = judge(&w, d, ctx, &h.reply.response_data, &h.reply.channel, party.as_deref(), Some(h.reply.clone()), h.by_operator)?;
            }
        }
    }
    ctx.by = resumed_by;
    Ok(w)
}

// _cancel
pub(super) fn cancel(w: &W, d: Option<&Definition>, ctx: &mut Ctx, cmd: &Command) -> R<W> {
    let mut w = trace(w, ctx.now, "cancelled", signed(cmd));
    if !w.held.is_empty() {
        let n = w.held.len();
        w = trace(&w, ctx.now, "undecided", format!("{} replies recorded while suspended were not decided", n));
    }
    if !w.held_results.is_empty() {
        let n = w.held_results.len();
        w = trace(&w, ctx.now, "undecided", format!("{} results recorded while suspended were not decided", n));
    }
    end(&w, d, ctx, OutcomeKind::Cancelled, OutcomeReason::CancelledByOperator, None)
}

// _deliver
pub(super) fn deliver(w: &W, d: &Definition, ctx: &mut Ctx, cmd: &Command) -> R<W> {
    let data = match &cmd.response_data {
        None => {
            ctx.reject(RejectReason::InvalidCommand, "Expected responseData with DELIVER, but none was given".into(), None);
            return Ok(w.clone());
        }
        Some(d) => d.clone(),
    };
    let reply = Rc::new(Reply { correlation_key: w.key.clone(), response_data: data.clone(), tenant: w.tenant.clone(),
                                channel: OPERATOR_CHANNEL.into(), reply_id: None, sent_at: None, origin: None });
    if w.status == WaitStatus::Suspended {
        if ctx.full_while_suspended("replies", w.held.len(), None) {
            return Ok(w.clone());
        }
        let now = ctx.now;
        let w = with(w, |n| n.held.push(HeldReply { reply, received_at: now, by_operator: true, seq: 0,
                                                     operator: cmd.operator.clone(), reason: cmd.reason.clone() }));
        return Ok(trace(&w, ctx.now, "delivery_recorded", signed(cmd)));
    }
    if w.status == WaitStatus::InReview {
        ctx.reject(RejectReason::InvalidCommand, "Expected a parked wait for DELIVER, but it is in review: answer with REVIEW".into(), None);
        return Ok(w.clone());
    }
    let w = trace(w, ctx.now, "delivered", signed(cmd));
    judge(&w, d, ctx, &data, OPERATOR_CHANNEL, None, None, true)
}

// _reschedule
pub(super) fn reschedule(w: &W, ctx: &mut Ctx, cmd: &Command) -> R<W> {
    let given: Vec<&str> = [("deadline", cmd.deadline.is_some()), ("moveBy", cmd.move_by.is_some())]
        .iter().filter(|(_, g)| *g).map(|(n, _)| *n).collect();
    if given.len() != 1 {
        let which = if given.is_empty() { "neither".to_string() } else { given.join(" and ") };
        ctx.reject(RejectReason::InvalidCommand, format!("Expected exactly one of deadline and moveBy with RESCHEDULE, but got {}", which), None);
        return Ok(w.clone());
    }
    let (to, shift): (Option<i64>, Option<i64>) = if let Some(text) = &cmd.deadline {
        match ctx.o.duration(text, false)? {
            Ok(ms) => (Some(ms), None),
            Err(m) => {
                ctx.reject(RejectReason::InvalidCommand, format!("{} (the RESCHEDULE's {})", m, given[0]), None);
                return Ok(w.clone());
            }
        }
    } else {
        match ctx.o.duration(cmd.move_by.as_deref().unwrap_or(""), true)? {
            Ok(ms) => (None, Some(ms)),
            Err(m) => {
                ctx.reject(RejectReason::InvalidCommand, format!("{} (the RESCHEDULE's {})", m, given[0]), None);
                return Ok(w.clone());
            }
        }
    };
    if w.status == WaitStatus::InReview {
        ctx.reject(RejectReason::InvalidCommand, "Expected a parked or suspended wait to reschedule, but it is in review: the reply under review stopped its deadline".into(), None);
        return Ok(w.clone());
    }
    let why = signed(cmd);
    if w.status == WaitStatus::Suspended {
        if let Some(s) = &w.suspension {
            let left = s.remaining.iter().find(|(k, _)| *k == TimerKind::Deadline).map(|(_, ms)| *ms);
            let left = match left {
                None => {
                    ctx.reject(RejectReason::InvalidCommand, "Expected a paused deadline to move, but the suspended wait has none".into(), None);
                    return Ok(w.clone());
                }
                Some(l) => l,
            };
            let new_left = match to {
                Some(t) => t,
                None => add(left, shift.unwrap_or(0))?,
            };
            if new_left <= 0 {
                let past = new_left.checked_neg().ok_or(Stop::Decline("overflow"))?;
                ctx.reject(RejectReason::DeadlinePassed, format!("Expected the moved deadline to leave time when the wait resumes, but it would be {} past", format_span_ms(past)), None);
                return Ok(w.clone());
            }
            let remaining: Vec<(TimerKind, i64)> = s.remaining.iter()
                .map(|(k, ms)| (*k, if *k == TimerKind::Deadline { new_left } else { *ms })).collect();
            let suspension = Suspension { reason: s.reason.clone(), at: s.at, resume_to: s.resume_to, remaining, operator: s.operator.clone() };
            let w = with(w, |n| n.suspension = Some(suspension));
            return Ok(trace(&w, ctx.now, "rescheduled", format!("deadline left on resume {} -> {}: {}",
                                                                   format_span_ms(left), format_span_ms(new_left), why)));
        }
    }
    let deadline_at = w.timers.iter().position(|t| t.kind == TimerKind::Deadline);
    let (index, deadline) = match deadline_at {
        None => {
            ctx.reject(RejectReason::InvalidCommand, format!("Expected an armed deadline to move, but the {} wait has none", w.status.value()), None);
            return Ok(w.clone());
        }
        Some(i) => (i, w.timers[i]),
    };
    let due = match to {
        Some(t) => add(ctx.now, t)?,
        None => add(deadline.due_at, shift.unwrap_or(0))?,
    };
    if due <= ctx.now {
        ctx.reject(RejectReason::DeadlinePassed, format!("Expected a new deadline after the command's time {}, but {} has passed",
                                                         format_utc_ms(ctx.now), format_utc_ms(due)), None);
        return Ok(w.clone());
    }
    let t = ctx.arm(TimerKind::Deadline, due);
    let w = with(w, |n| {
        n.timers.remove(index);
        n.timers.push(t);
    });
    let moved = sub(due, deadline.due_at)?;
    Ok(trace(&w, ctx.now, "rescheduled", format!("deadline {} -> {} ({}{}): {}", format_utc_ms(deadline.due_at), format_utc_ms(due),
                                                  if moved >= 0 { "+" } else { "" }, format_span_ms(moved), why)))
}

// _review
pub(super) fn review(w: &W, d: &Definition, ctx: &mut Ctx, cmd: &Command) -> R<W> {
    if w.status != WaitStatus::InReview {
        ctx.reject(RejectReason::InvalidCommand, format!("Expected the wait to be in review, but it is {}", w.status.value()), None);
        return Ok(w.clone());
    }
    let (data, valid, reason) = match cmd.review_outcome.as_deref() {
        Some("Accept") => (w.response_data.clone(), false, OutcomeReason::ReviewAccepted),
        Some("Submit Correction") => {
            if let Some(issue) = ctx.o.correction_issue(d, cmd.response_data.as_deref())? {
                ctx.reject(RejectReason::InvalidCommand, format!("{} (in the submitted correction)", issue), None);
                return Ok(w.clone());
            }
            (cmd.response_data.clone(), true, OutcomeReason::ReviewCorrected)
        }
        other => {
            let got = ctx.o.repr_opt(other)?;
            ctx.reject(RejectReason::InvalidCommand, format!("Expected reviewOutcome 'Accept' or 'Submit Correction', but got {}", got), None);
            return Ok(w.clone());
        }
    };
    let w = with(w, |n| {
        n.review_outcome = cmd.review_outcome.clone();
        n.review_note = cmd.review_note.clone();
        n.status = WaitStatus::Parked;
    });
    let texts: Vec<&str> = [cmd.review_note.as_deref(), cmd.reason.as_deref()].into_iter().flatten().filter(|t| !t.is_empty()).collect();
    let why = if texts.is_empty() { None } else { Some(texts.join("; ")) };
    let w = trace(&w, ctx.now, "reviewed", format!("{}: {}", cmd.review_outcome.as_deref().unwrap_or(""),
                                                    by(why.as_deref(), cmd.operator.as_deref(), cmd.operation_id.as_deref())));
    accept(&w, d, ctx, data.as_deref(), valid, reason, None)
}

// _migrate
pub(super) fn migrate(w: &W, ctx: &mut Ctx, cmd: &Command) -> R<W> {
    let target = match &cmd.version {
        None => ctx.o.newest(&w.definition),
        Some(v) => ctx.o.definition_for(&w.definition, Some(v))?,
    };
    let target = match target {
        None => {
            let which = match &cmd.version {
                None => "a newest version".to_string(),
                Some(v) => format!("version {}", ctx.repr(v)?),
            };
            let detail = format!("Expected {} of definition {} to migrate to, but it is not loaded", which, ctx.repr(&w.definition)?);
            ctx.reject(RejectReason::UnknownDefinition, detail, None);
            return Ok(w.clone());
        }
        Some(t) => t,
    };
    if let Some(v) = &w.definition_version {
        if target.version == *v {
            let detail = format!("Expected another version than {}, but the wait already follows it", ctx.repr(&target.version)?);
            ctx.effects.push(Effect::Discard { reason: DiscardReason::SameVersion, detail });
            return Ok(w.clone());
        }
    }
    let current = ctx.definition_of(w)?;
    if let Some(issue) = misfit(ctx, w, current.as_deref(), &target)? {
        ctx.reject(RejectReason::InvalidCommand, issue, None);
        return Ok(w.clone());
    }
    let old = w.definition_version.clone().filter(|v| !v.is_empty()).unwrap_or_else(|| "(none)".into());
    let new_version = if target.version.is_empty() { None } else { Some(target.version.clone()) };
    let w = with(w, |n| n.definition_version = new_version);
    let shown = if target.version.is_empty() { "(none)".to_string() } else { target.version.clone() };
    Ok(trace(&w, ctx.now, "migrated", format!("definition {} version {} -> {}: {}", w.definition, old, shown,
                                               signed(cmd))))
}

// _misfit
pub(super) fn misfit(ctx: &Ctx, w: &Wait, current: Option<&Definition>, target: &Definition) -> R<Option<String>> {
    if let Some(c) = current {
        if c.variant != target.variant {
            return Ok(Some(format!("Expected a version of the same variant {}, but version {} is {}",
                                   ctx.repr(c.variant.value())?, ctx.repr(&target.version)?, ctx.repr(target.variant.value())?)));
        }
    }
    if w.stage < 0 || w.stage as usize >= target.stages.len() {
        if w.stage < 0 {
            return decline("negative stage");
        }
        return Ok(Some(format!("Expected version {} to have the wait's stage {}, but it has {}",
                               ctx.repr(&target.version)?, w.stage + 1, target.stages.len())));
    }
    let levels = target.stages[w.stage as usize].escalation.len() as i64;
    if w.level > levels {
        return Ok(Some(format!("Expected version {} to have the wait's escalation level {}, but it has {}",
                               ctx.repr(&target.version)?, w.level, levels)));
    }
    Ok(None)
}
