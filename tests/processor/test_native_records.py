"""The native record path answers every record exactly as the Python path does.

Both `RecordHandler`s - the native one, and one told `pure_python` - are fed the
same streams (`native_streams`: every shipped definition, every kind of
input, hostile records, timers fired when due, the clock jumping), each with
rows of its own, and every decision must be equal field for field: the row's
bytes, every output record's bytes (Avro), the heads, the timers, the
counters, the outcomes.  Where the native path declines, the Python path
decides (that is how a record the processor refuses is refused), so a
decline is never a difference; the test counts them and holds them to the
inputs the Python path refuses or the layouts it alone reads.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from streams.partitioning import partition_for
from streams.processor import records
from streams.processor.model import Handled, InputRecord, Role, RowWrite
from streams.processor.records import RecordHandler
from streams.timers.firing import FiredTimer
from tests.processor.native_streams import PARTITIONS, T0, Driver, definitions

# Why the native path may leave a record to Python: inputs the processor refuses
# (their rejection has its own reason and text, made in Python), and nothing else.
REFUSED = {"no key", "invalid key", "misrouted", "key not UTF-8", "no value", "empty value",
           "neither Avro nor JSON", "json", "unknown field", "missing field",
           "a JSON value of another type", "command kind", "a schema not read natively",
           "key mismatch", "too large", "status", "a receipt asked for"}

FIELDS = ("wait_key", "row", "timers_before", "timers_after", "head_before", "head_after",
          "out", "counters", "outcomes", "not_due", "unindexed", "timer", "traceparent")


class Pair:
    """Both implementations, each with its own rows, fed the same items."""

    def __init__(self) -> None:
        defs = definitions()
        self.native = RecordHandler(defs, PARTITIONS, "t.timers")  # type: ignore[arg-type]
        self.python = RecordHandler(defs, PARTITIONS, "t.timers",  # type: ignore[arg-type]
                                    pure_python=True)
        if self.native.native() is None:
            pytest.skip("the native record path is not built here")
        self.rows: dict[str, dict[bytes, bytes]] = {"native": {}, "python": {}}
        self.decided = 0

    def decide(self, item: InputRecord | FiredTimer, now: int) -> Handled:
        got = {name: self._one(handler, self.rows[name], item, now)
               for name, handler in (("native", self.native), ("python", self.python))}
        differences = {f: (getattr(got["python"], f), getattr(got["native"], f))
                       for f in FIELDS if getattr(got["python"], f) != getattr(got["native"], f)}
        assert differences == {}, f"{item} decided differently: {differences}"
        self.decided += 1
        return got["python"]

    @staticmethod
    def _one(handler: RecordHandler, rows: dict[bytes, bytes], item: InputRecord | FiredTimer,
             now: int) -> Handled:
        def load(key: str) -> bytes | None:
            return rows.get(key.encode())

        handled = (handler.handle(item, load, now) if isinstance(item, InputRecord)
                   else handler.fire(item, load, now, now))
        if handled.wait_key is not None:
            key = handled.wait_key.encode()
            if isinstance(handled.row, bytes):
                rows[key] = handled.row
            elif handled.row is RowWrite.DELETE:
                rows.pop(key, None)
        return handled

    def declines(self) -> Counter[str]:
        core: Any = self.native.native()
        return Counter(core.declines())


@pytest.mark.parametrize("seed", range(8))
def test_every_decision_of_a_long_stream_is_the_same_native_or_python(seed: int) -> None:
    pair = Pair()
    driver = Driver(seed, pair.decide)
    items = list(driver.items(1500))
    assert pair.decided == len(items) > 1000
    declines = pair.declines()
    assert set(declines) <= REFUSED, declines
    # Most records are decided natively: the stream is mostly waits, not hostile input.
    assert sum(declines.values()) < 0.25 * len(items), declines


def _request(key: str) -> InputRecord:
    value = json.dumps({"correlationKey": key, "definition": "bench-long",
                        "requestedAt": T0}).encode()
    return InputRecord(Role.REQUESTS, "t.requests", partition_for(key.encode(), PARTITIONS), 0,
                       key.encode(), value, T0, True)


def test_a_handler_told_pure_python_never_asks_the_native_path() -> None:
    handler = RecordHandler(definitions(), PARTITIONS, "t.timers",  # type: ignore[arg-type]
                            pure_python=True)
    assert handler.native() is None
    handled = handler.handle(_request("k-pure"), lambda key: None, T0)
    assert handled.counters == ["actions.SEND_REQUEST"]


class _Broken:
    """A native core with a bug: it raises where it should decide or decline."""

    calls = 0

    def handle(self, *args: object) -> None:
        self.calls += 1
        raise RuntimeError("a bug")


def test_a_native_path_that_raises_is_logged_once_and_python_decides_from_then_on(
        caplog: pytest.LogCaptureFixture) -> None:
    handler = RecordHandler(definitions(), PARTITIONS, "t.timers")  # type: ignore[arg-type]
    if handler.native() is None:
        pytest.skip("the native record path is not built here")
    broken = _Broken()
    handler._native = broken
    first = handler.handle(_request("k-bug-1"), lambda key: None, T0)
    second = handler.handle(_request("k-bug-2"), lambda key: None, T0)
    assert first.counters == second.counters == ["actions.SEND_REQUEST"]  # Python decided
    assert broken.calls == 1 and handler.native() is None
    failures = [r for r in caplog.records if "native record path failed" in r.getMessage()]
    assert len(failures) == 1


def test_a_native_core_that_cannot_be_made_leaves_python_deciding(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    def fails(*args: object) -> None:
        raise ValueError("record type")

    monkeypatch.setattr(records, "record_path", fails)
    handler = RecordHandler(definitions(), PARTITIONS, "t.timers")  # type: ignore[arg-type]
    assert handler.native() is None
    assert handler.handle(_request("k-made"), lambda key: None, T0).counters == [
        "actions.SEND_REQUEST"]
    assert any("native record path failed" in r.getMessage() for r in caplog.records)
