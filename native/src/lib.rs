//! `streams._native`: the native record path of xwait (streams/core/native.py says when
//! it is used, and how it is held equal to the Python rules, which stay the reference).

mod avro;
mod handler;
mod json;
mod model;
mod oracle;
mod pyconv;
mod records;
mod row;
mod rules;
mod slotcodec;
mod text;

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use pyo3::prelude::*;
use pyo3::{intern, IntoPyObjectExt};
use pyo3::types::{PyBytes, PyDict, PyFrozenSet, PyList, PyString, PyTuple};

use crate::handler::{Env, Handle, RowWrite};
use crate::records::{Codecs, RT};
use crate::model::*;
use crate::oracle::{Definitions, Oracle, Stop, R};
use crate::pyconv::*;
use crate::row::Head;

#[pyclass(unsendable)]
struct Core {
    defs: Definitions,
    codecs: Codecs,
    partitions: i64,
    timers_topic: String,
    helpers: Py<PyAny>,
    /// None: a core for `decide` alone (the equality harness).
    types: Option<Types>,
    declines: RefCell<HashMap<&'static str, u64>>,
}

impl Core {
    fn count(&self, why: &'static str) {
        *self.declines.borrow_mut().entry(why).or_insert(0) += 1;
    }

    fn oracle<'py>(&'py self, py: Python<'py>) -> Oracle<'py> {
        Oracle { py, helpers: self.helpers.bind(py).clone(), defs: &self.defs }
    }

    fn timer_obj<'py>(&self, py: Python<'py>, t: &ArmedTimer, cache: &mut Vec<(ArmedTimer, Bound<'py, PyAny>)>) -> PyResult<Bound<'py, PyAny>> {
        if let Some((_, o)) = cache.iter().find(|(x, _)| x == t) {
            return Ok(o.clone());
        }
        let types = self.types.as_ref().unwrap();
        let o = types.armed_timer.make(py, &[
            (intern!(py, "kind"), types.timer_kinds[t.kind.index()].bind(py)),
            (intern!(py, "due_at"), &t.due_at.into_bound_py_any(py)?),
            (intern!(py, "generation"), &t.generation.into_bound_py_any(py)?),
        ])?;
        cache.push((*t, o.clone()));
        Ok(o)
    }

    fn head_obj<'py>(&self, py: Python<'py>, h: &Head, cache: &mut Vec<(ArmedTimer, Bound<'py, PyAny>)>) -> PyResult<Bound<'py, PyAny>> {
        let types = self.types.as_ref().unwrap();
        let timers: Vec<Bound<'py, PyAny>> = h.timers.iter().map(|t| self.timer_obj(py, t, cache)).collect::<PyResult<_>>()?;
        let state = match h.state {
            None => py.None().into_bound(py),
            Some(s) => types.statuses[s.index()].bind(py).clone(),
        };
        types.row_head.make(py, &[
            (intern!(py, "state"), &state),
            (intern!(py, "definition"), &h.definition.as_deref().into_bound_py_any(py)?),
            (intern!(py, "tenant"), &h.tenant.as_deref().into_bound_py_any(py)?),
            (intern!(py, "timers"), PyTuple::new(py, timers)?.as_any()),
            (intern!(py, "parked_at"), &h.parked_at.into_bound_py_any(py)?),
            (intern!(py, "version"), &h.version.as_deref().into_bound_py_any(py)?),
        ])
    }

    fn out_obj<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>, o: &handler::Output) -> PyResult<Bound<'py, PyAny>> {
        let t = self.types.as_ref().unwrap();
        let headers = match &o.traceparent {
            None => py.None().into_bound(py),
            Some(tp) => {
                let header = PyTuple::new(py, [intern!(py, "traceparent").clone().into_any(), PyBytes::new(py, tp.as_bytes()).into_any()])?;
                PyTuple::new(py, [header])?.into_any()
            }
        };
        t.out_record.make(py, &[
            (intern!(py, "role"), t.roles[o.role].bind(py)),
            (intern!(py, "key"), key),
            (intern!(py, "value"), PyBytes::new(py, &o.value).as_any()),
            (intern!(py, "partition"), &py.None().into_bound(py)),
            (intern!(py, "headers"), &headers),
        ])
    }

    fn handled_obj<'py>(&self, py: Python<'py>, wait_key: &str, h: handler::Handled) -> PyResult<Bound<'py, PyAny>> {
        let t = self.types.as_ref().unwrap();
        let mut cache: Vec<(ArmedTimer, Bound<'py, PyAny>)> = Vec::new();
        let before: Vec<Bound<'py, PyAny>> = h.timers_before.iter().map(|x| self.timer_obj(py, x, &mut cache)).collect::<PyResult<_>>()?;
        let after: Vec<Bound<'py, PyAny>> = h.timers_after.iter().map(|x| self.timer_obj(py, x, &mut cache)).collect::<PyResult<_>>()?;
        let head_before = self.head_obj(py, &h.head_before, &mut cache)?;
        let head_after = if h.head_after == h.head_before { head_before.clone() } else { self.head_obj(py, &h.head_after, &mut cache)? };
        let key = PyBytes::new(py, wait_key.as_bytes()).into_any();
        let out: Vec<Bound<'py, PyAny>> = h.out.iter().map(|o| self.out_obj(py, &key, o)).collect::<PyResult<_>>()?;
        let mut outcomes = Vec::with_capacity(h.outcomes.len());
        for o in &h.outcomes {
            let trace: Vec<Bound<'py, PyAny>> = o.trace.iter()
                .map(|e| t.trace_entry.make(py, &[
                    (intern!(py, "at"), &e.at.into_bound_py_any(py)?),
                    (intern!(py, "event"), PyString::new(py, &e.event).as_any()),
                    (intern!(py, "detail"), PyString::new(py, &e.detail).as_any()),
                ]))
                .collect::<PyResult<_>>()?;
            let fields = outcome_fields(py, o, PyTuple::new(py, trace)?.into_any(),
                                        t.outcome_kinds[o.outcome.index()].bind(py).clone(),
                                        t.outcome_reasons[o.reason.index()].bind(py).clone())?;
            let fields: Vec<(&Bound<'py, PyString>, &Bound<'py, PyAny>)> = fields.iter().map(|(k, v)| (*k, v)).collect();
            outcomes.push(t.emit_outcome.make(py, &fields)?);
        }
        let row = match h.row {
            RowWrite::Unchanged => t.row_unchanged.bind(py).clone(),
            RowWrite::Delete => t.row_delete.bind(py).clone(),
            RowWrite::Write(b) => PyBytes::new(py, &b).into_any(),
        };
        let none = py.None().into_bound(py);
        let unindexed = match h.unindexed {
            Some((kind, due)) => (t.timer_kinds[kind.index()].bind(py), due).into_bound_py_any(py)?,
            None => none.clone(),
        };
        let timer = match h.timer {
            Some(timer) => self.timer_obj(py, &timer, &mut cache)?,
            None => none.clone(),
        };
        t.handled.make(py, &[
            (intern!(py, "wait_key"), PyString::new(py, wait_key).as_any()),
            (intern!(py, "row"), &row),
            (intern!(py, "timers_before"), PyFrozenSet::new(py, before.iter())?.as_any()),
            (intern!(py, "timers_after"), PyFrozenSet::new(py, after.iter())?.as_any()),
            (intern!(py, "head_before"), &head_before),
            (intern!(py, "head_after"), &head_after),
            (intern!(py, "out"), PyList::new(py, out)?.as_any()),
            (intern!(py, "counters"), PyList::new(py, h.counters)?.as_any()),
            (intern!(py, "outcomes"), PyList::new(py, outcomes)?.as_any()),
            (intern!(py, "not_due"), &none),
            (intern!(py, "unindexed"), &unindexed),
            (intern!(py, "timer"), &timer),
            (intern!(py, "traceparent"), &h.traceparent.as_deref().into_bound_py_any(py)?),
        ])
    }
}

fn loader<'py>(py: Python<'py>, load: &'py Bound<'py, PyAny>) -> impl FnMut(&str) -> R<Option<Vec<u8>>> + 'py {
    move |key: &str| {
        let got = load.call1((key,)).map_err(|_| Stop::Decline("load raised"))?;
        if got.is_none() {
            return Ok(None);
        }
        let b = got.cast::<PyBytes>().map_err(|_| Stop::Decline("a stored row that is not bytes"))?;
        let _ = py;
        Ok(Some(b.as_bytes().to_vec()))
    }
}

#[pymethods]
impl Core {
    /// `definitions`: the handler's mapping of definitions (a `DefinitionSet` or a dict);
    /// `helpers`: what the rules ask Python; `types`: the classes of the results;
    /// `codecs`: record type name -> (schema JSON, header written, headers read natively).
    #[new]
    fn new(py: Python<'_>, definitions: &Bound<'_, PyAny>, partitions: i64, timers_topic: String,
           helpers: &Bound<'_, PyAny>, types: Option<&Bound<'_, PyAny>>, codecs: Option<&Bound<'_, PyDict>>) -> PyResult<Core> {
        let mut c = Codecs { schemas: HashMap::new(), write_headers: HashMap::new(), read_headers: HashMap::new() };
        for (name, entry) in codecs.map(|c| c.iter().collect::<Vec<_>>()).unwrap_or_default() {
            let name: String = name.extract()?;
            // A record type the native path never reads nor writes (a Receipt): not needed.
            let Some(rt) = RT::parse(&name) else { continue };
            let (schema, header, reads): (String, Vec<u8>, Vec<Vec<u8>>) = entry.extract()?;
            let rec = avro::parse_schema(&schema).map_err(|_| bad("a schema the native codec cannot read"))?;
            c.schemas.insert(rt, rec);
            c.write_headers.insert(rt, header);
            for h in reads {
                c.read_headers.insert(h, rt);
            }
        }
        Ok(Core {
            defs: Definitions::read(definitions)?,
            codecs: c,
            partitions,
            timers_topic,
            helpers: helpers.clone().unbind(),
            types: match types {
                Some(t) => Some(Types::read(py, t)?),
                None => None,
            },
            declines: RefCell::new(HashMap::new()),
        })
    }

    /// `RecordHandler.handle` natively: a `Handled`, or None when Python must decide it.
    fn handle<'py>(&self, py: Python<'py>, rec: &Bound<'py, PyAny>, load: &Bound<'py, PyAny>, now_ms: i64) -> PyResult<Option<Bound<'py, PyAny>>> {
        let types = self.types.as_ref().ok_or_else(|| bad("a core made for decide alone"))?;
        let role_obj = rec.getattr("role")?;
        let role = match types.roles.iter().position(|r| r.bind(py).is(&role_obj)) {
            Some(r) => r,
            None => return Ok(None),
        };
        let topic: String = rec.getattr("topic")?.extract()?;
        let partition: i64 = rec.getattr("partition")?.extract()?;
        let offset: i64 = rec.getattr("offset")?.extract()?;
        let key_obj = rec.getattr("key")?;
        let value_obj = rec.getattr("value")?;
        let key: Option<&[u8]> = if key_obj.is_none() { None } else { Some(key_obj.cast::<PyBytes>()?.as_bytes()) };
        let value: Option<&[u8]> = if value_obj.is_none() { None } else { Some(value_obj.cast::<PyBytes>()?.as_bytes()) };
        if !rec.getattr("receipt")?.is_none() {
            // Its sender asked for a Receipt (streams.core.receipts): decided in Python.
            self.count("a receipt asked for");
            return Ok(None);
        }
        let traceparent: Option<String> = rec.getattr("traceparent")?.extract()?;
        let oracle = self.oracle(py);
        let env = Env { oracle: &oracle, codecs: &self.codecs, timers_topic: &self.timers_topic };
        let mut load_row = loader(py, load);
        match handler::handle(&env, self.partitions, role, &topic, partition, offset, key, value, traceparent.as_deref(), now_ms, &mut load_row) {
            Err(Stop::Decline(why)) => {
                self.count(why);
                Ok(None)
            }
            Ok(Handle::Replayed) => {
                let kw = PyDict::new(py);
                kw.set_item("counters", PyList::new(py, ["replayed"])?)?;
                Ok(Some(types.handled.class(py).call((), Some(&kw))?))
            }
            Ok(Handle::Decided(wait_key, h)) => Ok(Some(self.handled_obj(py, &wait_key, *h)?)),
        }
    }

    /// `RecordHandler.fire` natively: a `Handled`, or None when Python must decide it.
    fn fire<'py>(&self, py: Python<'py>, timer: &Bound<'py, PyAny>, load: &Bound<'py, PyAny>, now_ms: i64, until: i64) -> PyResult<Option<Bound<'py, PyAny>>> {
        if self.types.is_none() {
            return Err(bad("a core made for decide alone"));
        }
        let wait_key: String = timer.getattr("wait_key")?.extract()?;
        let kind = match TimerKind::parse(&enum_text(timer, "kind")?) {
            Some(k) => k,
            None => return Ok(None),
        };
        let partition: i64 = timer.getattr("partition")?.extract()?;
        let due_at: i64 = timer.getattr("due_at")?.extract()?;
        let generation: i64 = timer.getattr("generation")?.extract()?;
        let oracle = self.oracle(py);
        let env = Env { oracle: &oracle, codecs: &self.codecs, timers_topic: &self.timers_topic };
        let mut load_row = loader(py, load);
        match handler::fire(&env, partition, &wait_key, kind, due_at, generation, now_ms, until, &mut load_row) {
            Err(Stop::Decline(why)) => {
                self.count(why);
                Ok(None)
            }
            Ok(h) => Ok(Some(self.handled_obj(py, &wait_key, h)?)),
        }
    }

    /// `decide(slot, event, now)` on a stored slot's bytes, for the equality harness:
    /// (changed, slot bytes or None, effects, armed before, armed after), or None.
    fn decide<'py>(&self, py: Python<'py>, slot: Option<&[u8]>, event: &Bound<'py, PyAny>, now_ms: i64) -> PyResult<Option<Bound<'py, PyAny>>> {
        let event = event_from_py(event)?;
        self.decision(py, slot, Some(&event), now_ms)
    }

    /// `catch_up(slot, now)` on a stored slot's bytes, as `decide` above.
    fn catch_up<'py>(&self, py: Python<'py>, slot: Option<&[u8]>, now_ms: i64) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.decision(py, slot, None, now_ms)
    }

    /// Why records were left to Python, and how often.
    fn declines(&self) -> HashMap<String, u64> {
        self.declines.borrow().iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }
}

impl Core {
    fn decision<'py>(&self, py: Python<'py>, slot: Option<&[u8]>, event: Option<&Event>, now_ms: i64) -> PyResult<Option<Bound<'py, PyAny>>> {
        let oracle = self.oracle(py);
        let run = || -> R<(bool, Option<Vec<u8>>, rules::Decision)> {
            let before: Option<Rc<Slot>> = match slot {
                Some(b) => Some(Rc::new(slotcodec::decode_slot(b)?)),
                None => None,
            };
            let d = match event {
                Some(e) => rules::decide(&before, e, now_ms, &oracle)?,
                None => rules::catch_up(&before, now_ms, &oracle)?,
            };
            let same = match (&d.slot, &before) {
                (Some(a), Some(b)) => Rc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            };
            let bytes = match &d.slot {
                Some(s) => Some(slotcodec::encode_slot(s)?),
                None => None,
            };
            Ok((!same, bytes, d))
        };
        match run() {
            Err(Stop::Decline(why)) => {
                self.count(why);
                Ok(None)
            }
            Ok((changed, bytes, d)) => {
                let effects: Vec<Bound<'py, PyAny>> = d.effects.iter().map(|e| effect_to_py(py, e)).collect::<PyResult<_>>()?;
                let before: Vec<Bound<'py, PyTuple>> = d.armed_before.iter().map(|t| timer_tuple(py, t)).collect::<PyResult<_>>()?;
                let after: Vec<Bound<'py, PyTuple>> = d.armed_after.iter().map(|t| timer_tuple(py, t)).collect::<PyResult<_>>()?;
                Ok(Some(PyTuple::new(py, [
                    changed.into_pyobject(py)?.to_owned().into_any(),
                    match bytes { Some(b) => PyBytes::new(py, &b).into_any(), None => py.None().into_bound(py) },
                    PyList::new(py, effects)?.into_any(),
                    PyList::new(py, before)?.into_any(),
                    PyList::new(py, after)?.into_any(),
                ])?.into_any()))
            }
        }
    }
}

/// Texts and codecs on their own, for the tests that hold them equal to Python's.
#[pyfunction]
fn format_span_ms(ms: i64) -> String {
    text::format_span_ms(ms)
}

#[pyfunction]
fn format_utc_ms(ms: i64) -> String {
    text::format_utc_ms(ms)
}

#[pyfunction]
fn ascii_repr(s: &str) -> Option<String> {
    text::ascii_repr(s)
}

#[pyfunction]
fn partition_for(key: &[u8], partitions: i64) -> i64 {
    records::partition_for(key, partitions)
}

/// A stored slot read and written again natively (None: declined).
#[pyfunction]
fn slot_round_trip<'py>(py: Python<'py>, data: &[u8]) -> Option<Bound<'py, PyBytes>> {
    let slot = slotcodec::decode_slot(data).ok()?;
    slotcodec::encode_slot(&slot).ok().map(|b| PyBytes::new(py, &b))
}

/// A stored row read and written again natively (None: declined).
#[pyfunction]
fn row_round_trip<'py>(py: Python<'py>, data: &[u8]) -> Option<Bound<'py, PyBytes>> {
    let r = row::decode_row(data).ok()?;
    row::encode_row(&r.head, r.slot.unwrap_or(b""), &r.seen).ok().map(|b| PyBytes::new(py, &b))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Core>()?;
    m.add_function(wrap_pyfunction!(format_span_ms, m)?)?;
    m.add_function(wrap_pyfunction!(format_utc_ms, m)?)?;
    m.add_function(wrap_pyfunction!(ascii_repr, m)?)?;
    m.add_function(wrap_pyfunction!(partition_for, m)?)?;
    m.add_function(wrap_pyfunction!(slot_round_trip, m)?)?;
    m.add_function(wrap_pyfunction!(row_round_trip, m)?)?;
    Ok(())
}
