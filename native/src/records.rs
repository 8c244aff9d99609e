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

/// A record field as read from a decoded Avro value (`to_event`): its Rust type decides
/// what it must be (a text, an optional one, a long, an enum's symbol, ...) and whether
/// it may be missing.
trait FromDv: Sized {
    fn from_dv(v: Option<&DV>) -> R<Self>;
}

impl FromDv for String {
    fn from_dv(v: Option<&DV>) -> R<String> {
        match v {
            Some(DV::Str(s)) => Ok(s.clone()),
            _ => decline("field"),
        }
    }
}

impl FromDv for Option<String> {
    fn from_dv(v: Option<&DV>) -> R<Option<String>> {
        match v {
            Some(DV::Str(s)) => Ok(Some(s.clone())),
            Some(DV::Null) | None => Ok(None),
            _ => decline("field"),
        }
    }
}

impl FromDv for Option<i64> {
    fn from_dv(v: Option<&DV>) -> R<Option<i64>> {
        match v {
            Some(DV::Long(n)) => Ok(Some(*n)),
            Some(DV::Null) | None => Ok(None),
            _ => decline("field"),
        }
    }
}

macro_rules! enums_from_dv {
    ($($kind:ident: $why:literal),*) => {$(
        impl FromDv for $kind {
            fn from_dv(v: Option<&DV>) -> R<$kind> {
                match v {
                    Some(DV::Str(s)) => $kind::parse(s).ok_or(Stop::Decline($why)),
                    _ => decline("field"),
                }
            }
        }
    )*};
}

enums_from_dv!(CommandKind: "command kind", ResultStatus: "status");

/// `$ty { field: v["avroName"], ... }` (`FromDv`), then the fields after `;` as given.
macro_rules! from_dv {
    ($v:expr, $ty:ident { $($field:ident: $name:literal),* ; $($other:ident $(: $value:expr)?),* $(,)? }) => {
        $ty { $($field: FromDv::from_dv($v.field($name))?,)* $($other $(: $value)?,)* }
    };
}

/// `to_event`.
pub fn to_event(role: usize, rt: RT, v: &DV, origin: Option<Origin>) -> R<Event> {
    if rt == RT::ActionResult {
        return Ok(Event::Result(Rc::new(from_dv!(v, ActionResult {
            correlation_key: "correlationKey", action_id: "actionId", status: "status", error: "error", at: "at";
            permanent: match v.field("permanent") {
                Some(DV::Bool(b)) => *b,
                None | Some(DV::Null) => false,
                _ => return decline("permanent"),
            },
            origin,
        }))));
    }
    match role {
        ROLE_REQUESTS => Ok(Event::Start(from_dv!(v, StartWait {
            correlation_key: "correlationKey", definition: "definition", tenant: "tenant", payload: "payload",
            deadline: "deadline";
            requested_at: match v.field("requestedAt") {
                Some(DV::Long(n)) => *n,
                _ => return decline("requestedAt"),
            },
            parties: match v.field("parties") {
                Some(DV::Arr(items)) => items.iter().map(|i| match i {
                    DV::Str(s) => Ok(s.clone()),
                    _ => decline("party"),
                }).collect::<R<_>>()?,
                Some(DV::Null) | None => vec![],
                _ => return decline("parties"),
            },
            traceparent: None,
        }))),
        ROLE_REPLIES => Ok(Event::Reply(Rc::new(from_dv!(v, Reply {
            correlation_key: "correlationKey", response_data: "responseData", tenant: "tenant", channel: "channel",
            reply_id: "replyId", sent_at: "sentAt";
            origin,
        })))),
        ROLE_COMMANDS => Ok(Event::Command(Rc::new(from_dv!(v, Command {
            correlation_key: "correlationKey", command: "command", reason: "reason", review_outcome: "reviewOutcome",
            review_note: "reviewNote", response_data: "responseData", operator: "operator", deadline: "deadline",
            move_by: "moveBy", version: "version", operation_id: "operationId";
            origin,
        })))),
        _ => decline("a timer record"),
    }
}

/// A record field as the Avro value it is written as: its Rust type decides (a text, an
/// optional one, a long, an enum's symbol, ...), so the `*_av` lists below only name them.
trait ToAv {
    fn av(&self) -> AV<'_>;
}

/// `AV::Rec` of `rec`'s fields, each under its Avro name (`ToAv`).
macro_rules! av_rec {
    ($rec:expr; $($name:literal: $field:ident),* $(,)?) => {
        AV::Rec(vec![$(($name, $rec.$field.av())),*])
    };
}
impl ToAv for String {
    fn av(&self) -> AV<'_> {
        AV::Str(self)
    }
}

impl ToAv for Option<String> {
    fn av(&self) -> AV<'_> {
        AV::opt_str(self.as_deref())
    }
}

impl ToAv for i64 {
    fn av(&self) -> AV<'_> {
        AV::Long(*self)
    }
}

impl ToAv for Option<i64> {
    fn av(&self) -> AV<'_> {
        AV::opt_long(*self)
    }
}

impl ToAv for bool {
    fn av(&self) -> AV<'_> {
        AV::Bool(*self)
    }
}

macro_rules! enums_to_av {
    ($($kind:ty),*) => {$(
        impl ToAv for $kind {
            fn av(&self) -> AV<'_> {
                AV::Str(self.value())
            }
        }
    )*};
}

enums_to_av!(CommandKind, ResultStatus, OutcomeKind, OutcomeReason, ActionKind);

impl ToAv for Vec<TraceEntry> {
    fn av(&self) -> AV<'_> {
        AV::Arr(self.iter().map(|t| av_rec!(t; "at": at, "event": event, "detail": detail)).collect())
    }
}

pub fn reply_av(r: &Reply) -> AV<'_> {
    av_rec!(r; "correlationKey": correlation_key, "tenant": tenant, "channel": channel,
            "responseData": response_data, "replyId": reply_id, "sentAt": sent_at)
}

pub fn command_av(c: &Command) -> AV<'_> {
    av_rec!(c; "correlationKey": correlation_key, "command": command, "reason": reason,
            "reviewOutcome": review_outcome, "reviewNote": review_note, "responseData": response_data,
            "operator": operator, "deadline": deadline, "moveBy": move_by, "version": version,
            "operationId": operation_id)
}

pub fn result_av(r: &ActionResult) -> AV<'_> {
    av_rec!(r; "correlationKey": correlation_key, "actionId": action_id, "status": status, "error": error,
            "permanent": permanent, "at": at)
}

pub fn outcome_av(e: &EmitOutcome) -> AV<'_> {
    av_rec!(e; "outcomeId": outcome_id, "correlationKey": correlation_key, "definition": definition,
            "tenant": tenant, "outcome": outcome, "reason": reason, "responseData": response_data,
            "responseValid": response_valid, "validationIssue": validation_issue,
            "reviewOutcome": review_outcome, "reviewNote": review_note, "remindersSent": reminders_sent,
            "escalationLevel": escalation_level, "parkedAt": parked_at, "endedAt": ended_at, "trace": trace,
            "operator": operator, "operatorReason": operator_reason, "sendError": send_error,
            "definitionVersion": definition_version)
}

pub fn action_av(e: &EmitAction) -> AV<'_> {
    av_rec!(e; "actionId": action_id, "correlationKey": correlation_key, "definition": definition,
            "tenant": tenant, "action": action, "party": party, "level": level, "attempt": attempt,
            "payload": payload, "at": at, "sendAttempt": send_attempt, "idempotencyKey": idempotency_key)
}
