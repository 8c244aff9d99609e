//! Between Python's objects and the native records: events and definitions in, and for
//! the equality harness (`streams.core.native`) effects out as plain tuples and dicts; the
//! classes and enum members a native `Handled` is made of (`Types`).

use std::rc::Rc;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};
use pyo3::{ffi, intern, IntoPyObjectExt};

use crate::model::*;

/// Makes instances of one dataclass without running its Python `__init__`: the instance
/// is allocated as `object.__new__` does, then each field is set through the type's own
/// attribute (a slot's member descriptor, or the instance's dict), as
/// `object.__setattr__` would: a frozen class's `__setattr__` is not in the way.
///
/// Calling the class from Rust ran its `__init__` in Python, a frame and a setter call a
/// field: building a decision's `Handled` that way cost as much as deciding it
/// (callgrind on bench/path_bench.py).  Every field must be given, by name and in the
/// dataclass's order: the names are read from the dataclass when the core is made, and
/// a call that does not set exactly those is refused (`TypeError`), so a field added in
/// Python and not here fails the native path at its first record, never silently.
pub(crate) struct Maker {
    cls: Py<PyAny>,
    /// The fields' names, interned: the same objects `intern!` gives, compared by identity.
    names: Vec<Py<PyString>>,
}

impl Maker {
    pub(crate) fn read(py: Python<'_>, cls: &Bound<'_, PyAny>) -> PyResult<Maker> {
        let fields = py.import("dataclasses")?.getattr("fields")?.call1((cls,))?;
        let names = fields.try_iter()?
            .map(|f| Ok(PyString::intern(py, &f?.getattr("name")?.extract::<String>()?).unbind()))
            .collect::<PyResult<_>>()?;
        Ok(Maker { cls: cls.clone().unbind(), names })
    }

    /// The class itself (to call it the slow way, with its defaults).
    pub(crate) fn class<'py>(&self, py: Python<'py>) -> &Bound<'py, PyAny> {
        self.cls.bind(py)
    }

    /// An instance with `fields` (name, value): every field of the class, in its order.
    pub(crate) fn make<'py>(&self, py: Python<'py>, fields: &[(&Bound<'py, PyString>, &Bound<'py, PyAny>)]) -> PyResult<Bound<'py, PyAny>> {
        let same = fields.len() == self.names.len()
            && fields.iter().zip(&self.names).all(|((given, _), name)| given.as_ptr() == name.as_ptr());
        if !same {
            let names: Vec<String> = self.names.iter().map(|n| n.bind(py).to_string()).collect();
            return Err(PyTypeError::new_err(format!("the native path sets other fields than {names:?}")));
        }
        // SAFETY: `cls` is a class (a heap type, allocated by PyType_GenericAlloc as
        // object.__new__ would); the new reference is owned by the Bound, and each set
        // goes through the generic attribute protocol, which checks its arguments.
        unsafe {
            let obj = Bound::from_owned_ptr_or_err(py, ffi::PyType_GenericAlloc(self.cls.as_ptr().cast(), 0))?;
            for (name, value) in fields {
                if ffi::PyObject_GenericSetAttr(obj.as_ptr(), name.as_ptr(), value.as_ptr()) != 0 {
                    return Err(PyErr::fetch(py));
                }
            }
            Ok(obj)
        }
    }
}

/// The Python classes and enum members the results are made of (`streams.core.native`).
pub(crate) struct Types {
    pub(crate) handled: Maker,
    pub(crate) out_record: Maker,
    pub(crate) row_head: Maker,
    pub(crate) armed_timer: Maker,
    pub(crate) emit_outcome: Maker,
    pub(crate) trace_entry: Maker,
    pub(crate) row_delete: Py<PyAny>,
    pub(crate) row_unchanged: Py<PyAny>,
    pub(crate) roles: Vec<Py<PyAny>>,
    pub(crate) timer_kinds: Vec<Py<PyAny>>,
    pub(crate) statuses: Vec<Py<PyAny>>,
    pub(crate) outcome_kinds: Vec<Py<PyAny>>,
    pub(crate) outcome_reasons: Vec<Py<PyAny>>,
}

pub(crate) fn members(py: Python<'_>, cls: &Bound<'_, PyAny>, values: &[&str]) -> PyResult<Vec<Py<PyAny>>> {
    values.iter().map(|v| Ok(cls.call1((*v,))?.unbind())).collect::<PyResult<_>>().inspect(|_: &Vec<Py<PyAny>>| {
        let _ = py;
    })
}

impl Types {
    pub(crate) fn read(py: Python<'_>, t: &Bound<'_, PyAny>) -> PyResult<Types> {
        let get = |n: &str| -> PyResult<Maker> { Maker::read(py, &t.getattr(n)?) };
        let roles: Vec<Py<PyAny>> = t.getattr("Role")?.try_iter()?.map(|r| Ok(r?.unbind())).collect::<PyResult<_>>()?;
        let timer_kinds = members(py, &t.getattr("TimerKind")?, &TimerKind::ALL.iter().map(|k| k.value()).collect::<Vec<_>>())?;
        let statuses = members(py, &t.getattr("WaitStatus")?, &WaitStatus::ALL.iter().map(|k| k.value()).collect::<Vec<_>>())?;
        let outcome_kinds = members(py, &t.getattr("OutcomeKind")?, &OutcomeKind::ALL.iter().map(|k| k.value()).collect::<Vec<_>>())?;
        let outcome_reasons = members(py, &t.getattr("OutcomeReason")?, &OutcomeReason::ALL.iter().map(|k| k.value()).collect::<Vec<_>>())?;
        let row_write = t.getattr("RowWrite")?;
        Ok(Types {
            handled: get("Handled")?,
            out_record: get("OutRecord")?,
            row_head: get("RowHead")?,
            armed_timer: get("ArmedTimer")?,
            emit_outcome: get("EmitOutcome")?,
            trace_entry: get("TraceEntry")?,
            row_delete: row_write.getattr("DELETE")?.unbind(),
            row_unchanged: row_write.getattr("UNCHANGED")?.unbind(),
            roles,
            timer_kinds,
            statuses,
            outcome_kinds,
            outcome_reasons,
        })
    }
}

/// `$ty { field: obj.field, ... }`: the fields before `;` read from the attributes of the
/// same names (`opt`), those after it as given.  The Python records and these share their
/// field names; the macro says so once instead of spelling each name twice.
macro_rules! from_attrs {
    ($obj:expr, $ty:ident { $($field:ident),* ; $($name:ident: $value:expr),* $(,)? }) => {
        $ty { $($field: opt($obj, stringify!($field))?,)* $($name: $value,)* }
    };
}

/// A dict of `rec`'s fields before `;` under their own names, then the given items (the
/// equality harness builds the Python records from it by keyword).
macro_rules! dict_of {
    ($py:expr, $rec:expr; $($field:ident),* ; $($name:literal: $value:expr),* $(,)?) => {{
        let d = PyDict::new($py);
        $(d.set_item(stringify!($field), &$rec.$field)?;)*
        $(d.set_item($name, $value)?;)*
        d.into_any()
    }};
}

pub(crate) fn opt<'py, T: pyo3::conversion::FromPyObjectOwned<'py>>(obj: &Bound<'py, PyAny>, name: &str) -> PyResult<T> {
    obj.getattr(name)?.extract().map_err(Into::into)
}

pub(crate) fn origin_from_py(o: &Bound<'_, PyAny>) -> PyResult<Option<Origin>> {
    if o.is_none() {
        return Ok(None);
    }
    let value: Vec<u8> = opt(o, "value")?;
    Ok(Some(Origin { topic: opt(o, "topic")?, partition: opt(o, "partition")?, offset: opt(o, "offset")?, value: value.into() }))
}

pub(crate) fn enum_text(o: &Bound<'_, PyAny>, name: &str) -> PyResult<String> {
    o.getattr(name)?.getattr("value")?.extract()
}

pub(crate) fn bad(what: &str) -> PyErr {
    pyo3::exceptions::PyValueError::new_err(what.to_string())
}

pub(crate) fn reply_from_py(r: &Bound<'_, PyAny>) -> PyResult<Reply> {
    Ok(from_attrs!(r, Reply { correlation_key, response_data, tenant, channel, reply_id, sent_at;
                              origin: origin_from_py(&r.getattr("origin")?)? }))
}

pub(crate) fn command_from_py(c: &Bound<'_, PyAny>) -> PyResult<Command> {
    Ok(from_attrs!(c, Command {
        correlation_key, reason, review_outcome, review_note, response_data, operator, deadline, move_by, version,
        operation_id;
        command: CommandKind::parse(&enum_text(c, "command")?).ok_or_else(|| bad("command"))?,
        origin: origin_from_py(&c.getattr("origin")?)?,
    }))
}

pub(crate) fn result_from_py(r: &Bound<'_, PyAny>) -> PyResult<ActionResult> {
    Ok(from_attrs!(r, ActionResult { correlation_key, action_id, error, permanent, at;
        status: ResultStatus::parse(&enum_text(r, "status")?).ok_or_else(|| bad("status"))?,
        origin: origin_from_py(&r.getattr("origin")?)?,
    }))
}

pub(crate) fn event_from_py(e: &Bound<'_, PyAny>) -> PyResult<Event> {
    let name: String = e.get_type().name()?.extract()?;
    Ok(match name.as_str() {
        "StartWait" => Event::Start(from_attrs!(e, StartWait {
            correlation_key, definition, requested_at, tenant, payload, parties, deadline, traceparent;
        })),
        "Reply" => Event::Reply(Rc::new(reply_from_py(e)?)),
        "Command" => Event::Command(Rc::new(command_from_py(e)?)),
        "ActionResult" => Event::Result(Rc::new(result_from_py(e)?)),
        "TimerFired" => Event::Timer(from_attrs!(e, TimerFired { wait_key, due_at, generation;
            kind: TimerKind::parse(&enum_text(e, "kind")?).ok_or_else(|| bad("kind"))?,
        })),
        _ => return Err(bad("not an event")),
    })
}

// The test harness's view of records: plain tuples and dicts (streams/core/native.py).

pub(crate) fn origin_to_py<'py>(py: Python<'py>, o: &Option<Origin>) -> PyResult<Bound<'py, PyAny>> {
    match o {
        None => Ok(py.None().into_bound(py)),
        Some(o) => Ok(PyTuple::new(py, [
            o.topic.clone().into_pyobject(py)?.into_any(),
            o.partition.into_pyobject(py)?.into_any(),
            o.offset.into_pyobject(py)?.into_any(),
            PyBytes::new(py, &o.value).into_any(),
        ])?.into_any()),
    }
}

pub(crate) fn reply_to_py<'py>(py: Python<'py>, r: &Reply) -> PyResult<Bound<'py, PyAny>> {
    Ok(dict_of!(py, r; correlation_key, response_data, tenant, channel, reply_id, sent_at;
                "origin": origin_to_py(py, &r.origin)?))
}

pub(crate) fn command_to_py<'py>(py: Python<'py>, c: &Command) -> PyResult<Bound<'py, PyAny>> {
    Ok(dict_of!(py, c; correlation_key, reason, review_outcome, review_note, response_data, operator, deadline,
                move_by, version, operation_id;
                "command": c.command.value(), "origin": origin_to_py(py, &c.origin)?))
}

pub(crate) fn result_to_py<'py>(py: Python<'py>, r: &ActionResult) -> PyResult<Bound<'py, PyAny>> {
    Ok(dict_of!(py, r; correlation_key, action_id, error, permanent, at;
                "status": r.status.value(), "origin": origin_to_py(py, &r.origin)?))
}

pub(crate) fn trace_to_py<'py>(py: Python<'py>, trace: &[TraceEntry]) -> PyResult<Bound<'py, PyAny>> {
    let items: Vec<Bound<'py, PyTuple>> = trace.iter()
        .map(|t| PyTuple::new(py, [t.at.into_pyobject(py)?.into_any(), t.event.clone().into_pyobject(py)?.into_any(), t.detail.clone().into_pyobject(py)?.into_any()]))
        .collect::<PyResult<_>>()?;
    Ok(PyList::new(py, items)?.into_any())
}

/// An outcome's fields, in `EmitOutcome`'s order, as (interned name, value).
pub(crate) type Fields<'py> = Vec<(&'py Bound<'py, PyString>, Bound<'py, PyAny>)>;

pub(crate) fn outcome_fields<'py>(py: Python<'py>, o: &EmitOutcome, trace: Bound<'py, PyAny>, kind: Bound<'py, PyAny>,
                                  reason: Bound<'py, PyAny>) -> PyResult<Fields<'py>> {
    fn v<'py, T: IntoPyObject<'py>>(py: Python<'py>, x: T) -> PyResult<Bound<'py, PyAny>> {
        x.into_bound_py_any(py)
    }
    Ok(vec![
        (intern!(py, "outcome_id"), v(py, &o.outcome_id)?),
        (intern!(py, "correlation_key"), v(py, &o.correlation_key)?),
        (intern!(py, "definition"), v(py, &o.definition)?),
        (intern!(py, "tenant"), v(py, &o.tenant)?),
        (intern!(py, "outcome"), kind),
        (intern!(py, "reason"), reason),
        (intern!(py, "response_data"), v(py, &o.response_data)?),
        (intern!(py, "response_valid"), v(py, o.response_valid)?),
        (intern!(py, "validation_issue"), v(py, &o.validation_issue)?),
        (intern!(py, "review_outcome"), v(py, &o.review_outcome)?),
        (intern!(py, "review_note"), v(py, &o.review_note)?),
        (intern!(py, "reminders_sent"), v(py, o.reminders_sent)?),
        (intern!(py, "escalation_level"), v(py, o.escalation_level)?),
        (intern!(py, "parked_at"), v(py, o.parked_at)?),
        (intern!(py, "ended_at"), v(py, o.ended_at)?),
        (intern!(py, "trace"), trace),
        (intern!(py, "operator"), v(py, &o.operator)?),
        (intern!(py, "operator_reason"), v(py, &o.operator_reason)?),
        (intern!(py, "send_error"), v(py, &o.send_error)?),
        (intern!(py, "definition_version"), v(py, &o.definition_version)?),
    ])
}

/// `fields` as a dict (the equality harness's view of an outcome).
pub(crate) fn as_dict<'py>(py: Python<'py>, fields: Fields<'py>) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in fields {
        d.set_item(k, v)?;
    }
    Ok(d)
}

pub(crate) fn timer_tuple<'py>(py: Python<'py>, t: &ArmedTimer) -> PyResult<Bound<'py, PyTuple>> {
    PyTuple::new(py, [t.kind.value().into_pyobject(py)?.into_any(), t.due_at.into_pyobject(py)?.into_any(),
                      t.generation.into_pyobject(py)?.into_any()])
}

pub(crate) fn effect_to_py<'py>(py: Python<'py>, e: &Effect) -> PyResult<Bound<'py, PyAny>> {
    let s = |x: &str| -> PyResult<Bound<'py, PyAny>> { Ok(PyString::new(py, x).into_any()) };
    let none = || py.None().into_bound(py);
    let items: Vec<Bound<'py, PyAny>> = match e {
        Effect::Outcome(o) => vec![s("outcome")?, as_dict(py, outcome_fields(py, o, trace_to_py(py, &o.trace)?, s(o.outcome.value())?, s(o.reason.value())?)?)?.into_any()],
        Effect::Action(a) => vec![s("action")?, dict_of!(py, a; action_id, correlation_key, definition, tenant, party,
            level, attempt, payload, at, idempotency_key, send_attempt; "action": a.action.value())],
        Effect::Arm(t) => vec![s("arm")?, timer_tuple(py, t)?.into_any()],
        Effect::Disarm(t) => vec![s("disarm")?, timer_tuple(py, t)?.into_any()],
        Effect::BufferReply { reply, received_at, expires_at } => vec![s("buffer_reply")?, reply_to_py(py, reply)?,
            received_at.into_pyobject(py)?.into_any(), expires_at.into_pyobject(py)?.into_any()],
        Effect::BufferCommand { command, received_at, expires_at } => vec![s("buffer_command")?, command_to_py(py, command)?,
            received_at.into_pyobject(py)?.into_any(), expires_at.into_pyobject(py)?.into_any()],
        Effect::Reject { reason, detail, reply, command, result } => vec![
            s("reject")?, s(reason.value())?, s(detail)?,
            match reply { Some(r) => reply_to_py(py, r)?, None => none() },
            match command { Some(c) => command_to_py(py, c)?, None => none() },
            match result { Some(r) => result_to_py(py, r)?, None => none() },
        ],
        Effect::Discard { reason, detail } => vec![s("discard")?, s(reason.value())?, s(detail)?],
        Effect::Purge => vec![s("purge")?],
    };
    Ok(PyTuple::new(py, items)?.into_any())
}
