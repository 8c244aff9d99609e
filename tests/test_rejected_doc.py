"""The documentation of `Rejected.reason` (schemas/Rejected.avsc, from which the reference
is generated) names exactly the reasons the worker emits, with the limits they enforce."""

from __future__ import annotations

import json
import re
from pathlib import Path

from streams.core.effects import RejectReason
from streams.core.keys import MAX_KEY_BYTES
from streams.core.state import MAX_HELD_REPLIES
from streams.processor.model import ProcessorReject
from streams.processor.records import MAX_RECORD_BYTES

SCHEMAS = Path(__file__).resolve().parents[1] / "streams" / "schemas"


def _doc(record: str, field: str) -> str:
    schema = json.loads((SCHEMAS / f"{record}.avsc").read_text())
    [found] = [f for f in schema["fields"] if f["name"] == field]
    return str(found["doc"])


def test_the_reason_doc_lists_exactly_the_reasons_the_worker_emits() -> None:
    emitted = {r.value for r in RejectReason} | {r.value for r in ProcessorReject}
    documented = set(re.findall(r"`([a-z_]+)`", _doc("Rejected", "reason")))
    assert documented == emitted, (f"undocumented: {sorted(emitted - documented)}; "
                                   f"never emitted: {sorted(documented - emitted)}")


def test_the_limits_the_docs_state_are_the_codes() -> None:
    reason = _doc("Rejected", "reason")
    assert f"longer than {MAX_KEY_BYTES} bytes" in reason
    assert f"more than {MAX_HELD_REPLIES} replies" in reason
    assert f"exceed {MAX_RECORD_BYTES:,} bytes" in reason
    assert f"At most {MAX_KEY_BYTES} bytes" in _doc("StartWait", "correlationKey")


def test_the_receipt_verdict_doc_lists_exactly_the_verdicts_the_worker_emits() -> None:
    from streams.core.receipts import Verdict

    documented = set(re.findall(r"`([a-z_]+)`", _doc("Receipt", "verdict")))
    assert documented == {v.value for v in Verdict}
