"""The stored slot round-trips exactly and stays small (a million are normal)."""

from __future__ import annotations

import json

import pytest

from streams.core import (
    CommandKind,
    StateDecodeError,
    TimerKind,
    decode_slot,
    encode_slot,
)
from tests.core.core_harness import HOUR, Run

PAYLOAD = '{"expenseId":"EXP-2024-00042","amount":129.90,"currency":"EUR","submitter":"sam"}'


def _parked() -> Run:
    run = Run()
    run.start(payload=PAYLOAD)
    return run


def test_parked_wait_round_trips_and_carries_a_version() -> None:
    run = _parked()
    assert run.slot is not None
    data = encode_slot(run.slot)
    assert json.loads(data)["v"] == 1
    assert decode_slot(data) == run.slot


def test_every_shape_of_slot_round_trips() -> None:
    run = _parked()
    run.fire(TimerKind.REMINDER)
    run.reply("{broken", reply_id="r1")
    run.command(CommandKind.SUSPEND, reason="maintenance")
    run.command(CommandKind.DELIVER, response_data='{"decision":"approved"}')
    early = Run()
    early.reply(reply_id="e1", sent_at=5)
    for slot in (run.slot, early.slot):
        assert slot is not None
        assert decode_slot(encode_slot(slot)) == slot


def test_typical_parked_expense_approval_wait_is_well_under_a_kilobyte() -> None:
    run = _parked()
    assert run.slot is not None
    parked = len(encode_slot(run.slot))
    run.advance(HOUR)
    run.fire(TimerKind.REMINDER)
    run.command(CommandKind.SUSPEND, reason="downstream maintenance")
    run.command(CommandKind.RESUME)
    run.fire(TimerKind.REMINDER)
    assert run.slot is not None
    with_trace = len(encode_slot(run.slot))
    print(f"encoded parked={parked} B, with 6 trace entries={with_trace} B")
    assert parked < 500 and with_trace < 900


def test_bytes_from_an_unknown_version_are_refused_not_guessed() -> None:
    with pytest.raises(StateDecodeError, match="version 2"):
        decode_slot(b'{"v":2,"g":1}')
    with pytest.raises(StateDecodeError):
        decode_slot(b"not json")
