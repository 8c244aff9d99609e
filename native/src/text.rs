//! Texts the rules write as Python writes them: `repr` of a string, spans and UTC times
//! (streams/core/durations.py), and the deterministic ids (streams/core/rules/ids.py).

/// `repr(s)` for a string of printable ASCII, tabs and newlines; None for anything else
/// (the caller asks Python: which characters `repr` keeps is Unicode's database).
pub fn ascii_repr(s: &str) -> Option<String> {
    if !s.bytes().all(|b| (0x20..0x7f).contains(&b) || b == b'\t' || b == b'\n' || b == b'\r') {
        return None;
    }
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    Some(out)
}

/// `format_span_ms`: a duration as people read it, its two largest units.
pub fn format_span_ms(ms: i64) -> String {
    let (sign, ms) = if ms < 0 { ("-", -(ms as i128)) } else { ("", ms as i128) };
    if ms < 60_000 {
        let text = format!("{}{:.1} s", sign, ms as f64 / 1000.0);
        return text.replace(".0 s", " s");
    }
    let mut ms = ms;
    let mut parts: Vec<String> = Vec::new();
    for (name, size) in [("d", 86_400_000i128), ("h", 3_600_000), ("min", 60_000), ("s", 1000)] {
        if ms >= size {
            parts.push(format!("{} {}", ms / size, name));
            ms %= size;
        } else if !parts.is_empty() {
            break;
        }
        if parts.len() == 2 {
            break;
        }
    }
    format!("{}{}", sign, parts.join(" "))
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// `format_utc_ms`: ``2026-11-30 16:00:05Z``, or ``N ms after 1970`` out of datetime's range.
pub fn format_utc_ms(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    if !(1..=9999).contains(&y) {
        return format!("{} ms after 1970", ms);
    }
    format!("{:04}-{:02}-{:02} {:02}:{:02}:{:02}Z", y, m, d, rem / 3600, rem % 3600 / 60, rem % 60)
}

const ID_NAMESPACE: [u8; 16] = [
    0x5f, 0x0c, 0x1d, 0x2e, 0x8a, 0x57, 0x4c, 0x1b, 0x9a, 0x7e, 0x3b, 0x6d, 0x2f, 0x0e, 0x9c, 0x41,
];

/// `str(uuid.uuid5(_ID_NAMESPACE, name))`.
pub fn uuid5(name: &str) -> String {
    let mut h = sha1_smol::Sha1::new();
    h.update(&ID_NAMESPACE);
    h.update(name.as_bytes());
    let hex = h.digest().to_string();
    let variant = b"89ab"[(u8::from_str_radix(&hex[16..17], 16).unwrap() & 3) as usize] as char;
    format!("{}-{}-5{}-{}{}-{}", &hex[..8], &hex[8..12], &hex[13..16], variant, &hex[17..20], &hex[20..32])
}

pub fn outcome_id(wait_key: &str, parked_at: i64) -> String {
    uuid5(&format!("outcome\u{1f}{}\u{1f}{}", wait_key, parked_at))
}

#[allow(clippy::too_many_arguments)]
pub fn action_id(wait_key: &str, parked_at: i64, action: &str, stage: i64, level: i64,
                 party: Option<&str>, attempt: i64, send_attempt: i64) -> String {
    let mut name = format!("action\u{1f}{}\u{1f}{}\u{1f}{}\u{1f}{}\u{1f}{}\u{1f}{}\u{1f}{}",
                           wait_key, parked_at, action, stage, level, party.unwrap_or(""), attempt);
    if send_attempt != 1 {
        name.push_str(&format!("\u{1f}send{}", send_attempt));
    }
    uuid5(&name)
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

pub fn b64encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        out.push(B64[(n >> 18) as usize & 63] as char);
        out.push(B64[(n >> 12) as usize & 63] as char);
        out.push(if chunk.len() > 1 { B64[(n >> 6) as usize & 63] as char } else { '=' });
        out.push(if chunk.len() > 2 { B64[n as usize & 63] as char } else { '=' });
    }
    out
}

/// Strict standard base64 with padding (what `b64encode` writes); None for anything else.
pub fn b64decode(text: &str) -> Option<Vec<u8>> {
    let t = text.as_bytes();
    if !t.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(t.len() / 4 * 3);
    let val = |c: u8| -> Option<u32> { B64.iter().position(|&x| x == c).map(|p| p as u32) };
    for (i, chunk) in t.chunks(4).enumerate() {
        let last = i == t.len() / 4 - 1;
        let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return None;
        }
        let mut n = 0u32;
        for (j, &c) in chunk.iter().enumerate() {
            let v = if j >= 4 - pad { 0 } else { val(c)? };
            n = n << 6 | v;
        }
        out.push((n >> 16) as u8);
        if pad < 2 {
            out.push((n >> 8) as u8);
        }
        if pad < 1 {
            out.push(n as u8);
        }
    }
    Some(out)
}
