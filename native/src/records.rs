//! The contract's records as the native path reads and writes them: the record types and
//! the codec's schemas and headers (`streams.codec`), Kafka's partitioner, `to_event` and
//! the `*_record` functions of streams/processor/records.py (as Avro values).

use std::collections::HashMap;
use std::rc::Rc;

use crate::avro::{self, Rec, AV, DV};
use crate::json::parse;
use crate::model::*;
use crate::oracle::{decline, Stop, R};

use crate::handler::{ROLE_COMMANDS, ROLE_REPLIES, ROLE_REQUESTS};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RT {
    StartWait,
    Reply,
    Command,
    Timer,
    Action,
    Outcome,
    Rejected,
    ActionResult,
}

impl RT {
    pub fn parse(name: &str) -> Option<RT> {
        Some(match name {
            "StartWait" => RT::StartWait,
            "Reply" => RT::Reply,
            "Command" => RT::Command,
            "Timer" => RT::Timer,
            "Action" => RT::Action,
            "Outcome" => RT::Outcome,
            "Rejected" => RT::Rejected,
            "ActionResult" => RT::ActionResult,
            _ => return None,
        })
    }
}

/// The codec's current schemas and headers (`Codec` as configured when the core was made).
pub struct Codecs {
    pub schemas: HashMap<RT, Rc<Rec>>,
    pub write_headers: HashMap<RT, Vec<u8>>,
    /// Single-object or Confluent headers of the current schemas, read natively.
    pub read_headers: HashMap<Vec<u8>, RT>,
}

impl Codecs {
    pub fn encode(&self, rt: RT, value: &AV) -> R<Vec<u8>> {
        let rec = self.schemas.get(&rt).ok_or(Stop::Decline("no schema"))?;
        let header = self.write_headers.get(&rt).ok_or(Stop::Decline("no header"))?;
        let mut out = header.clone();
        out.extend(avro::encode(rec, value)?);
        Ok(out)
    }

    /// `Codec.decode_either(types, data)`, for the record types it reads natively.
    pub fn decode(&self, types: &[RT], data: &[u8]) -> R<(RT, DV)> {
        if data.is_empty() {
            return decline("empty value");
        }
        if data.starts_with(b"\xc3\x01") || data[0] == 0 {
            let size = if data[0] == 0 { 5 } else { 10 };
            let header = data.get(..size).ok_or(Stop::Decline("header cut"))?;
            let rt = *self.read_headers.get(header).ok_or(Stop::Decline("a schema not read natively"))?;
            if !types.contains(&rt) {
                return decline("another record type");
            }
            let rec = self.schemas.get(&rt).ok_or(Stop::Decline("no schema"))?;
            return Ok((rt, avro::decode(rec, &data[size..])?));
        }
        let start = data.iter().position(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\n')).unwrap_or(data.len());
        if data.get(start) != Some(&b'{') {
            return decline("neither Avro nor JSON");
        }
        let j = parse(data).ok_or(Stop::Decline("json"))?;
        let mut rt = types[0];
        if types.len() > 1 && contains(data, b"\"actionId\"") {
            for t in types {
                let rec = self.schemas.get(t).ok_or(Stop::Decline("no schema"))?;
                if rec.fields.iter().filter(|f| !f.has_default).all(|f| j.get(&f.name).is_some()) {
                    rt = *t;
                    break;
                }
            }
        }
        let rec = self.schemas.get(&rt).ok_or(Stop::Decline("no schema"))?;
        Ok((rt, avro::from_json(rec, &j)?))
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Kafka's murmur2 partitioner (streams/partitioning.py).
pub fn partition_for(key: &[u8], partitions: i64) -> i64 {
    const M: u32 = 0x5bd1_e995;
    let len = key.len();
    let mut h: u32 = 0x9747_b28c ^ (len as u32);
    let words = len / 4;
    for i in 0..words {
        let mut k = u32::from_le_bytes(key[4 * i..4 * i + 4].try_into().unwrap());
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        h = h.wrapping_mul(M) ^ k.wrapping_mul(M);
    }
    let tail = len & 3;
    let i = len & !3;
    if tail == 3 {
        h ^= (key[i + 2] as u32) << 16;
    }
    if tail >= 2 {
        h ^= (key[i + 1] as u32) << 8;
    }
    if tail >= 1 {
        h = (h ^ key[i] as u32).wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    ((h & 0x7fff_ffff) as i64) % partitions
}

fn s(v: &DV, name: &str) -> R<String> {
    match v.field(name) {
        Some(DV::Str(s)) => Ok(s.clone()),
        _ => decline("field"),
    }
}

fn os(v: &DV, name: &str) -> R<Option<String>> {
    match v.field(name) {
        Some(DV::Str(s)) => Ok(Some(s.clone())),
        Some(DV::Null) | None => Ok(None),
        _ => decline("field"),
    }
}

fn ol(v: &DV, name: &str) -> R<Option<i64>> {
    match v.field(name) {
        Some(DV::Long(n)) => Ok(Some(*n)),
        Some(DV::Null) | None => Ok(None),
        _ => decline("field"),
    }
}

/// `to_event`.
pub fn to_event(role: usize, rt: RT, v: &DV, origin: Option<Origin>) -> R<Event> {
    if rt == RT::ActionResult {
        return Ok(Event::Result(Rc::new(ActionResult {
            correlation_key: s(v, "correlationKey")?,
            action_id: s(v, "actionId")?,
            status: ResultStatus::parse(&s(v, "status")?).ok_or(Stop::Decline("status"))?,
            error: os(v, "error")?,
            permanent: match v.field("permanent") {
                Some(DV::Bool(b)) => *b,
                None | Some(DV::Null) => false,
                _ => return decline("permanent"),
            },
            at: ol(v, "at")?,
            origin,
        })));
    }
    match role {
        ROLE_REQUESTS => Ok(Event::Start(StartWait {
            correlation_key: s(v, "correlationKey")?,
            definition: s(v, "definition")?,
            requested_at: match v.field("requestedAt") {
                Some(DV::Long(n)) => *n,
                _ => return decline("requestedAt"),
            },
            tenant: os(v, "tenant")?,
            payload: os(v, "payload")?,
            parties: match v.field("parties") {
                Some(DV::Arr(items)) => items.iter().map(|i| match i {
                    DV::Str(s) => Ok(s.clone()),
                    _ => decline("party"),
                }).collect::<R<_>>()?,
                Some(DV::Null) | None => vec![],
                _ => return decline("parties"),
            },
            deadline: os(v, "deadline")?,
            traceparent: None,
        })),
        ROLE_REPLIES => Ok(Event::Reply(Rc::new(Reply {
            correlation_key: s(v, "correlationKey")?,
            response_data: s(v, "responseData")?,
            tenant: os(v, "tenant")?,
            channel: s(v, "channel")?,
            reply_id: os(v, "replyId")?,
            sent_at: ol(v, "sentAt")?,
            origin,
        }))),
        ROLE_COMMANDS => Ok(Event::Command(Rc::new(Command {
            correlation_key: s(v, "correlationKey")?,
            command: CommandKind::parse(&s(v, "command")?).ok_or(Stop::Decline("command kind"))?,
            reason: os(v, "reason")?,
            review_outcome: os(v, "reviewOutcome")?,
            review_note: os(v, "reviewNote")?,
            response_data: os(v, "responseData")?,
            operator: os(v, "operator")?,
            origin,
            deadline: os(v, "deadline")?,
            move_by: os(v, "moveBy")?,
            version: os(v, "version")?,
            operation_id: os(v, "operationId")?,
        }))),
        _ => decline("a timer record"),
    }
}

pub fn reply_av(r: &Reply) -> AV<'_> {
    AV::Rec(vec![
        ("correlationKey", AV::Str(&r.correlation_key)),
        ("tenant", AV::opt_str(r.tenant.as_deref())),
        ("channel", AV::Str(&r.channel)),
        ("responseData", AV::Str(&r.response_data)),
        ("replyId", AV::opt_str(r.reply_id.as_deref())),
        ("sentAt", AV::opt_long(r.sent_at)),
    ])
}

pub fn command_av(c: &Command) -> AV<'_> {
    AV::Rec(vec![
        ("correlationKey", AV::Str(&c.correlation_key)),
        ("command", AV::Str(c.command.value())),
        ("reason", AV::opt_str(c.reason.as_deref())),
        ("reviewOutcome", AV::opt_str(c.review_outcome.as_deref())),
        ("reviewNote", AV::opt_str(c.review_note.as_deref())),
        ("responseData", AV::opt_str(c.response_data.as_deref())),
        ("operator", AV::opt_str(c.operator.as_deref())),
        ("deadline", AV::opt_str(c.deadline.as_deref())),
        ("moveBy", AV::opt_str(c.move_by.as_deref())),
        ("version", AV::opt_str(c.version.as_deref())),
        ("operationId", AV::opt_str(c.operation_id.as_deref())),
    ])
}

pub fn result_av(r: &ActionResult) -> AV<'_> {
    AV::Rec(vec![
        ("correlationKey", AV::Str(&r.correlation_key)),
        ("actionId", AV::Str(&r.action_id)),
        ("status", AV::Str(r.status.value())),
        ("error", AV::opt_str(r.error.as_deref())),
        ("permanent", AV::Bool(r.permanent)),
        ("at", AV::opt_long(r.at)),
    ])
}

pub fn outcome_av(e: &EmitOutcome) -> AV<'_> {
    AV::Rec(vec![
        ("outcomeId", AV::Str(&e.outcome_id)),
        ("correlationKey", AV::Str(&e.correlation_key)),
        ("definition", AV::Str(&e.definition)),
        ("tenant", AV::opt_str(e.tenant.as_deref())),
        ("outcome", AV::Str(e.outcome.value())),
        ("reason", AV::Str(e.reason.value())),
        ("responseData", AV::opt_str(e.response_data.as_deref())),
        ("responseValid", AV::Bool(e.response_valid)),
        ("validationIssue", AV::opt_str(e.validation_issue.as_deref())),
        ("reviewOutcome", AV::opt_str(e.review_outcome.as_deref())),
        ("reviewNote", AV::opt_str(e.review_note.as_deref())),
        ("remindersSent", AV::Long(e.reminders_sent)),
        ("escalationLevel", AV::Long(e.escalation_level)),
        ("parkedAt", AV::Long(e.parked_at)),
        ("endedAt", AV::Long(e.ended_at)),
        ("trace", AV::Arr(e.trace.iter().map(|t| AV::Rec(vec![
            ("at", AV::Long(t.at)), ("event", AV::Str(&t.event)), ("detail", AV::Str(&t.detail)),
        ])).collect())),
        ("operator", AV::opt_str(e.operator.as_deref())),
        ("operatorReason", AV::opt_str(e.operator_reason.as_deref())),
        ("sendError", AV::opt_str(e.send_error.as_deref())),
        ("definitionVersion", AV::opt_str(e.definition_version.as_deref())),
    ])
}

pub fn action_av(e: &EmitAction) -> AV<'_> {
    AV::Rec(vec![
        ("actionId", AV::Str(&e.action_id)),
        ("correlationKey", AV::Str(&e.correlation_key)),
        ("definition", AV::Str(&e.definition)),
        ("tenant", AV::opt_str(e.tenant.as_deref())),
        ("action", AV::Str(e.action.value())),
        ("party", AV::opt_str(e.party.as_deref())),
        ("level", AV::Long(e.level)),
        ("attempt", AV::Long(e.attempt)),
        ("payload", AV::opt_str(e.payload.as_deref())),
        ("at", AV::Long(e.at)),
        ("sendAttempt", AV::Long(e.send_attempt)),
        ("idempotencyKey", AV::Str(&e.idempotency_key)),
    ])
}
