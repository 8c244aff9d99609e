//! streams/core/rules/timers.py, function for function (see `super` for how to read it).

use super::*;

pub(super) fn stage_of(d: &Definition, w: &Wait) -> R<usize> {
    if w.stage < 0 || w.stage as usize >= d.stages.len() {
        return decline("stage out of range");
    }
    Ok(w.stage as usize)
}

// _open_stage
pub(super) fn open_stage(w: &W, d: &Definition, ctx: &mut Ctx, start: i64) -> R<W> {
    let si = stage_of(d, w)?;
    let mut w = w.clone();
    if d.variant == Variant::FirstValid {
        for p in w.parties.clone() {
            let payload = w.payload.clone();
            w = send(ctx, &w, d, ActionKind::SendRequest, Some(&p), 1, payload.as_deref())?;
        }
    } else {
        let payload = w.payload.clone();
        w = send(ctx, &w, d, ActionKind::SendRequest, d.stages[si].party.as_deref(), 1, payload.as_deref())?;
    }
    arm_phase(&w, d, ctx, start)
}

// _arm_phase
pub(super) fn arm_phase(w: &W, d: &Definition, ctx: &mut Ctx, start: i64) -> R<W> {
    let stage = &d.stages[stage_of(d, w)?];
    let deadline = if w.level == 0 {
        match w.deadline_override_ms {
            Some(o) if o != 0 => o,
            _ => stage.deadline_ms,
        }
    } else {
        match usize::try_from(w.level - 1).ok().and_then(|i| stage.escalation.get(i)) {
            Some(level) => level.deadline_ms,
            None => return decline("escalation level out of range"),
        }
    };
    let mut timers = vec![ctx.arm(TimerKind::Deadline, add(start, deadline)?)];
    if w.level == 0 {
        if let Some(r) = &stage.reminder {
            if w.stage_reminders < r.limit {
                let at = add(start, r.interval_ms)?;
                timers.push(ctx.arm(TimerKind::Reminder, at));
            }
        }
    }
    if d.variant == Variant::Probe {
        if let Some(p) = d.poll_interval_ms {
            let at = add(start, p)?;
            timers.push(ctx.arm(TimerKind::Poll, at));
        }
    }
    Ok(with(w, |n| n.timers = timers))
}

// _escalate
pub(super) fn escalate(w: &W, d: &Definition, ctx: &mut Ctx, exhausted: OutcomeReason) -> R<W> {
    let levels = d.stages[stage_of(d, w)?].escalation.clone();
    if w.level < 0 {
        return decline("negative level");
    }
    let mut w = w.clone();
    if w.level >= 0 && (w.level as usize) < levels.len() {
        let target = &levels[w.level as usize];
        w = with(&w, |n| {
            n.level += 1;
            n.status = WaitStatus::Parked;
            n.timers = vec![];
        });
        let payload = w.payload.clone();
        w = send(ctx, &w, d, ActionKind::RunEscalation, Some(&target.target), 1, payload.as_deref())?;
        let because = if exhausted == OutcomeReason::SendFailed { " (send_failed)" } else { "" };
        w = trace(&w, ctx.now, "escalated", format!("level {} to {}{}", w.level, target.target, because));
        return arm_phase(&w, d, ctx, ctx.now);
    }
    if levels.is_empty() {
        w = with(&w, |n| n.level = 1);
        let payload = w.payload.clone();
        w = send(ctx, &w, d, ActionKind::RunEscalation, None, 1, payload.as_deref())?;
        w = trace(&w, ctx.now, "escalated", "level 1 (no further level defined)".into());
    }
    end(&w, Some(d), ctx, OutcomeKind::Escalated, exhausted, None)
}

// _catch_up
pub(super) fn catch_up_slot(slot: S, until: i64, ctx: &mut Ctx) -> R<S> {
    let mut slot = slot;
    let mut fired = 0;
    while fired < MAX_CATCH_UP {
        let s = match &slot {
            Some(s) => s.clone(),
            None => break,
        };
        let timers = s.armed_in_any_order();
        let first = match timers.iter().min_by(|a, b| a.order_key().cmp(&b.order_key())) {
            Some(t) => *t,
            None => break,
        };
        if first.due_at > until {
            break;
        }
        ctx.now = first.due_at;
        slot = fire(&s, first, ctx)?;
        fired += 1;
        match &slot {
            None => ctx.generation = 1,
            Some(s) => {
                if s.armed_in_any_order().contains(&first) {
                    break;
                }
            }
        }
    }
    Ok(slot)
}

// _on_timer_record
pub(super) fn on_timer_record(slot: S, ev: &TimerFired, ctx: &mut Ctx) -> R<S> {
    ctx.now = ev.due_at;
    let armed = find_armed(&slot, ev);
    if slot.is_none() || armed.is_none() {
        let detail = format!("Expected an armed {} timer with generation {} due at {} under key {}, but there is none",
                             ev.kind.value(), ev.generation, ev.due_at, ctx.repr(&ev.wait_key)?);
        ctx.effects.push(Effect::Discard { reason: DiscardReason::StaleTimer, detail });
        return Ok(slot);
    }
    catch_up_slot(slot, ev.due_at, ctx)
}

// _fire
pub(super) fn fire(slot: &Rc<Slot>, armed: ArmedTimer, ctx: &mut Ctx) -> R<S> {
    if armed.kind == TimerKind::EarlyReply {
        return expire_early(slot, armed, ctx);
    }
    let w = match &slot.wait {
        Some(w) => w.clone(),
        None => return Ok(Some(slot.clone())),
    };
    if armed.kind == TimerKind::Retention {
        return Ok(None);
    }
    let d = ctx.definition_of(&w)?;
    let d = match d {
        None if w.status == WaitStatus::Done => {
            let w = with(&w, |n| n.timers.retain(|t| *t != armed));
            let missing = missing_definition(ctx, &w)?;
            let w = trace(&w, ctx.now, "send_retry_dropped", missing);
            return Ok(Some(with_slot(slot, |s| s.wait = Some(w))));
        }
        None => {
            let missing = missing_definition(ctx, &w)?;
            ctx.reject(RejectReason::UnknownDefinition, missing, None);
            return Ok(Some(slot.clone()));
        }
        Some(d) => d,
    };
    let mut w = with(&w, |n| n.timers.retain(|t| *t != armed));
    if armed.kind == TimerKind::SendRetry {
        let w = retry_sends(&w, &d, ctx)?;
        return Ok(Some(with_slot(slot, |s| s.wait = Some(w))));
    }
    if armed.kind == TimerKind::Reminder {
        w = remind(&w, &d, ctx)?;
    } else if armed.kind == TimerKind::Poll {
        let polls = w.polls + 1;
        w = with(&w, |n| n.polls = polls);
        act(ctx, &w, &d, ActionKind::Poll, None, polls, w.payload.clone().as_deref(), 1);
        w = trace(&w, ctx.now, "poll", format!("#{}", polls));
        if let Some(p) = d.poll_interval_ms {
            let at = add(ctx.now, p)?;
            let t = ctx.arm(TimerKind::Poll, at);
            w = with(&w, |n| n.timers.push(t));
        }
    } else {
        let level = w.level;
        w = trace(&with(&w, |n| n.timers = vec![]), ctx.now, "deadline_passed", format!("level {}", level));
        w = escalate(&w, &d, ctx, OutcomeReason::DeadlineExhausted)?;
    }
    Ok(Some(with_slot(slot, |s| s.wait = Some(w))))
}

// _find_armed
pub(super) fn find_armed(slot: &S, ev: &TimerFired) -> Option<ArmedTimer> {
    let slot = slot.as_ref()?;
    let candidates: Vec<ArmedTimer> = if ev.kind == TimerKind::EarlyReply {
        slot.early_timer.into_iter().collect()
    } else {
        slot.wait.as_ref().map(|w| w.timers.clone()).unwrap_or_default()
    };
    candidates.into_iter().find(|t| t.kind == ev.kind && t.generation == ev.generation && t.due_at == ev.due_at)
}

// _remind
pub(super) fn remind(w: &W, d: &Definition, ctx: &mut Ctx) -> R<W> {
    let si = stage_of(d, w)?;
    let n = w.stage_reminders + 1;
    let mut w = with(w, |x| {
        x.stage_reminders = n;
        x.reminders_sent += 1;
    });
    if d.variant == Variant::FirstValid {
        for p in w.parties.clone() {
            let payload = w.payload.clone();
            w = send(ctx, &w, d, ActionKind::SendReminder, Some(&p), n, payload.as_deref())?;
        }
    } else {
        let payload = w.payload.clone();
        w = send(ctx, &w, d, ActionKind::SendReminder, d.stages[si].party.as_deref(), n, payload.as_deref())?;
    }
    w = trace(&w, ctx.now, "reminder", format!("#{}", n));
    if let Some(r) = &d.stages[si].reminder {
        if n < r.limit {
            let at = add(ctx.now, r.interval_ms)?;
            let t = ctx.arm(TimerKind::Reminder, at);
            w = with(&w, |x| x.timers.push(t));
        }
    }
    Ok(w)
}
