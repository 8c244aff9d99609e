//! The rules of the wait: streams/core/rules/*.py, function for function, in the same
//! order and with the same texts.  Each Python function is named in a comment above its
//! translation; read them side by side.  `Rc::ptr_eq` stands where Python says `is`.

use std::rc::Rc;

use crate::json::{pyjson, PyJ};
use crate::model::*;
use crate::oracle::{add, decline, sub, Oracle, Stop, R};
use crate::text::{action_id, format_span_ms, format_utc_ms, outcome_id};

pub struct Ctx<'a, 'py> {
    pub now: i64,
    pub generation: i64,
    pub effects: Vec<Effect>,
    pub held_command: Option<Rc<Command>>,
    pub held_result: Option<Rc<ActionResult>>,
    pub by: Option<(Option<String>, Option<String>)>,
    pub o: &'a Oracle<'py>,
}

pub struct Decision {
    pub slot: Option<Rc<Slot>>,
    pub effects: Vec<Effect>,
    pub armed_before: Vec<ArmedTimer>,
    pub armed_after: Vec<ArmedTimer>,
}

type W = Rc<Wait>;
type S = Option<Rc<Slot>>;

fn same(a: &S, b: &S) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => Rc::ptr_eq(a, b),
        (None, None) => true,
        _ => false,
    }
}

/// `replace(w, ...)`: always a new record.
fn with(w: &W, f: impl FnOnce(&mut Wait)) -> W {
    let mut new = (**w).clone();
    f(&mut new);
    Rc::new(new)
}

fn with_slot(s: &Slot, f: impl FnOnce(&mut Slot)) -> Rc<Slot> {
    let mut new = s.clone();
    f(&mut new);
    Rc::new(new)
}

pub fn split_correlation_key(key: &str) -> (&str, Option<&str>) {
    match key.find(PARTY_SEPARATOR) {
        Some(i) => (&key[..i], Some(&key[i + 1..])),
        None => (key, None),
    }
}

impl<'a, 'py> Ctx<'a, 'py> {
    fn stamp(&mut self) -> i64 {
        let seq = self.generation;
        self.generation += 1;
        seq
    }

    fn arm(&mut self, kind: TimerKind, due_at: i64) -> ArmedTimer {
        let t = ArmedTimer { kind, due_at, generation: self.generation };
        self.generation += 1;
        t
    }

    fn reject(&mut self, reason: RejectReason, detail: String, reply: Option<Rc<Reply>>) {
        let (command, result) = if reply.is_none() {
            (self.held_command.clone(), self.held_result.clone())
        } else {
            (None, None)
        };
        self.effects.push(Effect::Reject { reason, detail, reply, command, result });
    }

    fn definition_of(&self, w: &Wait) -> R<Option<Rc<Definition>>> {
        self.o.definition_for(&w.definition, w.definition_version.as_deref())
    }

    fn repr(&self, s: &str) -> R<String> {
        self.o.repr(s)
    }
}

fn timer_sorted(mut v: Vec<ArmedTimer>) -> Vec<ArmedTimer> {
    v.sort_by(|a, b| a.order_key().cmp(&b.order_key()));
    v
}

// _finish
fn finish(slot: &S, new: S, ctx: &mut Ctx) -> Decision {
    let mut new = new;
    if let Some(n) = &new {
        if n.wait.is_none() && n.early_replies.is_empty() && n.early_commands.is_empty() {
            new = None;
        }
    }
    if let Some(n) = &new {
        if !same(&new, slot) && n.next_generation != ctx.generation {
            let g = ctx.generation;
            new = Some(with_slot(n, |s| s.next_generation = g));
        }
    }
    let before = slot.as_ref().map(|s| s.armed_set()).unwrap_or_default();
    let after = new.as_ref().map(|s| s.armed_set()).unwrap_or_default();
    let mut effects = std::mem::take(&mut ctx.effects);
    for t in timer_sorted(before.iter().filter(|t| !after.contains(t)).copied().collect()) {
        effects.push(Effect::Disarm(t));
    }
    for t in timer_sorted(after.iter().filter(|t| !before.contains(t)).copied().collect()) {
        effects.push(Effect::Arm(t));
    }
    if slot.is_some() && new.is_none() {
        effects.push(Effect::Purge);
    }
    Decision { slot: new, effects, armed_before: before, armed_after: after }
}

// decide
pub fn decide(slot: &S, event: &Event, now: i64, o: &Oracle) -> R<Decision> {
    let generation = slot.as_ref().map(|s| s.next_generation).unwrap_or(1);
    let mut ctx = Ctx { now, generation, effects: vec![], held_command: None, held_result: None, by: None, o };
    let new = match event {
        Event::Timer(ev) => on_timer_record(slot.clone(), ev, &mut ctx)?,
        _ => {
            let current = catch_up_slot(slot.clone(), now, &mut ctx)?;
            ctx.now = now;
            match event {
                Event::Start(ev) => on_start(current, ev, &mut ctx)?,
                Event::Reply(r) => on_reply_record(current, r, &mut ctx)?,
                Event::Result(r) => on_result_record(current, r, &mut ctx)?,
                Event::Command(c) => on_command(current, c, &mut ctx)?,
                Event::Timer(_) => unreachable!(),
            }
        }
    };
    Ok(finish(slot, new, &mut ctx))
}

// catch_up
pub fn catch_up(slot: &S, now: i64, o: &Oracle) -> R<Decision> {
    let generation = slot.as_ref().map(|s| s.next_generation).unwrap_or(1);
    let mut ctx = Ctx { now, generation, effects: vec![], held_command: None, held_result: None, by: None, o };
    let new = catch_up_slot(slot.clone(), now, &mut ctx)?;
    Ok(finish(slot, new, &mut ctx))
}

// ---------------------------------------------------------------- context.py

// _act
#[allow(clippy::too_many_arguments)]
fn act(ctx: &mut Ctx, w: &Wait, d: &Definition, kind: ActionKind, party: Option<&str>, attempt: i64,
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
fn trace(w: &W, at: i64, event: &str, detail: String) -> W {
    with(w, |n| {
        n.trace.push(TraceEntry { at, event: event.to_string(), detail });
        if n.trace.len() > TRACE_HEAD + TRACE_TAIL {
            n.trace.remove(TRACE_HEAD);
            n.trace_dropped += 1;
        }
    })
}

// _remember_reply_id
fn remember_reply_id(w: &W, reply: &Reply) -> W {
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
fn ended(w: &Wait) -> String {
    let outcome = w.outcome.map(|o| o.value()).unwrap_or("?");
    let at = w.ended_at.map(format_utc_ms).unwrap_or_else(|| "?".to_string());
    format!("Expected a wait still waiting, but it ended {} at {}", outcome, at)
}

// _missing_definition
fn missing_definition(ctx: &Ctx, w: &Wait) -> R<String> {
    let which = match &w.definition_version {
        None => format!("definition {}", ctx.repr(&w.definition)?),
        Some(v) => format!("version {} of definition {}", ctx.repr(v)?, ctx.repr(&w.definition)?),
    };
    Ok(format!("Expected {} of wait {} to be loaded, but it is not; restore it to let the wait finish",
               which, ctx.repr(&w.key)?))
}

// _who
fn who(ctx: &Ctx, channel: &str, party: Option<&str>) -> R<String> {
    let mut s = format!("channel {}", ctx.repr(channel)?);
    if let Some(p) = party {
        s.push_str(&format!(", party {}", ctx.repr(p)?));
    }
    Ok(s)
}

// _by (operations.by)
fn by(reason: Option<&str>, operator: Option<&str>, operation_id: Option<&str>) -> String {
    let reason = reason.filter(|r| !r.is_empty()).unwrap_or("no reason given");
    let operator = operator.filter(|r| !r.is_empty()).unwrap_or("unknown operator");
    match operation_id.filter(|o| !o.is_empty()) {
        Some(op) => format!("{} (by {}, operation {})", reason, operator, op),
        None => format!("{} (by {})", reason, operator),
    }
}

// _signed
fn signed(cmd: &Command) -> String {
    by(cmd.reason.as_deref(), cmd.operator.as_deref(), cmd.operation_id.as_deref())
}

// ---------------------------------------------------------------- sends.py

fn what(send: &Send) -> String {
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
fn send(ctx: &mut Ctx, w: &W, d: &Definition, kind: ActionKind, party: Option<&str>, attempt: i64,
        payload: Option<&str>) -> R<W> {
    act(ctx, w, d, kind, party, attempt, payload, 1);
    if w.sends.iter().any(|s| s.state == SendState::Retrying) {
        return sync_retry(w, Some(d), ctx);
    }
    Ok(w.clone())
}

// _derived
fn derived(w: &Wait, d: Option<&Definition>) -> Vec<Send> {
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
fn all_sends(w: &Wait, d: Option<&Definition>) -> Vec<Send> {
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
fn is_current(w: &Wait, send: &Send, sends: &[Send]) -> bool {
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
fn stored(w: &W, send: Send) -> W {
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
fn sync_retry(w: &W, d: Option<&Definition>, ctx: &mut Ctx) -> R<W> {
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
        } else if due.is_none() || s.retry_at.unwrap() < due.unwrap() {
            due = s.retry_at;
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
fn retry_sends(w: &W, d: &Definition, ctx: &mut Ctx) -> R<W> {
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
fn shift_retries(w: &W, by: i64) -> R<W> {
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

// ---------------------------------------------------------------- ending.py

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
fn end(w: &W, d: Option<&Definition>, ctx: &mut Ctx, kind: OutcomeKind, reason: OutcomeReason,
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

// ---------------------------------------------------------------- timers.py

fn stage_of(d: &Definition, w: &Wait) -> R<usize> {
    if w.stage < 0 || w.stage as usize >= d.stages.len() {
        return decline("stage out of range");
    }
    Ok(w.stage as usize)
}

// _open_stage
fn open_stage(w: &W, d: &Definition, ctx: &mut Ctx, start: i64) -> R<W> {
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
fn arm_phase(w: &W, d: &Definition, ctx: &mut Ctx, start: i64) -> R<W> {
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
fn escalate(w: &W, d: &Definition, ctx: &mut Ctx, exhausted: OutcomeReason) -> R<W> {
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
fn catch_up_slot(slot: S, until: i64, ctx: &mut Ctx) -> R<S> {
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
fn on_timer_record(slot: S, ev: &TimerFired, ctx: &mut Ctx) -> R<S> {
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
fn fire(slot: &Rc<Slot>, armed: ArmedTimer, ctx: &mut Ctx) -> R<S> {
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
fn find_armed(slot: &S, ev: &TimerFired) -> Option<ArmedTimer> {
    let slot = slot.as_ref()?;
    let candidates: Vec<ArmedTimer> = if ev.kind == TimerKind::EarlyReply {
        slot.early_timer.into_iter().collect()
    } else {
        slot.wait.as_ref().map(|w| w.timers.clone()).unwrap_or_default()
    };
    candidates.into_iter().find(|t| t.kind == ev.kind && t.generation == ev.generation && t.due_at == ev.due_at)
}

// _remind
fn remind(w: &W, d: &Definition, ctx: &mut Ctx) -> R<W> {
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

// ---------------------------------------------------------------- early.py

enum Held {
    Reply(HeldReply),
    Command(HeldCommand),
}

impl Held {
    fn received_at(&self) -> i64 {
        match self {
            Held::Reply(h) => h.received_at,
            Held::Command(h) => h.received_at,
        }
    }
    fn seq(&self) -> i64 {
        match self {
            Held::Reply(h) => h.seq,
            Held::Command(h) => h.seq,
        }
    }
    fn what(&self) -> &'static str {
        match self {
            Held::Reply(_) => "reply",
            Held::Command(_) => "command",
        }
    }
}

// _refuse_held
fn refuse_held(held: &Held, ctx: &mut Ctx, detail: String, late: bool) {
    let reason = if late { RejectReason::Late } else { RejectReason::Unmatched };
    match held {
        Held::Reply(h) => ctx.reject(reason, detail, Some(h.reply.clone())),
        Held::Command(h) => ctx.effects.push(Effect::Reject { reason, detail, reply: None, command: Some(h.command.clone()), result: None }),
    }
}

// _buffer_early
fn buffer_early(slot: S, reply: &Rc<Reply>, ctx: &mut Ctx) -> R<S> {
    let early: Vec<HeldReply> = slot.as_ref().map(|s| s.early_replies.clone()).unwrap_or_default();
    if let Some(id) = &reply.reply_id {
        if early.iter().any(|h| h.reply.reply_id.as_ref() == Some(id)) {
            let detail = format!("Expected a new reply id, but {} is already held for this key", ctx.repr(id)?);
            ctx.reject(RejectReason::Duplicate, detail, None);
            return Ok(slot);
        }
    }
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
    let timer = early_timer(&slot, expires_at, ctx);
    let g = ctx.generation;
    let base = slot.map(|s| (*s).clone()).unwrap_or_else(Slot::empty);
    Ok(Some(with_slot(&base, |s| {
        s.early_replies.push(held);
        s.early_timer = Some(timer);
        s.next_generation = g;
    })))
}

// _buffer_early_command
fn buffer_early_command(slot: S, cmd: &Rc<Command>, ctx: &mut Ctx) -> R<S> {
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
    let timer = early_timer(&slot, expires_at, ctx);
    let g = ctx.generation;
    let base = slot.map(|s| (*s).clone()).unwrap_or_else(Slot::empty);
    Ok(Some(with_slot(&base, |s| {
        s.early_commands.push(h);
        s.early_timer = Some(timer);
        s.next_generation = g;
    })))
}

// _early_timer
fn early_timer(slot: &S, expires_at: i64, ctx: &mut Ctx) -> ArmedTimer {
    if let Some(s) = slot {
        if let Some(t) = s.early_timer {
            return t;
        }
    }
    ctx.arm(TimerKind::EarlyReply, expires_at)
}

// _expire_early
fn expire_early(slot: &Rc<Slot>, armed: ArmedTimer, ctx: &mut Ctx) -> R<S> {
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

// ---------------------------------------------------------------- requests.py

// _on_start
fn on_start(slot: S, ev: &StartWait, ctx: &mut Ctx) -> R<S> {
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
fn apply_early(wait: &W, d: &Definition, held_by: &Slot, ctx: &mut Ctx) -> R<S> {
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
        let current = match &slot {
            Some(s) if s.wait.is_some() => s.clone(),
            _ => {
                let detail = format!("Expected the wait {} to be kept when the {} was appended, but it had ended and its retention had passed",
                                     ctx.repr(&wait.key)?, held.what());
                refuse_held(held, ctx, detail, true);
                continue;
            }
        };
        let w = current.wait.clone().unwrap();
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

// ---------------------------------------------------------------- replies.py

// _on_reply_record
fn on_reply_record(slot: S, reply: &Rc<Reply>, ctx: &mut Ctx) -> R<S> {
    let s = match &slot {
        Some(s) if s.wait.is_some() => s.clone(),
        _ => return buffer_early(slot, reply, ctx),
    };
    let w = s.wait.clone().unwrap();
    let d = match ctx.definition_of(&w)? {
        Some(d) => d,
        None => {
            let m = missing_definition(ctx, &w)?;
            ctx.reject(RejectReason::UnknownDefinition, m, None);
            return Ok(slot);
        }
    };
    let new = on_reply(&w, reply, &d, ctx, false)?;
    if Rc::ptr_eq(&new, &w) {
        Ok(slot)
    } else {
        Ok(Some(with_slot(&s, |x| x.wait = Some(new))))
    }
}

// _on_reply
fn on_reply(w: &W, reply: &Rc<Reply>, d: &Definition, ctx: &mut Ctx, held: bool) -> R<W> {
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
        if w.held.len() >= MAX_HELD_REPLIES {
            let detail = format!("Expected at most {} replies recorded while suspended, but {} are already recorded", MAX_HELD_REPLIES, w.held.len());
            ctx.reject(RejectReason::Overflow, detail, about);
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
fn judge(w: &W, d: &Definition, ctx: &mut Ctx, data: &str, channel: &str, party: Option<&str>,
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
fn to_review(w: &W, d: &Definition, ctx: &mut Ctx, channel: &str) -> R<W> {
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
fn accept(w: &W, d: &Definition, ctx: &mut Ctx, data: Option<&str>, valid: bool, reason: OutcomeReason,
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

// ---------------------------------------------------------------- commands.py

// _on_command
fn on_command(slot: S, cmd: &Rc<Command>, ctx: &mut Ctx) -> R<S> {
    let s = match &slot {
        Some(s) if s.wait.is_some() => s.clone(),
        _ => return buffer_early_command(slot, cmd, ctx),
    };
    let w = s.wait.clone().unwrap();
    let new = command_on_wait(&w, cmd, ctx)?;
    if Rc::ptr_eq(&new, &w) {
        Ok(slot)
    } else {
        Ok(Some(with_slot(&s, |x| x.wait = Some(new))))
    }
}

// _command_on_wait
fn command_on_wait(w: &W, cmd: &Rc<Command>, ctx: &mut Ctx) -> R<W> {
    let outer = ctx.by.take();
    ctx.by = Some((cmd.operator.clone(), cmd.reason.clone()));
    let result = apply_command(w, cmd, ctx);
    ctx.by = outer;
    result
}

// _apply_command
fn apply_command(w: &W, cmd: &Rc<Command>, ctx: &mut Ctx) -> R<W> {
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
const MAX_OPERATION_ID: usize = 64;

// operations.operation_id_problem
fn operation_id_problem(ctx: &Ctx, id: &str) -> R<Option<String>> {
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
fn first_of_operation(w: &Wait, cmd: &Command, ctx: &mut Ctx) -> R<bool> {
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
fn suspend(w: &W, ctx: &mut Ctx, cmd: &Command) -> R<W> {
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

enum HeldItem {
    Reply(HeldReply),
    Result(HeldResult),
}

// _resume
fn resume(w: &W, d: &Definition, ctx: &mut Ctx, cmd: &Command) -> R<W> {
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
fn cancel(w: &W, d: Option<&Definition>, ctx: &mut Ctx, cmd: &Command) -> R<W> {
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
fn deliver(w: &W, d: &Definition, ctx: &mut Ctx, cmd: &Command) -> R<W> {
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
        if w.held.len() >= MAX_HELD_REPLIES {
            let detail = format!("Expected at most {} replies recorded while suspended, but {} are already recorded", MAX_HELD_REPLIES, w.held.len());
            ctx.reject(RejectReason::Overflow, detail, None);
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
fn reschedule(w: &W, ctx: &mut Ctx, cmd: &Command) -> R<W> {
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
fn review(w: &W, d: &Definition, ctx: &mut Ctx, cmd: &Command) -> R<W> {
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
fn migrate(w: &W, ctx: &mut Ctx, cmd: &Command) -> R<W> {
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
fn misfit(ctx: &Ctx, w: &Wait, current: Option<&Definition>, target: &Definition) -> R<Option<String>> {
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

// ---------------------------------------------------------------- results.py

// _on_result_record
fn on_result_record(slot: S, res: &Rc<ActionResult>, ctx: &mut Ctx) -> R<S> {
    let s = match &slot {
        Some(s) if s.wait.is_some() => s.clone(),
        _ => {
            let key = split_correlation_key(&res.correlation_key).0.to_string();
            let detail = format!("Expected a wait under key {} for the result of action {}, but there is none",
                                 ctx.repr(&key)?, ctx.repr(&res.action_id)?);
            ctx.reject(RejectReason::Unmatched, detail, None);
            return Ok(slot);
        }
    };
    let w = s.wait.clone().unwrap();
    let new = on_result(&w, res, ctx)?;
    if Rc::ptr_eq(&new, &w) {
        Ok(slot)
    } else {
        Ok(Some(with_slot(&s, |x| x.wait = Some(new))))
    }
}

// _on_result
fn on_result(w: &W, res: &Rc<ActionResult>, ctx: &mut Ctx) -> R<W> {
    let key = split_correlation_key(&res.correlation_key).0;
    if key != w.key {
        let detail = format!("Expected correlation key {}, but the result carries {}", ctx.repr(&w.key)?, ctx.repr(key)?);
        ctx.reject(RejectReason::Unmatched, detail, None);
        return Ok(w.clone());
    }
    if w.status == WaitStatus::Suspended {
        if w.held_results.len() >= MAX_HELD_REPLIES {
            let detail = format!("Expected at most {} results recorded while suspended, but {} are already recorded", MAX_HELD_REPLIES, w.held_results.len());
            ctx.reject(RejectReason::Overflow, detail, None);
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
fn find_send(w: &Wait, sends: &[Send], wanted: &str) -> Option<(Send, i64)> {
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
fn delivered(w: &W, d: Option<&Definition>, send: &Send, ctx: &mut Ctx) -> R<W> {
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
fn failed(w: &W, d: Option<&Definition>, sends: &[Send], send: &Send, res: &ActionResult, ctx: &mut Ctx) -> R<W> {
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
fn take_path(w: &W, d: &Definition, send: &Send, ctx: &mut Ctx, then: SendFailureRoute) -> R<W> {
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
fn reachable_parties(w: &Wait, d: &Definition) -> Vec<String> {
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
fn review_send(w: &W, d: &Definition, send: &Send, ctx: &mut Ctx) -> R<W> {
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

