//! Reading a stored slot (`decode_slot` and its helpers).

use std::rc::Rc;

use crate::json::{orjson_str, parse, pyjson_str, J};
use crate::model::*;
use crate::oracle::{decline, R};
use crate::text::b64decode;

use super::*;
fn int(j: &J) -> R<i64> {
    match j {
        J::Int(n) => Ok(*n),
        _ => decline("int"),
    }
}

fn string(j: &J) -> R<String> {
    match j {
        J::Str(s) => Ok(s.clone()),
        _ => decline("str"),
    }
}

fn opt_string(j: Option<&J>) -> R<Option<String>> {
    match j {
        None | Some(J::Null) => Ok(None),
        Some(J::Str(s)) => Ok(Some(s.clone())),
        _ => decline("optional str"),
    }
}

fn opt_int(j: Option<&J>) -> R<Option<i64>> {
    match j {
        None | Some(J::Null) => Ok(None),
        Some(J::Int(n)) => Ok(Some(*n)),
        _ => decline("optional int"),
    }
}

fn arr(j: &J) -> R<&Vec<J>> {
    match j {
        J::Arr(items) => Ok(items),
        _ => decline("array"),
    }
}

/// An array of at least `min` items (a stored tuple whose trailing defaults may be left
/// out); `what` is the decline where it is shorter.
fn at_least<'j>(j: &'j J, min: usize, what: &'static str) -> R<&'j [J]> {
    let a = arr(j)?;
    if a.len() < min {
        return decline(what);
    }
    Ok(a)
}

/// An array of exactly `len` items; `what` is the decline where it is not.
fn exactly<'j>(j: &'j J, len: usize, what: &'static str) -> R<&'j [J]> {
    let a = arr(j)?;
    if a.len() != len {
        return decline(what);
    }
    Ok(a)
}

fn strings(j: &J) -> R<Vec<String>> {
    arr(j)?.iter().map(string).collect()
}

fn boolean(j: &J) -> R<bool> {
    match j {
        J::Bool(b) => Ok(*b),
        _ => decline("bool"),
    }
}

fn dec_timer(j: &J) -> R<ArmedTimer> {
    let a = at_least(j, 3, "timer")?;
    Ok(ArmedTimer { kind: kind_back(&string(&a[0])?)?, due_at: int(&a[1])?, generation: int(&a[2])? })
}

/// How a record's bytes may hold its responseData (`_FORMS`).
pub(super) fn render_form(form: i64, text: &str) -> R<Vec<u8>> {
    let mut out = Vec::new();
    match form {
        0 => out.extend_from_slice(text.as_bytes()),
        1 => {
            orjson_str(&mut out, text);
            out.remove(0);
            out.pop();
        }
        2 => {
            pyjson_str(&mut out, text);
            out.remove(0);
            out.pop();
        }
        _ => return decline("origin form"),
    }
    Ok(out)
}

fn get_origin(raw: &J, data: Option<&str>) -> R<Option<Origin>> {
    if let Some(os) = raw.get("os") {
        let a = exactly(os, 6, "origin")?;
        let before = b64decode(&string(&a[3])?).ok_or(crate::oracle::Stop::Decline("b64"))?;
        let after = b64decode(&string(&a[4])?).ok_or(crate::oracle::Stop::Decline("b64"))?;
        let mut value = before;
        value.extend(render_form(int(&a[5])?, data.unwrap_or(""))?);
        value.extend(after);
        return Ok(Some(Origin { topic: string(&a[0])?, partition: int(&a[1])?, offset: int(&a[2])?, value: value.into() }));
    }
    if let Some(og) = raw.get("og") {
        let a = exactly(og, 4, "origin")?;
        let value = b64decode(&string(&a[3])?).ok_or(crate::oracle::Stop::Decline("b64"))?;
        return Ok(Some(Origin { topic: string(&a[0])?, partition: int(&a[1])?, offset: int(&a[2])?, value: value.into() }));
    }
    Ok(None)
}

fn dec_reply(raw: &J) -> R<Reply> {
    let data = string(raw.get("r").ok_or(crate::oracle::Stop::Decline("reply"))?)?;
    let origin = get_origin(raw, Some(&data))?;
    Ok(Reply {
        correlation_key: string(raw.get("c").ok_or(crate::oracle::Stop::Decline("reply"))?)?,
        response_data: data,
        tenant: opt_string(raw.get("t"))?,
        channel: match raw.get("h") {
            None => String::new(),
            Some(h) => string(h)?,
        },
        reply_id: opt_string(raw.get("i"))?,
        sent_at: opt_int(raw.get("s"))?,
        origin,
    })
}

fn dec_command(raw: &J) -> R<Command> {
    let data = opt_string(raw.get("r"))?;
    let origin = get_origin(raw, data.as_deref())?;
    let kind = CommandKind::parse(&string(raw.get("k").ok_or(crate::oracle::Stop::Decline("command"))?)?)
        .ok_or(crate::oracle::Stop::Decline("command kind"))?;
    Ok(Command {
        correlation_key: string(raw.get("c").ok_or(crate::oracle::Stop::Decline("command"))?)?,
        command: kind,
        reason: opt_string(raw.get("z"))?,
        review_outcome: opt_string(raw.get("ro"))?,
        review_note: opt_string(raw.get("rn"))?,
        response_data: data,
        operator: opt_string(raw.get("o"))?,
        origin,
        deadline: opt_string(raw.get("dl"))?,
        move_by: opt_string(raw.get("mb"))?,
        version: opt_string(raw.get("v"))?,
        operation_id: opt_string(raw.get("oi"))?,
    })
}

fn dec_result(raw: &J) -> R<ActionResult> {
    let status = ResultStatus::parse(&string(raw.get("s").ok_or(crate::oracle::Stop::Decline("result"))?)?)
        .ok_or(crate::oracle::Stop::Decline("result status"))?;
    let permanent = match raw.get("p") {
        None => false,
        Some(J::Int(n)) => *n != 0,
        Some(J::Bool(b)) => *b,
        _ => return decline("permanent"),
    };
    Ok(ActionResult {
        correlation_key: string(raw.get("c").ok_or(crate::oracle::Stop::Decline("result"))?)?,
        action_id: string(raw.get("a").ok_or(crate::oracle::Stop::Decline("result"))?)?,
        status,
        error: opt_string(raw.get("e"))?,
        permanent,
        at: opt_int(raw.get("t"))?,
        origin: get_origin(raw, None)?,
    })
}

fn dec_held(j: &J) -> R<HeldReply> {
    let a = at_least(j, 2, "held")?;
    let empty = J::Obj(vec![]);
    let who = if a.len() > 4 { &a[4] } else { &empty };
    if !matches!(who, J::Obj(_)) {
        return decline("held who");
    }
    Ok(HeldReply {
        reply: Rc::new(dec_reply(&a[0])?),
        received_at: int(&a[1])?,
        by_operator: a.len() > 2 && match &a[2] {
            J::Int(n) => *n != 0,
            J::Bool(b) => *b,
            _ => return decline("by_operator"),
        },
        seq: if a.len() > 3 { int(&a[3])? } else { 0 },
        operator: opt_string(who.get("o"))?,
        reason: opt_string(who.get("z"))?,
    })
}

fn dec_send(j: &J) -> R<Send> {
    let a = at_least(j, 4, "send")?;
    let n = a.len();
    Ok(Send {
        kind: send_kind_back(&string(&a[0])?)?,
        stage: int(&a[1])?,
        level: int(&a[2])?,
        attempt: int(&a[3])?,
        tries: if n > 4 { int(&a[4])? } else { 1 },
        state: if n > 5 { send_state_back(&string(&a[5])?)? } else { SendState::Pending },
        party: if n > 6 { opt_string(Some(&a[6]))? } else { None },
        retry_at: if n > 7 { opt_int(Some(&a[7]))? } else { None },
        error: if n > 8 { opt_string(Some(&a[8]))? } else { None },
    })
}

fn dec_suspension(raw: &J) -> R<Suspension> {
    let mut remaining = Vec::new();
    for item in arr(raw.get("m").ok_or(crate::oracle::Stop::Decline("suspension"))?)? {
        let pair = exactly(item, 2, "remaining")?;
        remaining.push((kind_back(&string(&pair[0])?)?, int(&pair[1])?));
    }
    Ok(Suspension {
        reason: opt_string(raw.get("r"))?,
        at: int(raw.get("a").ok_or(crate::oracle::Stop::Decline("suspension"))?)?,
        resume_to: WaitStatus::parse(&string(raw.get("b").ok_or(crate::oracle::Stop::Decline("suspension"))?)?)
            .ok_or(crate::oracle::Stop::Decline("resume_to"))?,
        remaining,
        operator: opt_string(raw.get("o"))?,
    })
}

fn dec_trace_entry(j: &J) -> R<TraceEntry> {
    let e = exactly(j, 3, "trace entry")?;
    Ok(TraceEntry { at: int(&e[0])?, event: string(&e[1])?, detail: string(&e[2])? })
}

fn dec_held_result(j: &J) -> R<HeldResult> {
    let h = exactly(j, 2, "held result")?;
    Ok(HeldResult { result: Rc::new(dec_result(&h[0])?), received_at: int(&h[1])? })
}

fn dec_held_command(j: &J) -> R<HeldCommand> {
    let h = at_least(j, 2, "held command")?;
    Ok(HeldCommand {
        command: Rc::new(dec_command(&h[0])?),
        received_at: int(&h[1])?,
        seq: if h.len() > 2 { int(&h[2])? } else { 0 },
    })
}

const WAIT_KEYS: &[&str] = &[
    "k", "d", "t", "a", "s", "p", "ps", "o", "sg", "l", "sr", "rs", "po", "rv", "tm", "su", "h", "rd",
    "ok", "vi", "ro", "rn", "sx", "oc", "rz", "ea", "ri", "tr", "td", "op", "or", "pd", "sd", "hr", "se", "dv",
];

fn dec_wait(raw: &J) -> R<Wait> {
    let entries = match raw {
        J::Obj(e) => e,
        _ => return decline("wait"),
    };
    if entries.iter().any(|(k, _)| !WAIT_KEYS.contains(&k.as_str())) {
        return decline("unknown wait key");
    }
    let req = |k: &str| raw.get(k).ok_or(crate::oracle::Stop::Decline("required wait key"));
    let mut w = Wait::new(string(req("k")?)?, string(req("d")?)?, opt_string(Some(req("t")?))?, int(req("a")?)?);
    for (k, v) in entries {
        match k.as_str() {
            "k" | "d" | "t" | "a" => {}
            "s" => w.status = WaitStatus::parse(&string(v)?).ok_or(crate::oracle::Stop::Decline("status"))?,
            "p" => w.payload = opt_string(Some(v))?,
            "ps" => w.parties = strings(v)?,
            "o" => w.deadline_override_ms = opt_int(Some(v))?,
            "sg" => w.stage = int(v)?,
            "l" => w.level = int(v)?,
            "sr" => w.stage_reminders = int(v)?,
            "rs" => w.reminders_sent = int(v)?,
            "po" => w.polls = int(v)?,
            "rv" => w.reviews = int(v)?,
            "tm" => w.timers = arr(v)?.iter().map(dec_timer).collect::<R<_>>()?,
            "su" => w.suspension = if matches!(v, J::Null) { None } else { Some(dec_suspension(v)?) },
            "h" => w.held = arr(v)?.iter().map(dec_held).collect::<R<_>>()?,
            "rd" => w.response_data = opt_string(Some(v))?,
            "ok" => w.response_valid = boolean(v)?,
            "vi" => w.validation_issue = opt_string(Some(v))?,
            "ro" => w.review_outcome = opt_string(Some(v))?,
            "rn" => w.review_note = opt_string(Some(v))?,
            "sx" => w.stage_results = strings(v)?,
            "oc" => w.outcome = match v {
                J::Null => None,
                _ => Some(OutcomeKind::parse(&string(v)?).ok_or(crate::oracle::Stop::Decline("outcome"))?),
            },
            "rz" => w.reason = match v {
                J::Null => None,
                _ => Some(OutcomeReason::parse(&string(v)?).ok_or(crate::oracle::Stop::Decline("reason"))?),
            },
            "ea" => w.ended_at = opt_int(Some(v))?,
            "ri" => w.reply_ids = strings(v)?,
            "tr" => w.trace = arr(v)?.iter().map(dec_trace_entry).collect::<R<_>>()?,
            "td" => w.trace_dropped = int(v)?,
            "op" => w.operator = opt_string(Some(v))?,
            "or" => w.operator_reason = opt_string(Some(v))?,
            "pd" => w.payload_dropped = boolean(v)?,
            "sd" => w.sends = arr(v)?.iter().map(dec_send).collect::<R<_>>()?,
            "hr" => w.held_results = arr(v)?.iter().map(dec_held_result).collect::<R<_>>()?,
            "se" => w.send_error = opt_string(Some(v))?,
            "dv" => w.definition_version = opt_string(Some(v))?,
            _ => return decline("unknown wait key"),
        }
    }
    Ok(w)
}

pub fn decode_slot(data: &[u8]) -> R<Slot> {
    let raw = match parse(data) {
        Some(r @ J::Obj(_)) => r,
        _ => return decline("slot json"),
    };
    if raw.get("v") != Some(&J::Int(1)) {
        return decline("slot version");
    }
    let mut s = Slot::empty();
    if let Some(w) = raw.get("w") {
        s.wait = Some(Rc::new(dec_wait(w)?));
    }
    if let Some(e) = raw.get("e") {
        s.early_replies = arr(e)?.iter().map(dec_held).collect::<R<_>>()?;
    }
    if let Some(t) = raw.get("et") {
        s.early_timer = Some(dec_timer(t)?);
    }
    s.next_generation = int(raw.get("g").ok_or(crate::oracle::Stop::Decline("generation"))?)?;
    // _dec_traceparent: a text, or nothing (any other value is dropped, as Python does)
    if let Some(J::Str(tp)) = raw.get("tp") {
        s.traceparent = Some(tp.clone());
    }
    if let Some(ec) = raw.get("ec") {
        s.early_commands = arr(ec)?.iter().map(dec_held_command).collect::<R<_>>()?;
    }
    Ok(s)
}
