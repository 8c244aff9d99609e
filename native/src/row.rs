//! The waits table's row (streams/processor/envelope.py, `XR` version 2): the head, the
//! slot's bytes, the seen offsets.  A version 1 row, or one with an outbox (rows written
//! before 0.2.0), is left to Python.

use crate::model::*;
use crate::oracle::{decline, Stop, R};

pub const MAGIC: &[u8] = b"XR\x02";
const NONE32: u32 = 0xFFFF_FFFF;
pub const VERSION_SEPARATOR: char = '\u{1f}';

/// Alike in shape with model.rs's Wait (duplicates lists the pair), deliberately: the
/// envelope's head, field for field, declared apart from the wait it is taken from.
#[derive(Debug, Clone, PartialEq)]
pub struct Head {
    pub state: Option<WaitStatus>,
    pub definition: Option<String>,
    pub tenant: Option<String>,
    pub timers: Vec<ArmedTimer>,
    pub parked_at: i64,
    pub version: Option<String>,
}

impl Head {
    pub fn none() -> Head {
        Head { state: None, definition: None, tenant: None, timers: vec![], parked_at: 0, version: None }
    }
}

/// `head_of(slot, armed)`.
pub fn head_of(slot: Option<&Slot>, armed: &[ArmedTimer]) -> Head {
    let slot = match slot {
        None => return Head::none(),
        Some(s) => s,
    };
    let mut timers = armed.to_vec();
    timers.sort_by_key(|t| (t.due_at, t.generation));
    match &slot.wait {
        None => Head { timers, ..Head::none() },
        Some(w) => Head {
            state: Some(w.status),
            definition: Some(w.definition.clone()),
            tenant: w.tenant.clone(),
            timers,
            parked_at: w.parked_at,
            version: w.definition_version.clone(),
        },
    }
}

pub struct StoredRow<'a> {
    pub head: Head,
    pub slot: Option<&'a [u8]>,
    /// requests, replies, commands, timers; -1: none
    pub seen: [i64; 4],
}

fn u32_at(d: &[u8], pos: usize) -> R<u32> {
    let b = d.get(pos..pos + 4).ok_or(Stop::Decline("row cut"))?;
    Ok(u32::from_be_bytes(b.try_into().unwrap()))
}

fn i64_at(d: &[u8], pos: usize) -> R<i64> {
    let b = d.get(pos..pos + 8).ok_or(Stop::Decline("row cut"))?;
    Ok(i64::from_be_bytes(b.try_into().unwrap()))
}

fn str32(d: &[u8], pos: usize) -> R<(Option<String>, usize)> {
    let n = u32_at(d, pos)?;
    if n == NONE32 {
        return Ok((None, pos + 4));
    }
    let end = pos + 4 + n as usize;
    let b = d.get(pos + 4..end).ok_or(Stop::Decline("row cut"))?;
    let s = std::str::from_utf8(b).map_err(|_| Stop::Decline("row text"))?;
    Ok((Some(s.to_string()), end))
}

pub fn decode_row(d: &[u8]) -> R<StoredRow<'_>> {
    if !d.starts_with(MAGIC) {
        return decline("not a version 2 row");
    }
    let mut pos = MAGIC.len();
    let state_i = *d.get(pos).ok_or(Stop::Decline("row cut"))?;
    let count = *d.get(pos + 1).ok_or(Stop::Decline("row cut"))?;
    let parked_at = i64_at(d, pos + 2)?;
    pos += 10;
    let (definition, p) = str32(d, pos)?;
    let (tenant, p) = str32(d, p)?;
    pos = p;
    let mut timers = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let k = *d.get(pos).ok_or(Stop::Decline("row cut"))? as usize;
        let kind = *TimerKind::ALL.get(k).ok_or(Stop::Decline("timer kind"))?;
        timers.push(ArmedTimer { kind, due_at: i64_at(d, pos + 1)?, generation: i64_at(d, pos + 9)? });
        pos += 17;
    }
    let state = if state_i == 0 {
        None
    } else {
        Some(*WaitStatus::ALL.get(state_i as usize - 1).ok_or(Stop::Decline("row state"))?)
    };
    let (definition, version) = match definition {
        Some(text) if text.contains(VERSION_SEPARATOR) => {
            let (name, version) = text.split_once(VERSION_SEPARATOR).unwrap();
            (Some(name.to_string()), Some(version.to_string()))
        }
        other => (other, None),
    };
    let slot_len = u32_at(d, pos)? as usize;
    pos += 4;
    let slot = d.get(pos..pos + slot_len).ok_or(Stop::Decline("row cut"))?;
    pos += slot_len;
    let mut seen = [-1i64; 4];
    for (i, s) in seen.iter_mut().enumerate() {
        *s = i64_at(d, pos + 8 * i)?.max(-1); // below zero reads as none, written -1
    }
    pos += 32;
    let entries = d.get(pos..pos + 2).ok_or(Stop::Decline("row cut"))?;
    if entries != [0, 0] {
        return decline("a row with an outbox");
    }
    pos += 2;
    if pos != d.len() {
        return decline("trailing bytes in the row");
    }
    Ok(StoredRow {
        head: Head { state, definition, tenant, timers, parked_at, version },
        slot: if slot.is_empty() { None } else { Some(slot) },
        seen,
    })
}

fn put_str32(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        None => out.extend_from_slice(&NONE32.to_be_bytes()),
        Some(s) => {
            out.extend_from_slice(&(s.len() as u32).to_be_bytes());
            out.extend_from_slice(s.as_bytes());
        }
    }
}

pub fn encode_row(head: &Head, slot: &[u8], seen: &[i64; 4]) -> R<Vec<u8>> {
    if head.timers.len() > 255 {
        return decline("more timers than a row head holds");
    }
    let mut out = Vec::with_capacity(slot.len() + 128);
    out.extend_from_slice(MAGIC);
    out.push(match head.state {
        None => 0,
        Some(s) => s.index() as u8 + 1,
    });
    out.push(head.timers.len() as u8);
    out.extend_from_slice(&head.parked_at.to_be_bytes());
    let definition = match (&head.definition, &head.version) {
        (Some(d), Some(v)) => Some(format!("{}{}{}", d, VERSION_SEPARATOR, v)),
        (d, _) => d.clone(),
    };
    put_str32(&mut out, definition.as_deref());
    put_str32(&mut out, head.tenant.as_deref());
    for t in &head.timers {
        out.push(t.kind.index() as u8);
        out.extend_from_slice(&t.due_at.to_be_bytes());
        out.extend_from_slice(&t.generation.to_be_bytes());
    }
    out.extend_from_slice(&(slot.len() as u32).to_be_bytes());
    out.extend_from_slice(slot);
    for s in seen {
        out.extend_from_slice(&s.to_be_bytes());
    }
    out.extend_from_slice(&[0, 0]);
    Ok(out)
}
