//! Writing a slot as orjson writes `encode_slot`'s dict, byte for byte.

use std::io::Write;

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
    #[inline]
    fn open(&mut self, c: u8) {
        self.b.push(c);
        self.first.push(true);
    }
    #[inline]
    fn close(&mut self, c: u8) {
        self.b.push(c);
        self.first.pop();
    }
    #[inline]
    fn sep(&mut self) {
        let f = self.first.last_mut().unwrap();
        if !*f {
            self.b.push(b',');
        }
        *f = false;
    }
    #[inline]
    fn key(&mut self, k: &str) {
        self.sep();
        orjson_str(&mut self.b, k);
        self.b.push(b':');
    }
    #[inline]
    fn str(&mut self, s: &str) {
        orjson_str(&mut self.b, s);
    }
    #[inline]
    fn int(&mut self, n: i64) {
        // Straight into the buffer: no String per number (writing to a Vec cannot fail).
        write!(self.b, "{n}").expect("writing to a Vec");
    }
    #[inline]
    fn opt_str(&mut self, s: Option<&str>) {
        match s {
            None => self.b.extend_from_slice(b"null"),
            Some(s) => self.str(s),
        }
    }
    #[inline]
    fn opt_int(&mut self, n: Option<i64>) {
        match n {
            None => self.b.extend_from_slice(b"null"),
            Some(n) => self.int(n),
        }
    }
    #[inline]
    fn item_str(&mut self, s: &str) {
        self.sep();
        self.str(s);
    }
    #[inline]
    fn item_int(&mut self, n: i64) {
        self.sep();
        self.int(n);
    }
    /// `"k":"s"`.
    #[inline]
    fn key_str(&mut self, k: &str, s: &str) {
        self.key(k);
        self.str(s);
    }
    /// `"k":n`.
    #[inline]
    fn key_int(&mut self, k: &str, n: i64) {
        self.key(k);
        self.int(n);
    }
    /// `"k":"s"` where there is a text; no key where there is none (the reader's default).
    #[inline]
    fn some_str(&mut self, k: &str, s: &Option<String>) {
        if let Some(s) = s {
            self.key_str(k, s);
        }
    }
    /// `[...]`, each item written by `item` after its separator.
    fn seq<T>(&mut self, items: &[T], mut item: impl FnMut(&mut Out, &T) -> R<()>) -> R<()> {
        self.open(b'[');
        for x in items {
            self.sep();
            item(self, x)?;
        }
        self.close(b']');
        Ok(())
    }
    /// `"k":[...]` where there are items (as `seq`); no key where there are none.
    fn some_seq<T>(&mut self, k: &str, items: &[T], item: impl FnMut(&mut Out, &T) -> R<()>) -> R<()> {
        if items.is_empty() {
            return Ok(());
        }
        self.key(k);
        self.seq(items, item)
    }
    /// `[record, received_at` of a held reply, command or result (`state_codec`'s
    /// `held`, `heldcmd`, `heldresult`), left open for what each adds after.
    fn open_held<T>(&mut self, record: &T, enc: impl FnOnce(&mut Out, &T) -> R<()>, received_at: i64) -> R<()> {
        self.open(b'[');
        self.sep();
        enc(self, record)?;
        self.item_int(received_at);
        Ok(())
    }
    /// `"k":["s", ...]` where there are texts.
    fn some_strs(&mut self, k: &str, items: &[String]) {
        if !items.is_empty() {
            self.key(k);
            self.open(b'[');
            for s in items {
                self.item_str(s);
            }
            self.close(b']');
        }
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

/// The end of a reply, command or result: its origin, where it has one, then the brace.
fn close_record(o: &mut Out, origin: &Option<Origin>, data: Option<&str>) -> R<()> {
    if let Some(origin) = origin {
        put_origin(o, origin, data)?;
    }
    o.close(b'}');
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
    o.key_str("c", &r.correlation_key);
    o.key_str("r", &r.response_data);
    o.some_str("t", &r.tenant);
    if !r.channel.is_empty() {
        o.key_str("h", &r.channel);
    }
    o.some_str("i", &r.reply_id);
    if let Some(s) = r.sent_at {
        o.key_int("s", s);
    }
    close_record(o, &r.origin, Some(&r.response_data))
}

fn enc_command(o: &mut Out, c: &Command) -> R<()> {
    o.open(b'{');
    o.key_str("c", &c.correlation_key);
    o.key_str("k", c.command.value());
    for (short, value) in [("z", &c.reason), ("ro", &c.review_outcome), ("rn", &c.review_note),
                           ("r", &c.response_data), ("o", &c.operator), ("dl", &c.deadline),
                           ("mb", &c.move_by), ("v", &c.version), ("oi", &c.operation_id)] {
        o.some_str(short, value);
    }
    close_record(o, &c.origin, c.response_data.as_deref())
}

fn enc_result(o: &mut Out, r: &ActionResult) -> R<()> {
    o.open(b'{');
    o.key_str("c", &r.correlation_key);
    o.key_str("a", &r.action_id);
    o.key_str("s", r.status.value());
    o.some_str("e", &r.error);
    if r.permanent {
        o.key_int("p", 1);
    }
    if let Some(t) = r.at {
        o.key_int("t", t);
    }
    close_record(o, &r.origin, None)
}

fn enc_held(o: &mut Out, h: &HeldReply) -> R<()> {
    o.open_held(h.reply.as_ref(), enc_reply, h.received_at)?;
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
        o.some_str("o", &h.operator);
        o.some_str("z", &h.reason);
        o.close(b'}');
    }
    o.close(b']');
    Ok(())
}

fn enc_held_command(o: &mut Out, h: &HeldCommand) -> R<()> {
    o.open_held(h.command.as_ref(), enc_command, h.received_at)?;
    if h.seq != 0 {
        o.item_int(h.seq);
    }
    o.close(b']');
    Ok(())
}

fn enc_held_result(o: &mut Out, h: &HeldResult) -> R<()> {
    o.open_held(h.result.as_ref(), enc_result, h.received_at)?;
    o.close(b']');
    Ok(())
}

/// A suspended timer's [kind, time left].
fn enc_remaining(o: &mut Out, (kind, left): &(TimerKind, i64)) -> R<()> {
    o.open(b'[');
    o.item_str(kind_short(*kind));
    o.item_int(*left);
    o.close(b']');
    Ok(())
}

fn enc_trace_entry(o: &mut Out, e: &TraceEntry) -> R<()> {
    o.open(b'[');
    o.item_int(e.at);
    o.item_str(&e.event);
    o.item_str(&e.detail);
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
    o.key_str("k", &w.key);
    o.key_str("d", &w.definition);
    o.key("t");
    o.opt_str(w.tenant.as_deref());
    o.key_int("a", w.parked_at);
    if w.status != WaitStatus::Parked {
        o.key_str("s", w.status.value());
    }
    o.some_str("p", &w.payload);
    o.some_strs("ps", &w.parties);
    if let Some(v) = w.deadline_override_ms {
        o.key_int("o", v);
    }
    for (short, v) in [("sg", w.stage), ("l", w.level), ("sr", w.stage_reminders), ("rs", w.reminders_sent),
                       ("po", w.polls), ("rv", w.reviews)] {
        if v != 0 {
            o.key_int(short, v);
        }
    }
    o.some_seq("tm", &w.timers, |o, t| {
        enc_timer(o, t);
        Ok(())
    })?;
    if let Some(s) = &w.suspension {
        o.key("su");
        o.open(b'{');
        o.key_int("a", s.at);
        o.key_str("b", s.resume_to.value());
        o.key("m");
        o.seq(&s.remaining, enc_remaining)?;
        o.some_str("r", &s.reason);
        o.some_str("o", &s.operator);
        o.close(b'}');
    }
    o.some_seq("h", &w.held, enc_held)?;
    o.some_str("rd", &w.response_data);
    if w.response_valid {
        o.key("ok");
        o.b.extend_from_slice(b"true");
    }
    for (short, v) in [("vi", &w.validation_issue), ("ro", &w.review_outcome), ("rn", &w.review_note)] {
        o.some_str(short, v);
    }
    o.some_strs("sx", &w.stage_results);
    if let Some(v) = w.outcome {
        o.key_str("oc", v.value());
    }
    if let Some(v) = w.reason {
        o.key_str("rz", v.value());
    }
    if let Some(v) = w.ended_at {
        o.key_int("ea", v);
    }
    o.some_strs("ri", &w.reply_ids);
    o.some_seq("tr", &w.trace, enc_trace_entry)?;
    if w.trace_dropped != 0 {
        o.key_int("td", w.trace_dropped);
    }
    o.some_str("op", &w.operator);
    o.some_str("or", &w.operator_reason);
    if w.payload_dropped {
        o.key("pd");
        o.b.extend_from_slice(b"true");
    }
    o.some_seq("sd", &w.sends, enc_send)?;
    o.some_seq("hr", &w.held_results, enc_held_result)?;
    o.some_str("se", &w.send_error);
    o.some_str("dv", &w.definition_version);
    o.close(b'}');
    Ok(())
}

pub fn encode_slot(slot: &Slot) -> R<Vec<u8>> {
    let mut o = Out { b: Vec::with_capacity(512), first: vec![] };
    o.open(b'{');
    o.key_int("v", 1);
    o.key_int("g", slot.next_generation);
    if let Some(w) = &slot.wait {
        o.key("w");
        enc_wait(&mut o, w)?;
    }
    o.some_seq("e", &slot.early_replies, enc_held)?;
    o.some_seq("ec", &slot.early_commands, enc_held_command)?;
    if let Some(t) = &slot.early_timer {
        o.key("et");
        enc_timer(&mut o, t);
    }
    o.some_str("tp", &slot.traceparent);
    o.close(b'}');
    Ok(o.b)
}
