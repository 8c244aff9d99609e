//! JSON in and out, byte for byte as the Python side reads and writes it.
//!
//! Reading is strict: anything the Python readers might take differently
//! (a lone surrogate, a number beyond 64 bits, a repeated key, a control
//! character in a string) is refused, and the caller hands the record to the
//! Python path, which says what is wrong with it.  Writing follows two
//! writers exactly: orjson (the stored slot: UTF-8 as it is, only quote,
//! backslash and control characters escaped) and Python's `json.dumps` with
//! its defaults (`ensure_ascii`: every character outside space..tilde
//! escaped, astral ones as surrogate pairs).

#[derive(Debug, Clone, PartialEq)]
pub enum J {
    Null,
    Bool(bool),
    Int(i64),
    Float,
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

impl J {
    pub fn get(&self, key: &str) -> Option<&J> {
        match self {
            J::Obj(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

pub struct Parser<'a> {
    data: &'a [u8],
    pos: usize,
    depth: u32,
}

/// Nesting deeper than this is left to Python (whose limit is its recursion limit).
const MAX_DEPTH: u32 = 200;

pub fn parse(data: &[u8]) -> Option<J> {
    let mut p = Parser { data, pos: 0, depth: 0 };
    p.ws();
    let v = p.value()?;
    p.ws();
    if p.pos != data.len() {
        return None;
    }
    Some(v)
}

impl<'a> Parser<'a> {
    fn ws(&mut self) {
        while self.pos < self.data.len() && matches!(self.data[self.pos], b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
    }

    fn value(&mut self) -> Option<J> {
        let c = *self.data.get(self.pos)?;
        match c {
            b'{' => self.object(),
            b'[' => self.array(),
            b'"' => Some(J::Str(self.string()?)),
            b't' => self.literal(b"true", J::Bool(true)),
            b'f' => self.literal(b"false", J::Bool(false)),
            b'n' => self.literal(b"null", J::Null),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn literal(&mut self, word: &[u8], value: J) -> Option<J> {
        if self.data[self.pos..].starts_with(word) {
            self.pos += word.len();
            Some(value)
        } else {
            None
        }
    }

    fn object(&mut self) -> Option<J> {
        let entries = self.members(b'}', |p, entries: &mut Vec<(String, J)>| {
            if p.data.get(p.pos) != Some(&b'"') {
                return None;
            }
            let key = p.string()?;
            if entries.iter().any(|(k, _)| *k == key) {
                return None; // a repeated key: the readers differ on it
            }
            p.ws();
            if p.data.get(p.pos) != Some(&b':') {
                return None;
            }
            p.pos += 1;
            p.ws();
            let value = p.value()?;
            entries.push((key, value));
            Some(())
        })?;
        Some(J::Obj(entries))
    }

    fn array(&mut self) -> Option<J> {
        let items = self.members(b']', |p, items: &mut Vec<J>| {
            items.push(p.value()?);
            Some(())
        })?;
        Some(J::Arr(items))
    }

    /// An object's or an array's members, from its opening bracket to `close`: each read
    /// and pushed by `member`, at the next non-blank byte.  One loop for both, so that
    /// separators, nesting depth and the empty case cannot differ between them.
    fn members<T>(&mut self, close: u8, mut member: impl FnMut(&mut Self, &mut Vec<T>) -> Option<()>) -> Option<Vec<T>> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return None;
        }
        self.pos += 1;
        let mut items = Vec::new();
        self.ws();
        if self.data.get(self.pos) != Some(&close) {
            loop {
                self.ws();
                member(self, &mut items)?;
                self.ws();
                match *self.data.get(self.pos)? {
                    b',' => self.pos += 1,
                    c if c == close => break,
                    _ => return None,
                }
            }
        }
        self.pos += 1;
        self.depth -= 1;
        Some(items)
    }

    fn number(&mut self) -> Option<J> {
        let start = self.pos;
        let d = self.data;
        if d[self.pos] == b'-' {
            self.pos += 1;
        }
        match d.get(self.pos)? {
            b'0' => self.pos += 1,
            b'1'..=b'9' => {
                self.digits();
            }
            _ => return None,
        }
        let mut float = false;
        if d.get(self.pos) == Some(&b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return None;
            }
            float = true;
        }
        if matches!(d.get(self.pos), Some(b'e') | Some(b'E')) {
            self.pos += 1;
            if matches!(d.get(self.pos), Some(b'+') | Some(b'-')) {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return None;
            }
            float = true;
        }
        if float {
            return Some(J::Float);
        }
        let text = std::str::from_utf8(&d[start..self.pos]).ok()?;
        text.parse::<i64>().ok().map(J::Int) // beyond 64 bits: not ours to guess
    }

    /// Skips a run of ASCII digits; how many there were.
    fn digits(&mut self) -> usize {
        let start = self.pos;
        while self.pos < self.data.len() && self.data[self.pos].is_ascii_digit() {
            self.pos += 1;
        }
        self.pos - start
    }

    fn hex4(&mut self) -> Option<u32> {
        let h = self.data.get(self.pos..self.pos + 4)?;
        let mut v = 0u32;
        for &c in h {
            v = v * 16 + (c as char).to_digit(16)?;
        }
        self.pos += 4;
        Some(v)
    }

    fn string(&mut self) -> Option<String> {
        self.pos += 1; // the opening quote
        let d = self.data;
        let mut out: Vec<u8> = Vec::new();
        loop {
            let start = self.pos;
            while self.pos < d.len() && d[self.pos] != b'"' && d[self.pos] != b'\\' && d[self.pos] >= 0x20 {
                self.pos += 1;
            }
            out.extend_from_slice(&d[start..self.pos]);
            let c = *d.get(self.pos)?;
            if c < 0x20 {
                return None; // a raw control character: refused by the strict readers
            }
            self.pos += 1;
            if c == b'"' {
                return String::from_utf8(out).ok();
            }
            let e = *d.get(self.pos)?;
            self.pos += 1;
            match e {
                b'"' => out.push(b'"'),
                b'\\' => out.push(b'\\'),
                b'/' => out.push(b'/'),
                b'b' => out.push(8),
                b'f' => out.push(12),
                b'n' => out.push(b'\n'),
                b'r' => out.push(b'\r'),
                b't' => out.push(b'\t'),
                b'u' => {
                    let u = self.hex4()?;
                    let code = if (0xD800..0xDC00).contains(&u) {
                        if d.get(self.pos..self.pos + 2) != Some(b"\\u") {
                            return None; // a lone surrogate
                        }
                        self.pos += 2;
                        let low = self.hex4()?;
                        if !(0xDC00..0xE000).contains(&low) {
                            return None;
                        }
                        0x10000 + ((u - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00..0xE000).contains(&u) {
                        return None;
                    } else {
                        u
                    };
                    let ch = char::from_u32(code)?;
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                }
                _ => return None,
            }
        }
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// A JSON string as orjson writes it.
pub fn orjson_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let b = s.as_bytes();
    let mut start = 0;
    for (i, &c) in b.iter().enumerate() {
        let esc: &[u8] = match c {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            8 => b"\\b",
            12 => b"\\f",
            0..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&b[start..i]);
        if esc.is_empty() {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[(c >> 4) as usize]);
            out.push(HEX[(c & 15) as usize]);
        } else {
            out.extend_from_slice(esc);
        }
        start = i + 1;
    }
    out.extend_from_slice(&b[start..]);
    out.push(b'"');
}

fn push_u16_escape(out: &mut Vec<u8>, u: u32) {
    out.extend_from_slice(b"\\u");
    for shift in [12, 8, 4, 0] {
        out.push(HEX[((u >> shift) & 15) as usize]);
    }
}

/// A JSON string as Python's `json.dumps` writes it (ensure_ascii).
pub fn pyjson_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    for ch in s.chars() {
        let c = ch as u32;
        match ch {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            '\u{8}' => out.extend_from_slice(b"\\b"),
            '\u{c}' => out.extend_from_slice(b"\\f"),
            ' '..='~' => out.push(c as u8),
            _ => {
                if c >= 0x10000 {
                    let v = c - 0x10000;
                    push_u16_escape(out, 0xD800 | (v >> 10));
                    push_u16_escape(out, 0xDC00 | (v & 0x3FF));
                } else {
                    push_u16_escape(out, c);
                }
            }
        }
    }
    out.push(b'"');
}

/// `json.dumps(value, separators=(",", ":"))` of a small value built by the rules.
pub enum PyJ<'a> {
    Int(i64),
    Str(&'a str),
    OptStr(Option<&'a str>),
    Obj(Vec<(&'a str, PyJ<'a>)>),
}

pub fn pyjson(out: &mut Vec<u8>, v: &PyJ) {
    match v {
        PyJ::OptStr(None) => out.extend_from_slice(b"null"),
        PyJ::Int(n) => out.extend_from_slice(n.to_string().as_bytes()),
        PyJ::Str(s) | PyJ::OptStr(Some(s)) => pyjson_str(out, s),
        PyJ::Obj(entries) => {
            out.push(b'{');
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                pyjson_str(out, k);
                out.push(b':');
                pyjson(out, v);
            }
            out.push(b'}');
        }
    }
}
