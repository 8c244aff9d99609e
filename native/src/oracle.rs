//! What the native rules ask Python, and the definitions they decide with.
//!
//! The verdict on a reply's data (JSON parsing, the JSON Schema check, their messages),
//! combining a chained wait's answers, ISO 8601 durations and `repr` of text that is
//! not plain ASCII stay Python's: the native rules call the very functions the Python
//! rules call (`streams.core.native.Helpers`), so those texts are equal by construction.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};

use crate::model::*;
use crate::text;

/// Why a native decision stopped: the Python path decides the record instead.
#[derive(Debug)]
pub enum Stop {
    Decline(&'static str),
}

pub type R<T> = Result<T, Stop>;

pub fn decline<T>(why: &'static str) -> R<T> {
    Err(Stop::Decline(why))
}

impl From<PyErr> for Stop {
    fn from(_: PyErr) -> Stop {
        Stop::Decline("python helper raised")
    }
}

/// A checked sum: Python's integers do not overflow, so a result beyond 64 bits is left
/// to Python.
pub fn add(a: i64, b: i64) -> R<i64> {
    a.checked_add(b).ok_or(Stop::Decline("integer overflow"))
}

pub fn sub(a: i64, b: i64) -> R<i64> {
    a.checked_sub(b).ok_or(Stop::Decline("integer overflow"))
}

/// A version of a definition, and the Python object it was read from (kept alive).
type Version = (Py<PyAny>, Rc<Definition>);

pub struct Definitions {
    pub newest: HashMap<String, Rc<Definition>>,
    pub sorted_names: Vec<String>,
    pub longest_ttl: i64,
    pub mapping: Py<PyAny>,
    /// Other versions, by the Python object they were read from (kept alive here).
    versions: RefCell<HashMap<usize, Version>>,
}

fn get<'py, T: pyo3::conversion::FromPyObjectOwned<'py>>(obj: &Bound<'py, PyAny>, name: &str) -> PyResult<T> {
    obj.getattr(name)?.extract().map_err(Into::into)
}

fn enum_value(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<String> {
    obj.getattr(name)?.getattr("value")?.extract()
}

pub fn read_definition(d: &Bound<'_, PyAny>) -> PyResult<Definition> {
    let mut stages = Vec::new();
    for s in d.getattr("stages")?.try_iter()? {
        let s = s?;
        let reminder = s.getattr("reminder")?;
        let reminder = if reminder.is_none() {
            None
        } else {
            Some(ReminderPolicy { interval_ms: get(&reminder, "interval_ms")?, limit: get(&reminder, "limit")? })
        };
        let mut escalation = Vec::new();
        for e in s.getattr("escalation")?.try_iter()? {
            let e = e?;
            escalation.push(EscalationLevel { target: get(&e, "target")?, deadline_ms: get(&e, "deadline_ms")? });
        }
        stages.push(Stage { name: get(&s, "name")?, deadline_ms: get(&s, "deadline_ms")?, party: get(&s, "party")?, reminder, escalation });
    }
    let variant = Variant::parse(&enum_value(d, "variant")?)
        .ok_or_else(|| pyo3::exceptions::PyValueError::new_err("unknown variant"))?;
    let policy = d.getattr("on_send_failure")?;
    let on_send_failure = if policy.is_none() {
        None
    } else {
        let then = match enum_value(&policy, "then")?.as_str() {
            "escalate" => SendFailureRoute::Escalate,
            "review" => SendFailureRoute::Review,
            _ => return Err(pyo3::exceptions::PyValueError::new_err("unknown route")),
        };
        Some(SendFailurePolicy { retries: get(&policy, "retries")?, backoff_ms: get(&policy, "backoff_ms")?, then })
    };
    Ok(Definition {
        name: get(d, "name")?,
        variant,
        stages,
        parties: get(d, "parties")?,
        invalid_reply_escalate: enum_value(d, "invalid_reply")? == "escalate",
        early_reply_ttl_ms: get(d, "early_reply_ttl_ms")?,
        retention_ms: get(d, "retention_ms")?,
        poll_interval_ms: get(d, "poll_interval_ms")?,
        on_send_failure,
        version: get(d, "version")?,
        py: d.clone().unbind(),
    })
}

impl Definitions {
    pub fn read(mapping: &Bound<'_, PyAny>) -> PyResult<Definitions> {
        let mut newest = HashMap::new();
        let mut names = Vec::new();
        let mut longest: Option<i64> = None;
        for item in mapping.call_method0("items")?.try_iter()? {
            let item = item?;
            let name: String = item.get_item(0)?.extract()?;
            let d = Rc::new(read_definition(&item.get_item(1)?)?);
            longest = Some(longest.map_or(d.early_reply_ttl_ms, |l| l.max(d.early_reply_ttl_ms)));
            names.push(name.clone());
            newest.insert(name, d);
        }
        names.sort();
        Ok(Definitions {
            newest,
            sorted_names: names,
            longest_ttl: longest.unwrap_or(DEFAULT_EARLY_REPLY_TTL_MS),
            mapping: mapping.clone().unbind(),
            versions: RefCell::new(HashMap::new()),
        })
    }
}

pub struct Oracle<'py> {
    pub py: Python<'py>,
    pub helpers: Bound<'py, PyAny>,
    pub defs: &'py Definitions,
}

pub struct Verdict {
    pub issue: Option<String>,
    pub not_ready: bool,
}

impl<'py> Oracle<'py> {
    /// `ctx.definitions.get(name)`: the newest of a name.
    pub fn newest(&self, name: &str) -> Option<Rc<Definition>> {
        self.defs.newest.get(name).cloned()
    }

    /// `definition_for(definitions, name, version)`.
    pub fn definition_for(&self, name: &str, version: Option<&str>) -> R<Option<Rc<Definition>>> {
        let newest = self.defs.newest.get(name);
        match (version, newest) {
            (None, n) => return Ok(n.cloned()),
            (Some(v), Some(n)) if n.version == v => return Ok(Some(n.clone())),
            _ => {}
        }
        let found = self.helpers.call_method1("definition_for", (self.defs.mapping.bind(self.py), name, version))?;
        if found.is_none() {
            return Ok(None);
        }
        let id = found.as_ptr() as usize;
        if let Some((_, d)) = self.defs.versions.borrow().get(&id) {
            return Ok(Some(d.clone()));
        }
        let d = Rc::new(read_definition(&found)?);
        self.defs.versions.borrow_mut().insert(id, (found.unbind(), d.clone()));
        Ok(Some(d))
    }

    pub fn repr(&self, s: &str) -> R<String> {
        if let Some(r) = text::ascii_repr(s) {
            return Ok(r);
        }
        Ok(PyString::new(self.py, s).repr()?.extract()?)
    }

    pub fn repr_opt(&self, s: Option<&str>) -> R<String> {
        match s {
            None => Ok("None".to_string()),
            Some(s) => self.repr(s),
        }
    }

    /// `repr(list(strings))`.
    pub fn repr_list(&self, items: &[String]) -> R<String> {
        let mut parts = Vec::with_capacity(items.len());
        for s in items {
            parts.push(self.repr(s)?);
        }
        Ok(format!("[{}]", parts.join(", ")))
    }

    pub fn reply_verdict(&self, d: &Definition, data: &str, channel: &str, by_operator: bool) -> R<Verdict> {
        let got = self.helpers.call_method1("reply_verdict", (d.py.bind(self.py), data, channel, by_operator))?;
        let got = got.cast::<PyTuple>().map_err(|_| Stop::Decline("verdict"))?;
        Ok(Verdict { issue: got.get_item(0)?.extract()?, not_ready: got.get_item(1)?.extract()? })
    }

    pub fn correction_issue(&self, d: &Definition, data: Option<&str>) -> R<Option<String>> {
        Ok(self.helpers.call_method1("correction_issue", (d.py.bind(self.py), data))?.extract()?)
    }

    pub fn combine_stages(&self, d: &Definition, results: &[String]) -> R<String> {
        Ok(self.helpers.call_method1("combine_stages", (d.py.bind(self.py), results.to_vec()))?.extract()?)
    }

    /// `parse_duration_ms` (or the signed one): Ok(ms), or Err(the ValueError's text).
    pub fn duration(&self, text: &str, signed: bool) -> R<Result<i64, String>> {
        let got = self.helpers.call_method1("duration", (text, signed))?;
        let got = got.cast::<PyTuple>().map_err(|_| Stop::Decline("duration"))?;
        let ms: Option<i64> = got.get_item(0)?.extract()?;
        match ms {
            Some(ms) => Ok(Ok(ms)),
            None => Ok(Err(got.get_item(1)?.extract()?)),
        }
    }
}
