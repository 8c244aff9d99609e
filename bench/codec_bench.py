"""Encode/decode rates of the codec on realistic records; a number to watch, not a test.

Run: ``.venv/bin/python bench/codec_bench.py [--seconds 1.0]``. The processor
decodes every input and encodes every output record, so these rates bound
what one worker process can do before any decision logic runs.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from streams.codec import Codec, RecordType
from streams.partitioning import partition_for

NOW = 1_767_225_600_000

SAMPLES: dict[RecordType, dict[str, Any]] = {
    RecordType.REPLY: {
        "correlationKey": "3f1c9a0e6b2d4c7f8a1e5d3b9c0f7a21~finance",
        "tenant": "acme",
        "channel": "webhook",
        "responseData": json.dumps({"approved": True, "amount": 1250, "note": "ok"}),
        "replyId": "r-000042",
        "sentAt": NOW,
    },
    RecordType.OUTCOME: {
        "outcomeId": "o-3f1c9a0e6b2d4c7f",
        "correlationKey": "3f1c9a0e6b2d4c7f8a1e5d3b9c0f7a21",
        "definition": "invoice-approval",
        "tenant": "acme",
        "outcome": "RECEIVED",
        "reason": "reply_accepted",
        "responseData": json.dumps({"approved": True}),
        "responseValid": True,
        "validationIssue": None,
        "reviewOutcome": None,
        "reviewNote": None,
        "remindersSent": 2,
        "escalationLevel": 0,
        "parkedAt": NOW,
        "endedAt": NOW + 90_000_000,
        "trace": [
            {"at": NOW + i * 3_600_000, "event": event, "detail": ""}
            for i, event in enumerate(["parked", "reminder_sent", "reminder_sent", "received"])
        ],
    },
}


def rate(operation: Callable[[], object], seconds: float) -> float:
    """Operations per second, timing batches so the clock is not the cost."""
    batch, done = 1000, 0
    start = time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        for _ in range(batch):
            operation()
        done += batch
    return done / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=1.0, help="time per measurement")
    seconds = parser.parse_args().seconds
    codec = Codec.load()
    for record_type, record in SAMPLES.items():
        avro = codec.encode(record_type, record)
        text = codec.to_json(record_type, record).encode()
        print(f"{record_type.value:8} ({len(avro)} B Avro, {len(text)} B JSON)")
        measured: dict[str, Callable[[], object]] = {
            "encode": partial(codec.encode, record_type, record),
            "decode Avro": partial(codec.decode, record_type, avro),
        }
        if record_type is RecordType.REPLY:
            measured["decode JSON"] = partial(codec.decode, record_type, text)
        for name, operation in measured.items():
            print(f"  {name:12} {rate(operation, seconds):>10,.0f}/s")
    key = b"3f1c9a0e6b2d4c7f8a1e5d3b9c0f7a21"
    print(f"partition_for (32 B key) {rate(partial(partition_for, key, 24), seconds):>10,.0f}/s")


if __name__ == "__main__":
    main()
