//! One input record or fired timer, from its bytes and the stored row to the row to store
//! and the records to produce: `RecordHandler.handle`, `.fire`, `._decide` and `._effects`
//! of streams/processor/records.py.  Every record the Python handler would refuse (no key,
//! a key no wait can have, misrouted, undecodable, a key mismatch, too large, a timer
//! record, a row of an older layout) is declined here, and the Python handler refuses it
//! with its reason.

use std::rc::Rc;

use crate::avro::AV;
use crate::model::*;
use crate::oracle::{decline, Oracle, Stop, R};
use crate::records::{action_av, command_av, outcome_av, partition_for, reply_av, result_av, to_event, Codecs, RT};
use crate::row::{decode_row, encode_row, head_of, Head};
use crate::rules::{decide, split_correlation_key, Decision};
use crate::slotcodec::{decode_slot, encode_slot};

pub const MAX_RECORD_BYTES: usize = 900_000;
pub const MAX_REJECTED_ORIGINAL: usize = 512 * 1024;
pub const MAX_KEY_BYTES: usize = 1024;

/// `Role`'s members, in their order.
pub const ROLE_REQUESTS: usize = 0;
pub const ROLE_REPLIES: usize = 1;
pub const ROLE_COMMANDS: usize = 2;
#[allow(dead_code)] // never an input of the native path: timer records are declined
pub const ROLE_TIMERS: usize = 3;
pub const ROLE_ACTIONS: usize = 4;
pub const ROLE_OUTCOMES: usize = 5;
pub const ROLE_REJECTED: usize = 6;

/// Where a decided thing came from, for the rejections it causes.
pub enum Source<'a> {
    /// `traceparent`: the input's header (`InputRecord.traceparent`).
    Input { topic: &'a str, partition: i64, offset: i64, value: Option<&'a [u8]>, traceparent: Option<&'a str> },
    Timer { partition: i64, wait_key: &'a str, kind: TimerKind, due_at: i64, generation: i64 },
}

pub struct Output {
    pub role: usize,
    pub value: Vec<u8>,
    /// The one header the native path writes: `traceparent` (`streams.headers`).
    pub traceparent: Option<String>,
}

pub enum RowWrite {
    Unchanged,
    Delete,
    Write(Vec<u8>),
}

/// Alike in shape with model.rs's Wait (duplicates lists the pair), deliberately: the
/// Python `Handled`, field for field; a declaration, no logic shared.
pub struct Handled {
    pub row: RowWrite,
    pub timers_before: Vec<ArmedTimer>,
    pub timers_after: Vec<ArmedTimer>,
    pub head_before: Head,
    pub head_after: Head,
    pub out: Vec<Output>,
    pub counters: Vec<String>,
    pub outcomes: Vec<EmitOutcome>,
    pub unindexed: Option<(TimerKind, i64)>,
    pub timer: Option<ArmedTimer>,
    /// `Handled.traceparent`: the wait's trace, else the input record's.
    pub traceparent: Option<String>,
}

pub struct Env<'a, 'py> {
    pub oracle: &'a Oracle<'py>,
    pub codecs: &'a Codecs,
    pub timers_topic: &'a str,
}

/// `RecordHandler.rejected`, for a rejection the rules decided (`key` is the wait key).
#[allow(clippy::too_many_arguments)]
fn rejected(env: &Env, source: &Source, reason: &str, detail: &str, now_ms: i64, original: Option<&[u8]>,
            key: &[u8], at: Option<&Origin>) -> R<Output> {
    let timer_value;
    let mut traced: Option<String> = None;
    let (topic, partition, offset, own_value): (&str, i64, i64, Option<&[u8]>) = match source {
        Source::Input { topic, partition, offset, value, traceparent } => {
            if at.is_none() {
                traced = traceparent.map(str::to_string); // the sender's trace
            }
            (topic, *partition, *offset, *value)
        }
        Source::Timer { partition, wait_key, kind, due_at, generation } => {
            timer_value = if original.is_none() {
                Some(env.codecs.encode(RT::Timer, &AV::Rec(vec![
                    ("correlationKey", AV::Str(wait_key)), ("kind", AV::Str(kind.value())),
                    ("dueAt", AV::Long(*due_at)), ("generation", AV::Long(*generation)), ("firedAt", AV::Long(now_ms)),
                ]))?)
            } else {
                None
            };
            (env.timers_topic, *partition, -1, timer_value.as_deref())
        }
    };
    let mut data = if original.is_none() { own_value } else { original };
    let mut detail = detail.to_string();
    if let Some(d) = data {
        if d.len() > MAX_REJECTED_ORIGINAL {
            detail.push_str(&format!(" (original cut to its first {} of {} bytes; the whole record is at the topic, partition and offset above)",
                                     MAX_REJECTED_ORIGINAL, d.len()));
            data = Some(&d[..MAX_REJECTED_ORIGINAL]);
        }
    }
    let (topic, partition, offset) = match at {
        None => (topic, partition, offset),
        Some(o) => (o.topic.as_str(), o.partition, o.offset),
    };
    let value = env.codecs.encode(RT::Rejected, &AV::Rec(vec![
        ("topic", AV::Str(topic)),
        ("partition", AV::Long(partition)),
        ("offset", AV::Long(offset)),
        ("key", AV::Bytes(key)),
        ("reason", AV::Str(reason)),
        ("detail", AV::Str(&detail)),
        ("original", match data {
            None => AV::Null,
            Some(d) => AV::Bytes(d),
        }),
        ("rejectedAt", AV::Long(now_ms)),
    ]))?;
    Ok(Output { role: ROLE_REJECTED, value, traceparent: traced })
}

/// `RecordHandler._decide` after the replay and stale checks, with `_effects`.
#[allow(clippy::too_many_arguments)]
pub fn decide_record(env: &Env, source: &Source, wait_key: &str, event: &Event, now_ms: i64, head: Head,
                     slot_bytes: Option<&[u8]>, seen: [i64; 4]) -> R<Handled> {
    let slot: Option<Rc<Slot>> = match slot_bytes {
        Some(b) => Some(Rc::new(decode_slot(b)?)),
        None => None,
    };
    let decision: Decision = decide(&slot, event, now_ms, env.oracle)?;
    let key = wait_key.as_bytes();
    // The trace the wait's request came with: on its actions and its outcome.
    let trace = decision.slot.as_ref().and_then(|s| s.traceparent.clone());
    let mut out = Vec::new();
    let mut counters = Vec::new();
    let mut outcomes = Vec::new();
    for effect in &decision.effects {
        match effect {
            Effect::Reject { reason, detail, reply, command, result } => {
                let origin = if let Some(r) = reply {
                    r.origin.as_ref()
                } else if let Some(c) = command {
                    c.origin.as_ref()
                } else if let Some(r) = result {
                    r.origin.as_ref()
                } else {
                    None
                };
                let o = match origin {
                    Some(origin) => rejected(env, source, reason.value(), detail, now_ms, Some(&origin.value), key, Some(origin))?,
                    None => {
                        let original = if let Some(r) = reply {
                            Some(env.codecs.encode(RT::Reply, &reply_av(r))?)
                        } else if let Some(c) = command {
                            Some(env.codecs.encode(RT::Command, &command_av(c))?)
                        } else if let Some(r) = result {
                            Some(env.codecs.encode(RT::ActionResult, &result_av(r))?)
                        } else {
                            None
                        };
                        rejected(env, source, reason.value(), detail, now_ms, original.as_deref(), key, None)?
                    }
                };
                out.push(o);
                counters.push(format!("rejected.{}", reason.value()));
            }
            Effect::Discard { reason, .. } => counters.push(format!("discarded.{}", reason.value())),
            Effect::Outcome(o) => {
                out.push(Output { role: ROLE_OUTCOMES, value: env.codecs.encode(RT::Outcome, &outcome_av(o))?, traceparent: trace.clone() });
                counters.push(format!("outcomes.{}", o.reason.value()));
                outcomes.push(o.clone());
            }
            Effect::Action(a) => {
                out.push(Output { role: ROLE_ACTIONS, value: env.codecs.encode(RT::Action, &action_av(a))?, traceparent: trace.clone() });
                counters.push(format!("actions.{}", a.action.value()));
            }
            _ => {}
        }
    }
    let head_after = head_of(decision.slot.as_deref(), &decision.armed_after);
    let changed = match (&decision.slot, &slot) {
        (Some(a), Some(b)) => **a != **b,
        (None, None) => false,
        _ => true,
    };
    let row = if !changed {
        RowWrite::Unchanged
    } else {
        match &decision.slot {
            None => RowWrite::Delete,
            Some(s) => RowWrite::Write(encode_row(&head_after, &encode_slot(s)?, &seen)?),
        }
    };
    if let RowWrite::Write(r) = &row {
        if r.len() > MAX_RECORD_BYTES {
            return decline("too large");
        }
    }
    if out.iter().any(|o| o.value.len() > MAX_RECORD_BYTES) {
        return decline("too large");
    }
    Ok(Handled {
        row,
        timers_before: decision.armed_before,
        timers_after: decision.armed_after,
        head_before: head,
        head_after,
        out,
        counters,
        outcomes,
        unindexed: None,
        timer: None,
        traceparent: match (trace, source) {
            (Some(t), _) => Some(t),
            (None, Source::Input { traceparent, .. }) => traceparent.map(str::to_string),
            (None, Source::Timer { .. }) => None,
        },
    })
}

pub enum Handle {
    Replayed,
    Decided(String, Box<Handled>),
}

/// `RecordHandler.handle` for an input record; `load` reads the stored row.
#[allow(clippy::too_many_arguments)]
pub fn handle(env: &Env, partitions: i64, role: usize, topic: &str, partition: i64, offset: i64,
              key: Option<&[u8]>, value: Option<&[u8]>, traceparent: Option<&str>, now_ms: i64,
              load: &mut dyn FnMut(&str) -> R<Option<Vec<u8>>>) -> R<Handle> {
    if role > ROLE_COMMANDS {
        return decline("a timer record");
    }
    let key = match key {
        Some(k) if !k.is_empty() => k,
        _ => return decline("no key"),
    };
    if key.len() > MAX_KEY_BYTES || key.contains(&0) {
        return decline("invalid key");
    }
    if partition_for(key, partitions) != partition {
        return decline("misrouted");
    }
    let wait_key = std::str::from_utf8(key).map_err(|_| Stop::Decline("key not UTF-8"))?;
    let data = value.ok_or(Stop::Decline("no value"))?;
    let types: &[RT] = match role {
        ROLE_REQUESTS => &[RT::StartWait],
        ROLE_REPLIES => &[RT::Reply, RT::ActionResult],
        _ => &[RT::Command],
    };
    let (rt, record) = env.codecs.decode(types, data)?;
    let origin = if role == ROLE_REPLIES || role == ROLE_COMMANDS {
        Some(Origin { topic: topic.to_string(), partition, offset, value: Rc::from(data) })
    } else {
        None
    };
    let mut event = to_event(role, rt, &record, origin)?;
    if let (Event::Start(start), Some(tp)) = (&mut event, traceparent) {
        start.traceparent = Some(tp.to_string()); // kept with the wait
    }
    let correlation_key = match &event {
        Event::Start(e) => &e.correlation_key,
        Event::Reply(e) => &e.correlation_key,
        Event::Command(e) => &e.correlation_key,
        Event::Result(e) => &e.correlation_key,
        Event::Timer(_) => return decline("a timer record"),
    };
    if split_correlation_key(correlation_key).0 != wait_key {
        return decline("key mismatch");
    }
    let stored = load(wait_key)?;
    let (head, slot, mut seen) = match &stored {
        Some(b) => {
            let r = decode_row(b)?;
            (r.head, r.slot, r.seen)
        }
        None => (Head::none(), None, [-1; 4]),
    };
    if offset <= seen[role] {
        return Ok(Handle::Replayed);
    }
    seen[role] = offset;
    let source = Source::Input { topic, partition, offset, value, traceparent };
    let handled = decide_record(env, &source, wait_key, &event, now_ms, head, slot, seen)?;
    Ok(Handle::Decided(wait_key.to_string(), Box::new(handled)))
}

/// `RecordHandler.fire`: a due timer taken from the index.
#[allow(clippy::too_many_arguments)]
pub fn fire(env: &Env, partition: i64, wait_key: &str, kind: TimerKind, due_at: i64, generation: i64, now_ms: i64,
            until: i64, load: &mut dyn FnMut(&str) -> R<Option<Vec<u8>>>) -> R<Handled> {
    let stored = load(wait_key)?;
    let (head, slot, seen) = match &stored {
        Some(b) => {
            let r = decode_row(b)?;
            (r.head, r.slot, r.seen)
        }
        None => (Head::none(), None, [-1; 4]),
    };
    // event_to_fire
    let armed = |k: TimerKind, d: i64, g: i64| head.timers.iter().any(|t| t.kind == k && t.generation == g && t.due_at == d);
    let mut event = TimerFired { wait_key: wait_key.to_string(), kind, due_at, generation };
    if armed(kind, due_at, generation) {
        let mut latest: Option<&ArmedTimer> = None;
        for t in head.timers.iter().filter(|t| t.due_at <= until) {
            if latest.is_none_or(|l| t.due_at > l.due_at) {
                latest = Some(t);
            }
        }
        if let Some(l) = latest {
            if l.due_at > due_at {
                event = TimerFired { wait_key: wait_key.to_string(), kind: l.kind, due_at: l.due_at, generation: l.generation };
            }
        }
    }
    let fired = ArmedTimer { kind: event.kind, due_at: event.due_at, generation: event.generation };
    if !armed(event.kind, event.due_at, event.generation) {
        // _stale_timer
        let mut timers: Vec<ArmedTimer> = Vec::new();
        for t in &head.timers {
            if !timers.contains(t) {
                timers.push(*t);
            }
        }
        let listed = head.timers.iter().any(|t| t.kind == event.kind && t.due_at == event.due_at);
        return Ok(Handled {
            row: RowWrite::Unchanged,
            timers_before: timers.clone(),
            timers_after: timers,
            head_before: head.clone(),
            head_after: head,
            out: vec![],
            counters: vec![format!("discarded.{}", DiscardReason::StaleTimer.value())],
            outcomes: vec![],
            unindexed: if listed { None } else { Some((event.kind, event.due_at)) },
            timer: Some(fired),
            traceparent: None,
        });
    }
    let source = Source::Timer { partition, wait_key, kind, due_at, generation };
    let mut handled = decide_record(env, &source, wait_key, &Event::Timer(event), now_ms, head, slot, seen)?;
    handled.timer = Some(fired);
    Ok(handled)
}
