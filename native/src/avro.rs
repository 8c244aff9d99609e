//! Avro binary records, driven by the same schemas the Python codec loads (`schemas/`).
//!
//! Writing follows `streams.codec.avro_writer` (whose bytes a test holds equal to
//! fastavro's): exact types, known enum symbols, a missing field only where the schema
//! has a default, union branches told apart by the value's type.  Reading takes the
//! current schema's records only (`Codec` reads older and registry schemas through
//! fastavro); JSON records are checked as `streams.codec.jsonform` checks them.  Anything
//! else is declined: the Python codec then reads it, or says why it cannot.

use std::collections::HashMap;
use std::rc::Rc;

use crate::json::{parse, J};
use crate::oracle::{decline, Stop, R};

#[derive(Debug, Clone)]
pub enum Sch {
    Null,
    Bool,
    Int,
    Long,
    Float,
    Double,
    Bytes,
    Str,
    Enum(Rc<Vec<String>>),
    Array(Box<Sch>),
    #[allow(dead_code)] // read and written by no field of the contract's records
    Map(Box<Sch>),
    Record(Rc<Rec>),
    Union(Vec<Sch>),
}

#[derive(Debug)]
pub struct Rec {
    pub fields: Vec<Field>,
}

#[derive(Debug)]
pub struct Field {
    pub name: String,
    pub ty: Sch,
    pub has_default: bool,
    /// The default as written when the field is missing (None: none is generated).
    pub default_bytes: Option<Vec<u8>>,
    /// The default as read (a JSON record missing the field).
    pub default_value: Option<DV>,
}

/// A decoded value.  Alike in shape with json.rs's `J` and its `get` (duplicates lists
/// the pair), deliberately: a JSON text and an Avro value are told apart (`from_json`
/// turns one into the other against the schema), so each has its own type.
#[derive(Debug, Clone, PartialEq)]
pub enum DV {
    Null,
    Bool(bool),
    Long(i64),
    Str(String),
    Bytes(Vec<u8>),
    Arr(Vec<DV>),
    Rec(Vec<(String, DV)>),
}

impl DV {
    pub fn field(&self, name: &str) -> Option<&DV> {
        match self {
            DV::Rec(fields) => fields.iter().find(|(k, _)| k == name).map(|(_, v)| v),
            _ => None,
        }
    }
}

/// A value to write.
pub enum AV<'a> {
    Null,
    Bool(bool),
    Long(i64),
    Str(&'a str),
    Bytes(&'a [u8]),
    Arr(Vec<AV<'a>>),
    Rec(Vec<(&'static str, AV<'a>)>),
}

impl<'a> AV<'a> {
    pub fn opt_str(s: Option<&'a str>) -> AV<'a> {
        match s {
            None => AV::Null,
            Some(s) => AV::Str(s),
        }
    }
    pub fn opt_long(n: Option<i64>) -> AV<'a> {
        match n {
            None => AV::Null,
            Some(n) => AV::Long(n),
        }
    }
}

struct Parser {
    named: HashMap<String, Sch>,
}

fn obj_str<'j>(j: &'j J, key: &str) -> R<&'j str> {
    match j.get(key) {
        Some(J::Str(s)) => Ok(s),
        _ => decline("schema"),
    }
}

impl Parser {
    fn full_name(name: &str, namespace: &str) -> String {
        if name.contains('.') || namespace.is_empty() {
            name.to_string()
        } else {
            format!("{}.{}", namespace, name)
        }
    }

    fn parse(&mut self, j: &J, namespace: &str) -> R<Sch> {
        match j {
            J::Str(name) => self.primitive_or_named(name, namespace),
            J::Arr(branches) => Ok(Sch::Union(branches.iter().map(|b| self.parse(b, namespace)).collect::<R<_>>()?)),
            J::Obj(_) => {
                if j.get("logicalType").is_some() {
                    return decline("logical type");
                }
                let kind = match j.get("type") {
                    Some(J::Str(k)) => k.as_str(),
                    Some(other) => return self.parse(other, namespace),
                    None => return decline("schema"),
                };
                match kind {
                    "record" => {
                        let space = match j.get("namespace") {
                            Some(J::Str(s)) => s.clone(),
                            _ => namespace.to_string(),
                        };
                        let name = Parser::full_name(obj_str(j, "name")?, &space);
                        let mut fields = Vec::new();
                        let raw_fields = match j.get("fields") {
                            Some(J::Arr(f)) => f,
                            _ => return decline("schema"),
                        };
                        for f in raw_fields {
                            let ty = self.parse(f.get("type").ok_or(Stop::Decline("schema"))?, &space)?;
                            let default = f.get("default");
                            let default_bytes = default.and_then(|d| default_bytes(&ty, d));
                            let default_value = default.and_then(|d| default_value(&ty, d));
                            fields.push(Field { name: obj_str(f, "name")?.to_string(), ty, has_default: default.is_some(), default_bytes, default_value });
                        }
                        let sch = Sch::Record(Rc::new(Rec { fields }));
                        self.named.insert(name, sch.clone());
                        Ok(sch)
                    }
                    "enum" => {
                        let space = match j.get("namespace") {
                            Some(J::Str(s)) => s.clone(),
                            _ => namespace.to_string(),
                        };
                        let name = Parser::full_name(obj_str(j, "name")?, &space);
                        let symbols = match j.get("symbols") {
                            Some(J::Arr(s)) => s.iter().map(|x| match x {
                                J::Str(s) => Ok(s.clone()),
                                _ => decline("schema"),
                            }).collect::<R<Vec<String>>>()?,
                            _ => return decline("schema"),
                        };
                        let sch = Sch::Enum(Rc::new(symbols));
                        self.named.insert(name, sch.clone());
                        Ok(sch)
                    }
                    "array" => Ok(Sch::Array(Box::new(self.parse(j.get("items").ok_or(Stop::Decline("schema"))?, namespace)?))),
                    "map" => Ok(Sch::Map(Box::new(self.parse(j.get("values").ok_or(Stop::Decline("schema"))?, namespace)?))),
                    other => self.primitive_or_named(other, namespace),
                }
            }
            _ => decline("schema"),
        }
    }

    fn primitive_or_named(&self, name: &str, namespace: &str) -> R<Sch> {
        Ok(match name {
            "null" => Sch::Null,
            "boolean" => Sch::Bool,
            "int" => Sch::Int,
            "long" => Sch::Long,
            "float" => Sch::Float,
            "double" => Sch::Double,
            "bytes" => Sch::Bytes,
            "string" => Sch::Str,
            _ => {
                let full = Parser::full_name(name, namespace);
                match self.named.get(&full).or_else(|| self.named.get(name)) {
                    Some(s) => s.clone(),
                    None => return decline("unknown type name"),
                }
            }
        })
    }
}

pub fn parse_schema(text: &str) -> R<Rc<Rec>> {
    let j = parse(text.as_bytes()).ok_or(Stop::Decline("schema json"))?;
    let mut p = Parser { named: HashMap::new() };
    match p.parse(&j, "")? {
        Sch::Record(r) => Ok(r),
        _ => decline("not a record schema"),
    }
}

fn zigzag(out: &mut Vec<u8>, n: i64) {
    let mut z = ((n << 1) ^ (n >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn default_bytes(ty: &Sch, d: &J) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    match (ty, d) {
        (Sch::Union(b), J::Null) if matches!(b.first(), Some(Sch::Null)) => zigzag(&mut out, 0),
        (Sch::Array(_), J::Arr(a)) | (Sch::Map(_), J::Arr(a)) if a.is_empty() => out.push(0),
        (Sch::Map(_), J::Obj(o)) if o.is_empty() => out.push(0),
        (Sch::Bool, J::Bool(b)) => out.push(*b as u8),
        (Sch::Int, J::Int(n)) | (Sch::Long, J::Int(n)) => zigzag(&mut out, *n),
        (Sch::Str, J::Str(s)) => {
            zigzag(&mut out, s.len() as i64);
            out.extend_from_slice(s.as_bytes());
        }
        (Sch::Enum(symbols), J::Str(s)) => zigzag(&mut out, symbols.iter().position(|x| x == s)? as i64),
        _ => return None,
    }
    Some(out)
}

fn default_value(ty: &Sch, d: &J) -> Option<DV> {
    Some(match (ty, d) {
        (_, J::Null) => DV::Null,
        (_, J::Bool(b)) => DV::Bool(*b),
        (_, J::Int(n)) => DV::Long(*n),
        (_, J::Str(s)) => DV::Str(s.clone()),
        (Sch::Array(_), J::Arr(a)) if a.is_empty() => DV::Arr(vec![]),
        _ => return None,
    })
}

// ------------------------------------------------------------------- writing

pub fn encode(rec: &Rec, value: &AV) -> R<Vec<u8>> {
    let mut out = Vec::with_capacity(256);
    write_record(&mut out, rec, value)?;
    Ok(out)
}

fn write_record(out: &mut Vec<u8>, rec: &Rec, value: &AV) -> R<()> {
    let fields = match value {
        AV::Rec(f) => f,
        _ => return decline("not a record"),
    };
    if fields.iter().any(|(k, _)| !rec.fields.iter().any(|f| f.name == *k)) {
        return decline("a field the schema does not know");
    }
    for f in &rec.fields {
        match fields.iter().find(|(k, _)| *k == f.name) {
            Some((_, v)) => write(out, &f.ty, v)?,
            None => match &f.default_bytes {
                Some(b) => out.extend_from_slice(b),
                None => return decline("a missing field without default"),
            },
        }
    }
    Ok(())
}

fn write(out: &mut Vec<u8>, ty: &Sch, v: &AV) -> R<()> {
    match (ty, v) {
        (Sch::Null, AV::Null) => {}
        (Sch::Bool, AV::Bool(b)) => out.push(*b as u8),
        (Sch::Int, AV::Long(n)) => {
            if *n < i32::MIN as i64 || *n > i32::MAX as i64 {
                return decline("int out of range");
            }
            zigzag(out, *n)
        }
        (Sch::Long, AV::Long(n)) => zigzag(out, *n),
        (Sch::Str, AV::Str(s)) => {
            zigzag(out, s.len() as i64);
            out.extend_from_slice(s.as_bytes());
        }
        (Sch::Bytes, AV::Bytes(b)) => {
            zigzag(out, b.len() as i64);
            out.extend_from_slice(b);
        }
        (Sch::Enum(symbols), AV::Str(s)) => match symbols.iter().position(|x| x == s) {
            Some(i) => zigzag(out, i as i64),
            None => return decline("enum symbol"),
        },
        (Sch::Array(item), AV::Arr(items)) => {
            if !items.is_empty() {
                zigzag(out, items.len() as i64);
                for i in items {
                    write(out, item, i)?;
                }
            }
            out.push(0);
        }
        (Sch::Record(rec), AV::Rec(_)) => write_record(out, rec, v)?,
        (Sch::Union(branches), v) => {
            let class = |s: &Sch| -> u8 {
                match s {
                    Sch::Null => 0,
                    Sch::Bool => 1,
                    Sch::Int | Sch::Long => 2,
                    Sch::Float | Sch::Double => 3,
                    Sch::Bytes => 4,
                    Sch::Str | Sch::Enum(_) => 5,
                    Sch::Record(_) | Sch::Map(_) => 6,
                    Sch::Array(_) => 7,
                    Sch::Union(_) => 8,
                }
            };
            let mut classes: Vec<u8> = branches.iter().map(class).collect();
            classes.sort();
            classes.dedup();
            if classes.len() != branches.len() {
                return decline("union branches not told apart by type");
            }
            let want = match v {
                AV::Null => 0,
                AV::Bool(_) => 1,
                AV::Long(_) => 2,
                AV::Bytes(_) => 4,
                AV::Str(_) => 5,
                AV::Rec(_) => 6,
                AV::Arr(_) => 7,
            };
            match branches.iter().position(|b| class(b) == want) {
                Some(i) => {
                    zigzag(out, i as i64);
                    write(out, &branches[i], v)?;
                }
                None => return decline("no union branch for the value"),
            }
        }
        _ => return decline("a value of another type"),
    }
    Ok(())
}

// ------------------------------------------------------------------- reading

struct Reader<'a> {
    d: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn long(&mut self) -> R<i64> {
        let mut z: u64 = 0;
        let mut shift = 0;
        loop {
            let b = *self.d.get(self.pos).ok_or(Stop::Decline("avro cut"))?;
            self.pos += 1;
            if shift == 63 && b > 1 {
                return decline("avro long beyond 64 bits");
            }
            z |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift > 63 {
                return decline("avro long beyond 64 bits");
            }
        }
        Ok((z >> 1) as i64 ^ -((z & 1) as i64))
    }

    fn bytes(&mut self) -> R<&'a [u8]> {
        let n = self.long()?;
        if n < 0 {
            return decline("negative length");
        }
        let end = self.pos.checked_add(n as usize).ok_or(Stop::Decline("length"))?;
        let b = self.d.get(self.pos..end).ok_or(Stop::Decline("avro cut"))?;
        self.pos = end;
        Ok(b)
    }

    fn value(&mut self, ty: &Sch) -> R<DV> {
        Ok(match ty {
            Sch::Null => DV::Null,
            Sch::Bool => match self.d.get(self.pos) {
                Some(0) => {
                    self.pos += 1;
                    DV::Bool(false)
                }
                Some(1) => {
                    self.pos += 1;
                    DV::Bool(true)
                }
                _ => return decline("avro boolean"),
            },
            Sch::Int => {
                let n = self.long()?;
                if n < i32::MIN as i64 || n > i32::MAX as i64 {
                    return decline("avro int out of range");
                }
                DV::Long(n)
            }
            Sch::Long => DV::Long(self.long()?),
            Sch::Str => DV::Str(std::str::from_utf8(self.bytes()?).map_err(|_| Stop::Decline("utf-8"))?.to_string()),
            Sch::Bytes => DV::Bytes(self.bytes()?.to_vec()),
            Sch::Enum(symbols) => {
                let i = self.long()?;
                match usize::try_from(i).ok().and_then(|i| symbols.get(i)) {
                    Some(s) => DV::Str(s.clone()),
                    None => return decline("enum index"),
                }
            }
            Sch::Array(item) => {
                let mut items = Vec::new();
                loop {
                    let n = self.long()?;
                    if n == 0 {
                        break;
                    }
                    if n < 0 {
                        return decline("array block with a size");
                    }
                    for _ in 0..n {
                        items.push(self.value(item)?);
                    }
                }
                DV::Arr(items)
            }
            Sch::Record(rec) => {
                let mut fields = Vec::with_capacity(rec.fields.len());
                for f in &rec.fields {
                    fields.push((f.name.clone(), self.value(&f.ty)?));
                }
                DV::Rec(fields)
            }
            Sch::Union(branches) => {
                let i = self.long()?;
                match usize::try_from(i).ok().and_then(|i| branches.get(i)) {
                    Some(b) => self.value(b)?,
                    None => return decline("union index"),
                }
            }
            Sch::Map(_) | Sch::Float | Sch::Double => return decline("type not read natively"),
        })
    }
}

/// An Avro body of `rec`, read to its last byte.
pub fn decode(rec: &Rc<Rec>, body: &[u8]) -> R<DV> {
    let mut r = Reader { d: body, pos: 0 };
    let v = r.value(&Sch::Record(rec.clone()))?;
    if r.pos != body.len() {
        return decline("trailing bytes");
    }
    Ok(v)
}

/// A JSON object checked as `streams.codec.jsonform` checks it against `rec`.
pub fn from_json(rec: &Rec, j: &J) -> R<DV> {
    let entries = match j {
        J::Obj(e) => e,
        _ => return decline("not an object"),
    };
    if entries.iter().any(|(k, _)| !rec.fields.iter().any(|f| f.name == *k)) {
        return decline("unknown field");
    }
    let mut out = Vec::with_capacity(rec.fields.len());
    for f in &rec.fields {
        let v = match j.get(&f.name) {
            Some(v) => json_value(&f.ty, v)?,
            None if f.has_default => f.default_value.clone().ok_or(Stop::Decline("default"))?,
            None => return decline("missing field"),
        };
        out.push((f.name.clone(), v));
    }
    Ok(DV::Rec(out))
}

fn json_value(ty: &Sch, j: &J) -> R<DV> {
    Ok(match (ty, j) {
        (Sch::Null, J::Null) => DV::Null,
        (Sch::Bool, J::Bool(b)) => DV::Bool(*b),
        (Sch::Int, J::Int(n)) if *n >= i32::MIN as i64 && *n <= i32::MAX as i64 => DV::Long(*n),
        (Sch::Long, J::Int(n)) => DV::Long(*n),
        (Sch::Str, J::Str(s)) => DV::Str(s.clone()),
        (Sch::Enum(symbols), J::Str(s)) if symbols.contains(s) => DV::Str(s.clone()),
        (Sch::Array(item), J::Arr(items)) => DV::Arr(items.iter().map(|i| json_value(item, i)).collect::<R<_>>()?),
        (Sch::Record(rec), J::Obj(_)) => from_json(rec, j)?,
        (Sch::Union(branches), J::Null) if branches.iter().any(|b| matches!(b, Sch::Null)) => DV::Null,
        (Sch::Union(branches), v) => {
            let others: Vec<&Sch> = branches.iter().filter(|b| !matches!(b, Sch::Null)).collect();
            if others.len() != 1 {
                return decline("a union of several types");
            }
            json_value(others[0], v)?
        }
        _ => return decline("a JSON value of another type"),
    })
}
