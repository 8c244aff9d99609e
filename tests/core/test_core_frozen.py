"""`fast_init` builds the same instances as the ``__init__`` dataclasses generate; `twin`
builds instances of the frozen class itself."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import MISSING, FrozenInstanceError, dataclass, field, fields
from typing import Any

import pytest

from streams.core import events, state
from streams.core.frozen import fast_init, twin

MODULES = [importlib.import_module(f"streams.{name}") for name in (
    "core.rules", "core.effects", "core.events", "core.state", "processor.model")]
# Every class of those modules whose __init__ fast_init made.
MADE: list[Any] = sorted(
    {obj for module in MODULES for obj in vars(module).values()
     if inspect.isclass(obj) and hasattr(obj.__dict__.get("__init__"), "generated_by_dataclass")},
    key=lambda c: c.__qualname__)


def _generated(cls: type) -> Callable[..., None]:
    """The ``__init__`` dataclasses generated for `cls`, which `fast_init` replaced."""
    init: Callable[..., None] = cls.__dict__["__init__"].generated_by_dataclass
    return init


def test_the_records_built_for_every_input_use_it() -> None:
    assert {c.__name__ for c in MADE} >= {
        "Wait", "Slot", "ArmedTimer", "TraceEntry", "EmitOutcome", "EmitAction", "Reject",
        "Decision", "StartWait", "Reply", "TimerFired", "InputRecord", "OutRecord", "RowHead"}


@pytest.mark.parametrize("cls", MADE, ids=lambda c: c.__qualname__)
def test_same_parameters_and_defaults_as_the_dataclass_init(cls: type) -> None:
    made = inspect.signature(cls.__dict__["__init__"])
    generated = inspect.signature(_generated(cls))
    assert [(p.name, p.kind, p.default) for p in made.parameters.values()] == [
        (p.name, p.kind, p.default) for p in generated.parameters.values()]


@pytest.mark.parametrize("cls", MADE, ids=lambda c: c.__qualname__)
def test_same_instance_as_the_dataclass_init(cls: type) -> None:
    # A distinct object per field, passed by position, then by name with every
    # default left out: each must land in its own field.
    values = [object() for _ in fields(cls)]
    fast = cls(*values)
    slow: object = object.__new__(cls)
    _generated(cls)(slow, *values)
    assert [getattr(fast, f.name) for f in fields(cls)] == values
    assert [getattr(slow, f.name) for f in fields(cls)] == values
    required = {f.name: v for f, v in zip(fields(cls), values, strict=True)
                if f.default is MISSING}
    by_name = cls(**required)
    for f in fields(cls):
        expected = required[f.name] if f.name in required else f.default
        assert getattr(by_name, f.name) is expected


@pytest.mark.parametrize("cls", [c for c in MADE if fields(c)], ids=lambda c: c.__qualname__)
def test_still_frozen(cls: type) -> None:
    obj = cls(*[None] * len(fields(cls)))
    with pytest.raises(FrozenInstanceError):
        setattr(obj, fields(cls)[0].name, 1)


@dataclass(frozen=True)
class NoSlots:
    a: int


@dataclass(slots=True)
class NotFrozen:
    a: int


def test_classes_it_cannot_make_faithfully_are_refused() -> None:
    @dataclass(frozen=True, slots=True)
    class Factory:
        a: list[int] = field(default_factory=list)

    @dataclass(frozen=True, slots=True)
    class KeywordOnly:
        a: int = field(kw_only=True)

    @dataclass(frozen=True, slots=True)
    class PostInit:
        a: int

        def __post_init__(self) -> None:
            pass

    for cls in (NoSlots, NotFrozen, Factory, KeywordOnly, PostInit):
        with pytest.raises(TypeError):
            fast_init(cls)


def test_a_field_missing_from_the_call_is_still_an_error() -> None:
    with pytest.raises(TypeError):
        state.ArmedTimer(events.TimerKind.DEADLINE, 1)  # type: ignore[call-arg]


def test_an_instance_built_through_the_twin_is_the_frozen_class_itself() -> None:
    timer = state.ArmedTimer(events.TimerKind.DEADLINE, 1_000, 3)
    made: Any = object.__new__(twin(state.ArmedTimer))
    made.kind, made.due_at, made.generation = events.TimerKind.DEADLINE, 1_000, 3
    made.__class__ = state.ArmedTimer
    assert type(made) is state.ArmedTimer
    assert made == timer and hash(made) == hash(timer) and repr(made) == repr(timer)
    with pytest.raises(FrozenInstanceError):
        made.due_at = 2  # type: ignore[misc]
    assert twin(state.ArmedTimer) is twin(state.ArmedTimer)  # made once per class


def test_a_twin_is_refused_for_classes_whose_instances_could_not_change_class() -> None:
    @dataclass(frozen=True, slots=True)
    class Base:
        a: int

    @dataclass(frozen=True, slots=True)
    class Derived(Base):
        b: int

    for cls in (NoSlots, NotFrozen, Derived):
        with pytest.raises(TypeError):
            twin(cls)
