//! Writing a slot as orjson writes `encode_slot`'s dict, byte for byte.

use crate::json::orjson_str;
use crate::model::*;
use crate::oracle::R;
use crate::text::b64encode;

use super::read::render_form;
use super::*;
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
