//! The stored slot (streams/core/state_codec.py): read from its JSON, written byte for
//! byte as `encode_slot` writes it with orjson.  Reading is strict where Python's is
//! lenient (`int("5")`): a slot this writer would not have written is left to Python.

use std::rc::Rc;

use crate::json::{orjson_str, parse, pyjson_str, J};
use crate::model::*;
use crate::oracle::{decline, R};
use crate::text::{b64decode, b64encode};

fn kind_short(k: TimerKind) -> &'static str {
    match k {
        TimerKind::Reminder => "r",
        TimerKind::Deadline => "d",
        TimerKind::Poll => "p",
        TimerKind::Retention => "x",
        TimerKind::EarlyReply => "e",
        TimerKind::SendRetry => "s",
    }
}

fn kind_back(s: &str) -> R<TimerKind> {
    Ok(match s {
        "r" => TimerKind::Reminder,
        "d" => TimerKind::Deadline,
        "p" => TimerKind::Poll,
        "x" => TimerKind::Retention,
        "e" => TimerKind::EarlyReply,
        "s" => TimerKind::SendRetry,
        _ => return decline("timer kind"),
    })
}

fn send_kind_short(k: ActionKind) -> R<&'static str> {
    Ok(match k {
        ActionKind::SendRequest => "q",
        ActionKind::SendReminder => "m",
        ActionKind::RunEscalation => "x",
        _ => return decline("send kind"),
    })
}

fn send_kind_back(s: &str) -> R<ActionKind> {
    Ok(match s {
        "q" => ActionKind::SendRequest,
        "m" => ActionKind::SendReminder,
        "x" => ActionKind::RunEscalation,
        _ => return decline("send kind"),
    })
}

fn send_state_short(s: SendState) -> &'static str {
    match s {
        SendState::Pending => "p",
        SendState::Delivered => "d",
        SendState::Retrying => "r",
        SendState::Failed => "f",
    }
}

fn send_state_back(s: &str) -> R<SendState> {
    Ok(match s {
        "p" => SendState::Pending,
        "d" => SendState::Delivered,
        "r" => SendState::Retrying,
        "f" => SendState::Failed,
        _ => return decline("send state"),
    })
}

// ------------------------------------------------------------------- reading

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
    let a = arr(j)?;
    if a.len() < 3 {
        return decline("timer");
    }
    Ok(ArmedTimer { kind: kind_back(&string(&a[0])?)?, due_at: int(&a[1])?, generation: int(&a[2])? })
}

/// How a record's bytes may hold its responseData (`_FORMS`).
fn render_form(form: i64, text: &str) -> R<Vec<u8>> {
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
        let a = arr(os)?;
        if a.len() != 6 {
            return decline("origin");
        }
        let before = b64decode(&string(&a[3])?).ok_or(crate::oracle::Stop::Decline("b64"))?;
        let after = b64decode(&string(&a[4])?).ok_or(crate::oracle::Stop::Decline("b64"))?;
        let mut value = before;
        value.extend(render_form(int(&a[5])?, data.unwrap_or(""))?);
        value.extend(after);
        return Ok(Some(Origin { topic: string(&a[0])?, partition: int(&a[1])?, offset: int(&a[2])?, value: value.into() }));
    }
    if let Some(og) = raw.get("og") {
        let a = arr(og)?;
        if a.len() != 4 {
            return decline("origin");
        }
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
    let a = arr(j)?;
    if a.len() < 2 {
        return decline("held");
    }
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
    let a = arr(j)?;
    let n = a.len();
    if n < 4 {
        return decline("send");
    }
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
        let pair = arr(item)?;
        if pair.len() != 2 {
            return decline("remaining");
        }
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
            "tr" => {
                let mut trace = Vec::new();
                for e in arr(v)? {
                    let e = arr(e)?;
                    if e.len() != 3 {
                        return decline("trace entry");
                    }
                    trace.push(TraceEntry { at: int(&e[0])?, event: string(&e[1])?, detail: string(&e[2])? });
                }
                w.trace = trace;
            }
            "td" => w.trace_dropped = int(v)?,
            "op" => w.operator = opt_string(Some(v))?,
            "or" => w.operator_reason = opt_string(Some(v))?,
            "pd" => w.payload_dropped = boolean(v)?,
            "sd" => w.sends = arr(v)?.iter().map(dec_send).collect::<R<_>>()?,
            "hr" => {
                let mut held = Vec::new();
                for h in arr(v)? {
                    let h = arr(h)?;
                    if h.len() != 2 {
                        return decline("held result");
                    }
                    held.push(HeldResult { result: Rc::new(dec_result(&h[0])?), received_at: int(&h[1])? });
                }
                w.held_results = held;
            }
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
        for h in arr(ec)? {
            let h = arr(h)?;
            if h.len() < 2 {
                return decline("held command");
            }
            s.early_commands.push(HeldCommand {
                command: Rc::new(dec_command(&h[0])?),
                received_at: int(&h[1])?,
                seq: if h.len() > 2 { int(&h[2])? } else { 0 },
            });
        }
    }
    Ok(s)
}

// ------------------------------------------------------------------- writing

struct Out {
    b: Vec<u8>,
    first: Vec<bool>,
}

impl Out {
    fn open(&mut self, c: u8) {
        self.b.push(c);
        self.first.push(true);
    }
    fn close(&mut self, c: u8) {
        self.b.push(c);
        self.first.pop();
    }
    fn sep(&mut self) {
        let f = self.first.last_mut().unwrap();
        if !*f {
            self.b.push(b',');
        }
        *f = false;
    }
    fn key(&mut self, k: &str) {
        self.sep();
        orjson_str(&mut self.b, k);
        self.b.push(b':');
    }
    fn str(&mut self, s: &str) {
        orjson_str(&mut self.b, s);
    }
    fn int(&mut self, n: i64) {
        self.b.extend_from_slice(n.to_string().as_bytes());
    }
    fn opt_str(&mut self, s: Option<&str>) {
        match s {
            None => self.b.extend_from_slice(b"null"),
            Some(s) => self.str(s),
        }
    }
    fn opt_int(&mut self, n: Option<i64>) {
        match n {
            None => self.b.extend_from_slice(b"null"),
            Some(n) => self.int(n),
        }
    }
    fn item_str(&mut self, s: &str) {
        self.sep();
        self.str(s);
    }
    fn item_int(&mut self, n: i64) {
        self.sep();
        self.int(n);
    }
    fn strs(&mut self, items: &[String]) {
        self.open(b'[');
        for s in items {
            self.item_str(s);
        }
        self.close(b']');
    }
}

fn enc_timer(o: &mut Out, t: &ArmedTimer) {
    o.open(b'[');
    o.item_str(kind_short(t.kind));
    o.item_int(t.due_at);
    o.item_int(t.generation);
    o.close(b']');
}

fn put_origin(o: &mut Out, origin: &Origin, data: Option<&str>) -> R<()> {
    if let Some(data) = data.filter(|d| !d.is_empty()) {
        for form in 0..3 {
            let inner = render_form(form, data)?;
            if let Some(at) = rfind(&origin.value, &inner) {
                o.key("os");
                o.open(b'[');
                o.item_str(&origin.topic);
                o.item_int(origin.partition);
                o.item_int(origin.offset);
                o.item_str(&b64encode(&origin.value[..at]));
                o.item_str(&b64encode(&origin.value[at + inner.len()..]));
                o.item_int(form);
                o.close(b']');
                return Ok(());
            }
        }
    }
    o.key("og");
    o.open(b'[');
    o.item_str(&origin.topic);
    o.item_int(origin.partition);
    o.item_int(origin.offset);
    o.item_str(&b64encode(&origin.value));
    o.close(b']');
    Ok(())
}

/// `bytes.rfind(needle)`.
fn rfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.len() > hay.len() {
        return None;
    }
    (0..=hay.len() - needle.len()).rev().find(|&i| &hay[i..i + needle.len()] == needle)
}

fn enc_reply(o: &mut Out, r: &Reply) -> R<()> {
    o.open(b'{');
    o.key("c");
    o.str(&r.correlation_key);
    o.key("r");
    o.str(&r.response_data);
    if let Some(t) = &r.tenant {
        o.key("t");
        o.str(t);
    }
    if !r.channel.is_empty() {
        o.key("h");
        o.str(&r.channel);
    }
    if let Some(i) = &r.reply_id {
        o.key("i");
        o.str(i);
    }
    if let Some(s) = r.sent_at {
        o.key("s");
        o.int(s);
    }
    if let Some(origin) = &r.origin {
        put_origin(o, origin, Some(&r.response_data))?;
    }
    o.close(b'}');
    Ok(())
}

fn enc_command(o: &mut Out, c: &Command) -> R<()> {
    o.open(b'{');
    o.key("c");
    o.str(&c.correlation_key);
    o.key("k");
    o.str(c.command.value());
    for (short, value) in [("z", &c.reason), ("ro", &c.review_outcome), ("rn", &c.review_note),
                           ("r", &c.response_data), ("o", &c.operator), ("dl", &c.deadline),
                           ("mb", &c.move_by), ("v", &c.version), ("oi", &c.operation_id)] {
        if let Some(v) = value {
            o.key(short);
            o.str(v);
        }
    }
    if let Some(origin) = &c.origin {
        put_origin(o, origin, c.response_data.as_deref())?;
    }
    o.close(b'}');
    Ok(())
}

fn enc_result(o: &mut Out, r: &ActionResult) -> R<()> {
    o.open(b'{');
    o.key("c");
    o.str(&r.correlation_key);
    o.key("a");
    o.str(&r.action_id);
    o.key("s");
    o.str(r.status.value());
    if let Some(e) = &r.error {
        o.key("e");
        o.str(e);
    }
    if r.permanent {
        o.key("p");
        o.int(1);
    }
    if let Some(t) = r.at {
        o.key("t");
        o.int(t);
    }
    if let Some(origin) = &r.origin {
        put_origin(o, origin, None)?;
    }
    o.close(b'}');
    Ok(())
}

fn enc_held(o: &mut Out, h: &HeldReply) -> R<()> {
    o.open(b'[');
    o.sep();
    enc_reply(o, &h.reply)?;
    o.item_int(h.received_at);
    let who = h.operator.is_some() || h.reason.is_some();
    if h.by_operator || h.seq != 0 || who {
        o.item_int(if h.by_operator { 1 } else { 0 });
    }
    if h.seq != 0 || who {
        o.item_int(h.seq);
    }
    if who {
        o.sep();
        o.open(b'{');
        if let Some(op) = &h.operator {
            o.key("o");
            o.str(op);
        }
        if let Some(z) = &h.reason {
            o.key("z");
            o.str(z);
        }
        o.close(b'}');
    }
    o.close(b']');
    Ok(())
}

fn enc_send(o: &mut Out, s: &Send) -> R<()> {
    // [kind, stage, level, attempt, tries?, state?, party?, retry_at?, error?]: trailing
    // defaults (1, "p", None, None, None) left out.
    let mut n = 9;
    while n > 4 {
        let default = match n {
            9 => s.error.is_none(),
            8 => s.retry_at.is_none(),
            7 => s.party.is_none(),
            6 => s.state == SendState::Pending,
            _ => s.tries == 1,
        };
        if !default {
            break;
        }
        n -= 1;
    }
    o.open(b'[');
    o.item_str(send_kind_short(s.kind)?);
    o.item_int(s.stage);
    o.item_int(s.level);
    o.item_int(s.attempt);
    if n > 4 {
        o.item_int(s.tries);
    }
    if n > 5 {
        o.item_str(send_state_short(s.state));
    }
    if n > 6 {
        o.sep();
        o.opt_str(s.party.as_deref());
    }
    if n > 7 {
        o.sep();
        o.opt_int(s.retry_at);
    }
    if n > 8 {
        o.sep();
        o.opt_str(s.error.as_deref());
    }
    o.close(b']');
    Ok(())
}

fn enc_wait(o: &mut Out, w: &Wait) -> R<()> {
    o.open(b'{');
    o.key("k");
    o.str(&w.key);
    o.key("d");
    o.str(&w.definition);
    o.key("t");
    o.opt_str(w.tenant.as_deref());
    o.key("a");
    o.int(w.parked_at);
    if w.status != WaitStatus::Parked {
        o.key("s");
        o.str(w.status.value());
    }
    if let Some(p) = &w.payload {
        o.key("p");
        o.str(p);
    }
    if !w.parties.is_empty() {
        o.key("ps");
        o.strs(&w.parties);
    }
    if let Some(v) = w.deadline_override_ms {
        o.key("o");
        o.int(v);
    }
    for (short, v) in [("sg", w.stage), ("l", w.level), ("sr", w.stage_reminders), ("rs", w.reminders_sent),
                       ("po", w.polls), ("rv", w.reviews)] {
        if v != 0 {
            o.key(short);
            o.int(v);
        }
    }
    if !w.timers.is_empty() {
        o.key("tm");
        o.open(b'[');
        for t in &w.timers {
            o.sep();
            enc_timer(o, t);
        }
        o.close(b']');
    }
    if let Some(s) = &w.suspension {
        o.key("su");
        o.open(b'{');
        o.key("a");
        o.int(s.at);
        o.key("b");
        o.str(s.resume_to.value());
        o.key("m");
        o.open(b'[');
        for (k, left) in &s.remaining {
            o.sep();
            o.open(b'[');
            o.item_str(kind_short(*k));
            o.item_int(*left);
            o.close(b']');
        }
        o.close(b']');
        if let Some(r) = &s.reason {
            o.key("r");
            o.str(r);
        }
        if let Some(op) = &s.operator {
            o.key("o");
            o.str(op);
        }
        o.close(b'}');
    }
    if !w.held.is_empty() {
        o.key("h");
        o.open(b'[');
        for h in &w.held {
            o.sep();
            enc_held(o, h)?;
        }
        o.close(b']');
    }
    if let Some(v) = &w.response_data {
        o.key("rd");
        o.str(v);
    }
    if w.response_valid {
        o.key("ok");
        o.b.extend_from_slice(b"true");
    }
    for (short, v) in [("vi", &w.validation_issue), ("ro", &w.review_outcome), ("rn", &w.review_note)] {
        if let Some(v) = v {
            o.key(short);
            o.str(v);
        }
    }
    if !w.stage_results.is_empty() {
        o.key("sx");
        o.strs(&w.stage_results);
    }
    if let Some(v) = w.outcome {
        o.key("oc");
        o.str(v.value());
    }
    if let Some(v) = w.reason {
        o.key("rz");
        o.str(v.value());
    }
    if let Some(v) = w.ended_at {
        o.key("ea");
        o.int(v);
    }
    if !w.reply_ids.is_empty() {
        o.key("ri");
        o.strs(&w.reply_ids);
    }
    if !w.trace.is_empty() {
        o.key("tr");
        o.open(b'[');
        for e in &w.trace {
            o.sep();
            o.open(b'[');
            o.item_int(e.at);
            o.item_str(&e.event);
            o.item_str(&e.detail);
            o.close(b']');
        }
        o.close(b']');
    }
    if w.trace_dropped != 0 {
        o.key("td");
        o.int(w.trace_dropped);
    }
    for (short, v) in [("op", &w.operator), ("or", &w.operator_reason)] {
        if let Some(v) = v {
            o.key(short);
            o.str(v);
        }
    }
    if w.payload_dropped {
        o.key("pd");
        o.b.extend_from_slice(b"true");
    }
    if !w.sends.is_empty() {
        o.key("sd");
        o.open(b'[');
        for s in &w.sends {
            o.sep();
            enc_send(o, s)?;
        }
        o.close(b']');
    }
    if !w.held_results.is_empty() {
        o.key("hr");
        o.open(b'[');
        for h in &w.held_results {
            o.sep();
            o.open(b'[');
            o.sep();
            enc_result(o, &h.result)?;
            o.item_int(h.received_at);
            o.close(b']');
        }
        o.close(b']');
    }
    for (short, v) in [("se", &w.send_error), ("dv", &w.definition_version)] {
        if let Some(v) = v {
            o.key(short);
            o.str(v);
        }
    }
    o.close(b'}');
    Ok(())
}

pub fn encode_slot(slot: &Slot) -> R<Vec<u8>> {
    let mut o = Out { b: Vec::with_capacity(512), first: vec![] };
    o.open(b'{');
    o.key("v");
    o.int(1);
    o.key("g");
    o.int(slot.next_generation);
    if let Some(w) = &slot.wait {
        o.key("w");
        enc_wait(&mut o, w)?;
    }
    if !slot.early_replies.is_empty() {
        o.key("e");
        o.open(b'[');
        for h in &slot.early_replies {
            o.sep();
            enc_held(&mut o, h)?;
        }
        o.close(b']');
    }
    if !slot.early_commands.is_empty() {
        o.key("ec");
        o.open(b'[');
        for h in &slot.early_commands {
            o.sep();
            o.open(b'[');
            o.sep();
            enc_command(&mut o, &h.command)?;
            o.item_int(h.received_at);
            if h.seq != 0 {
                o.item_int(h.seq);
            }
            o.close(b']');
        }
        o.close(b']');
    }
    if let Some(t) = &slot.early_timer {
        o.key("et");
        enc_timer(&mut o, t);
    }
    if let Some(tp) = &slot.traceparent {
        o.key("tp");
        o.str(tp);
    }
    o.close(b'}');
    Ok(o.b)
}
