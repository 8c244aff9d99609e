"""The fast `replace` of the core copies exactly as dataclasses.replace does."""

from __future__ import annotations

import dataclasses
import typing

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams import core
from streams.core.copying import SlotChanges, WaitChanges, replace


@pytest.mark.parametrize(("cls", "changes"), [(core.Wait, WaitChanges), (core.Slot, SlotChanges)])
def test_the_typed_changes_name_every_field_with_its_type(cls: type, changes: type) -> None:
    hints = typing.get_type_hints(changes)
    fields = {f.name: f.type for f in dataclasses.fields(cls)}
    assert list(hints) == list(fields)
    assert hints == typing.get_type_hints(cls)


WAIT = core.Wait("k", "expense-approval", "acme", 1_000, payload='{"a": 1}', parties=("x",))


@given(status=st.sampled_from(list(core.WaitStatus)), level=st.integers(0, 9),
       payload=st.none() | st.text(max_size=5))
def test_a_copy_equals_the_one_dataclasses_makes(status: core.WaitStatus, level: int,
                                                 payload: str | None) -> None:
    mine = replace(WAIT, status=status, level=level, payload=payload)
    assert mine == dataclasses.replace(WAIT, status=status, level=level, payload=payload)
    assert WAIT.status is core.WaitStatus.PARKED, "the original is untouched"
    slot = core.Slot(wait=WAIT, next_generation=4)
    assert replace(slot, wait=mine) == dataclasses.replace(slot, wait=mine)


def test_a_copy_is_a_frozen_instance_of_its_class() -> None:
    copy = replace(WAIT, level=3)
    assert type(copy) is core.Wait and hash(copy) == hash(dataclasses.replace(WAIT, level=3))
    with pytest.raises(dataclasses.FrozenInstanceError):
        copy.level = 4  # type: ignore[misc]


def test_an_unknown_field_is_refused() -> None:
    with pytest.raises(TypeError, match="no field 'colour'"):
        replace(WAIT, colour="red")  # type: ignore[call-overload]
