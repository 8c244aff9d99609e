//! streams/core/rules/sends.py, function for function (see `super` for how to read it).

use super::*;

pub(super) fn what(send: &Send) -> String {
    let mut text = send.kind.value().to_string();
    if send.kind == ActionKind::SendReminder {
        text.push_str(&format!(" #{}", send.attempt));
    }
    if send.kind == ActionKind::RunEscalation {
        text.push_str(&format!(" (level {})", send.level));
    }
    if let Some(p) = &send.party {
        text.push_str(&format!(" to {}", p));
    }
    text
}

// _send
#[allow(clippy::too_many_arguments)]
pub(super) fn send(ctx: &mut Ctx, w: &W, d: &Definition, kind: ActionKind, party: Option<&str>, attempt: i64,
        payload: Option<&str>) -> R<W> {
    act(ctx, w, d, kind, party, attempt, payload, 1);
    if w.sends.iter().any(|s| s.state == SendState::Retrying) {
        return sync_retry(w, Some(d), ctx);
    }
    Ok(w.clone())
}

// _derived
pub(super) fn derived(w: &Wait, d: Option<&Definition>) -> Vec<Send> {
    let d = match d {
        Some(d) if (w.stage as usize) < d.stages.len() && w.stage >= 0 => d,
        _ => return vec![],
    };
    let stage = &d.stages[w.stage as usize];
    let parties: Vec<Option<String>> = if d.variant == Variant::FirstValid && !w.parties.is_empty() {
        w.parties.iter().map(|p| Some(p.clone())).collect()
    } else {
        vec![stage.party.clone()]
    };
    let levels = &stage.escalation;
    let escalations: Vec<Send> = (1..=w.level)
        .map(|n| Send::new(ActionKind::RunEscalation, w.stage, n,
                           if (n as usize) <= levels.len() { Some(levels[n as usize - 1].target.clone()) } else { None }, 1))
        .collect();
    if w.status == WaitStatus::Done {
        return if w.outcome == Some(OutcomeKind::Escalated) {
            escalations.last().cloned().into_iter().collect()
        } else {
            vec![]
        };
    }
    let mut sent: Vec<Send> = parties.iter().map(|p| Send::new(ActionKind::SendRequest, w.stage, 0, p.clone(), 1)).collect();
    for n in 1..=w.stage_reminders {
        for p in &parties {
            sent.push(Send::new(ActionKind::SendReminder, w.stage, 0, p.clone(), n));
        }
    }
    sent.extend(escalations);
    sent
}

// _all_sends
pub(super) fn all_sends(w: &Wait, d: Option<&Definition>) -> Vec<Send> {
    let derived = derived(w, d);
    let mut out: Vec<Send> = w.sends.iter().filter(|s| !derived.iter().any(|x| x.same_id(s))).cloned().collect();
    for s in derived {
        // {_id(s): s for s in w.sends}: the last stored one of an identity stands for it
        match w.sends.iter().rev().find(|x| x.same_id(&s)) {
            Some(stored) => out.push(stored.clone()),
            None => out.push(s),
        }
    }
    out
}

// _is_current
pub(super) fn is_current(w: &Wait, send: &Send, sends: &[Send]) -> bool {
    if (send.stage, send.level) != (w.stage, w.level) {
        return false;
    }
    if w.status == WaitStatus::Done && send.kind != ActionKind::RunEscalation {
        return false;
    }
    let later: &[Send] = match sends.iter().position(|s| s.same_id(send)) {
        Some(i) => &sends[i + 1..],
        None => &[],
    };
    !later.iter().any(|s| s.kind == send.kind && s.party == send.party && (s.stage, s.level) == (send.stage, send.level))
}

// _stored
pub(super) fn stored(w: &W, send: Send) -> W {
    with(w, |n| {
        n.sends.retain(|s| !s.same_id(&send));
        n.sends.push(send);
        if n.sends.len() > MAX_SENDS {
            let cut = n.sends.len() - MAX_SENDS;
            n.sends.drain(..cut);
        }
    })
}

// _sync_retry
pub(super) fn sync_retry(w: &W, d: Option<&Definition>, ctx: &mut Ctx) -> R<W> {
    let sends = all_sends(w, d);
    let mut stored_sends = w.sends.clone();
    let mut due: Option<i64> = None;
    for s in stored_sends.iter_mut() {
        if s.state != SendState::Retrying {
            continue;
        }
        if !is_current(w, s, &sends) || s.retry_at.is_none() {
            s.state = SendState::Failed;
            s.retry_at = None;
        } else if let Some(at) = s.retry_at.filter(|at| due.is_none_or(|d| *at < d)) {
            due = Some(at);
        }
    }
    let mut w = w.clone();
    if stored_sends != w.sends {
        w = with(&w, |n| n.sends = stored_sends);
    }
    let armed: Vec<&ArmedTimer> = w.timers.iter().filter(|t| t.kind == TimerKind::SendRetry).collect();
    let due = match due {
        None => {
            return Ok(if armed.is_empty() {
                w
            } else {
                with(&w, |n| n.timers.retain(|t| t.kind != TimerKind::SendRetry))
            });
        }
        Some(due) => due,
    };
    if armed.len() == 1 && armed[0].due_at == due {
        return Ok(w);
    }
    let timer = ctx.arm(TimerKind::SendRetry, due);
    Ok(with(&w, |n| {
        n.timers.retain(|t| t.kind != TimerKind::SendRetry);
        n.timers.push(timer);
    }))
}

// _retry_sends
pub(super) fn retry_sends(w: &W, d: &Definition, ctx: &mut Ctx) -> R<W> {
    let sends = all_sends(w, Some(d));
    let mut w = w.clone();
    for s in w.sends.clone() {
        if s.state != SendState::Retrying || s.retry_at.is_none() || s.retry_at.unwrap() > ctx.now {
            continue;
        }
        if !is_current(&w, &s, &sends) {
            continue;
        }
        let tries = s.tries + 1;
        act(ctx, &w, d, s.kind, s.party.as_deref(), s.attempt, w.payload.clone().as_deref(), tries);
        let mut again = s.clone();
        again.tries = tries;
        again.state = SendState::Pending;
        again.retry_at = None;
        w = stored(&w, again);
        w = trace(&w, ctx.now, "send_retried", format!("{}, send attempt {}", what(&s), tries));
    }
    sync_retry(&w, Some(d), ctx)
}

// _shift_retries
pub(super) fn shift_retries(w: &W, by: i64) -> R<W> {
    if by == 0 || !w.sends.iter().any(|s| s.retry_at.is_some()) {
        return Ok(w.clone());
    }
    let mut sends = w.sends.clone();
    for s in sends.iter_mut() {
        if let Some(at) = s.retry_at {
            s.retry_at = Some(add(at, by)?);
        }
    }
    Ok(with(w, |n| n.sends = sends))
}
