"""A faster ``__init__`` for the frozen, slotted dataclasses built for every record.

A frozen dataclass's generated ``__init__`` sets each field through
``object.__setattr__(self, name, value)``, which finds the slot by name every
time: 5.7 us for a Wait (32 fields), where calling each slot's setter takes
3.0 (0.64 and 0.42 us for a TraceEntry).  In the worker's decision path these
constructors were about a tenth of the main thread (py-spy on
`bench/decide_bench.py`: the dataclass ``__init__`` lines 10.6% of the
samples), because a decision builds several waits, effects, timers and trace
entries per record.

`fast_init` replaces the generated ``__init__`` with one that calls each slot's
own setter (looked up once, when the class is made): the same parameters,
defaults and instances, and the class stays frozen (assigning a field still
raises ``FrozenInstanceError``).  A test holds every class using it to the
``__init__`` dataclasses would have generated.

`twin` goes further where a whole record is built field by field (a copy
with changes, a Wait read from its row): a plain class with the same slots,
whose fields are stored by ordinary assignment (which Python 3.11 specialises;
a slot's setter is a call each time), and whose instance then becomes the
frozen class's by assigning ``__class__`` - allowed because the two lay out
their instances alike.  A Wait (36 fields) is copied in 0.6 us that way
against 1.8 through its setters.  Nothing outside the module that builds the
instance ever sees the twin: the result is an instance of the frozen class,
equal, hashed and refusing assignment like any other.
"""

from __future__ import annotations

from dataclasses import MISSING, fields, is_dataclass
from typing import Any, TypeVar

__all__ = ["fast_init", "twin"]

C = TypeVar("C", bound=type)


def fast_init(cls: C) -> C:
    """Give the frozen, slotted dataclass `cls` a slot-setting ``__init__``; returns `cls`."""
    params = getattr(cls, "__dataclass_params__", None)
    if not is_dataclass(cls) or params is None or not params.frozen:
        raise TypeError(f"{cls.__name__}: expected a frozen dataclass")
    if "__slots__" not in cls.__dict__ or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: expected slots and no __post_init__")
    scope: dict[str, Any] = {}
    params_src: list[str] = []
    body: list[str] = []
    for i, f in enumerate(fields(cls)):
        if not f.init or f.kw_only or f.default_factory is not MISSING:
            raise TypeError(f"{cls.__name__}.{f.name}: only plain positional fields are made")
        scope[f"_s{i}"] = cls.__dict__[f.name].__set__
        if f.default is MISSING:
            params_src.append(f.name)
        else:
            scope[f"_d{i}"] = f.default
            params_src.append(f"{f.name}=_d{i}")
        body.append(f"        _s{i}(self, {f.name})")
    names = ", ".join(scope)
    source = "\n".join([
        f"def _make({names}):",
        f"    def __init__(self, {', '.join(params_src)}):",
        *(body or ["        pass"]),
        "    return __init__",
    ])
    namespace: dict[str, Any] = {}
    exec(source, namespace)  # noqa: S102 - code built from the class's own field names
    init = namespace["_make"](**scope)
    original = cls.__dict__["__init__"]
    init.__qualname__ = original.__qualname__
    init.__module__ = original.__module__
    init.__doc__ = original.__doc__
    init.__annotations__ = dict(original.__annotations__)
    init.generated_by_dataclass = original  # for the test that holds the two equal
    type.__setattr__(cls, "__init__", init)
    return cls


_TWINS: dict[type, type] = {}


def twin(cls: type) -> type:
    """A mutable class with the slots of the frozen, slotted dataclass `cls`, whose
    instances may take `cls` as their ``__class__`` once their fields are set.

    Every field must be set before the switch: a slot left empty would raise
    ``AttributeError`` when read, where the frozen class's ``__init__`` guarantees
    each one.  Refused (``TypeError``) for a class whose instances Python would
    not let change class.
    """
    made = _TWINS.get(cls)
    if made is not None:
        return made
    params = getattr(cls, "__dataclass_params__", None)
    if not is_dataclass(cls) or params is None or not params.frozen:
        raise TypeError(f"{cls.__name__}: expected a frozen dataclass")
    slots = cls.__dict__.get("__slots__")
    if cls.__bases__ != (object,) or not isinstance(slots, tuple):
        raise TypeError(f"{cls.__name__}: expected slots and no base class")
    made = type(f"_{cls.__name__}Twin", (), {"__slots__": slots, "__module__": cls.__module__})
    probe: Any = object.__new__(made)
    try:
        probe.__class__ = cls
    except TypeError as exc:
        raise TypeError(f"{cls.__name__}: its instances cannot be built through a twin: {exc}") \
            from None
    _TWINS[cls] = made
    return made
