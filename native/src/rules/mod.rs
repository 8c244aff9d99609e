//! The rules of the wait: streams/core/rules/*.py, function for function, in the same
//! order and with the same texts.  Each Python function is named in a comment above its
//! translation; read them side by side.  `Rc::ptr_eq` stands where Python says `is`.

use std::rc::Rc;

// What every rules module uses, imported once: each takes it with `use super::*`.
use crate::json::{pyjson, PyJ};
use crate::model::*;
use crate::oracle::{add, decline, sub, Oracle, Stop, R};
use crate::text::{action_id, format_span_ms, format_utc_ms, outcome_id};

mod context;
mod sends;
mod ending;
mod timers;
mod early;
mod requests;
mod replies;
mod commands;
mod results;

use self::context::*;
use self::sends::*;
use self::ending::*;
use self::timers::*;
use self::early::*;
use self::requests::*;
use self::replies::*;
use self::commands::*;
use self::results::*;

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

/// `slot.wait`, with its slot, where `slot is not None and slot.wait is not None`.
fn parked(slot: &S) -> Option<(Rc<Slot>, W)> {
    let s = slot.as_ref()?;
    Some((s.clone(), s.wait.clone()?))
}

/// `slot if new is w else replace(slot, wait=new)`, where `w` is the wait `s` holds.
fn with_wait(slot: S, s: &Slot, w: &W, new: W) -> S {
    if Rc::ptr_eq(&new, w) {
        slot
    } else {
        Some(with_slot(s, |x| x.wait = Some(new)))
    }
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

    /// Rule 9's limit on what a suspended wait records: with `held` of them (`what`:
    /// "replies", "results") already recorded, true when there is no room, the record
    /// then rejected as an overflow.
    fn full_while_suspended(&mut self, what: &str, held: usize, about: Option<Rc<Reply>>) -> bool {
        if held < MAX_HELD_REPLIES {
            return false;
        }
        let detail = format!("Expected at most {} {} recorded while suspended, but {} are already recorded",
                             MAX_HELD_REPLIES, what, held);
        self.reject(RejectReason::Overflow, detail, about);
        true
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
