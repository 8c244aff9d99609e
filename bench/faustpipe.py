"""faust pipe: the raw pipe's work through faust's fetch, for what that fetch costs.

The bench kit's ``rawpipe.py`` moves records with confluent-kafka alone; the
xwait worker took its input through faust (an agent over aiokafka, in
Python) until 2026-12-01, when this pipe showed that fetch was its bound, and
now reads its inputs with confluent-kafka itself (`streams.processor.reader`).
This pipe does what the raw pipe does - every record of
<prefix>.requests and <prefix>.replies produced unchanged to
<prefix>.faustpipe with confluent-kafka (acks=all, idempotent, linger 5 ms) -
but takes the records the way the worker did: a faust app with the worker's
consumer settings, one agent iterating ``stream.events()`` over the input
topics with raw serializers and no acks.  No decoding, state or commit
protocol: how fast faust's fetch alone hands records over on this machine.

Same arguments and JSON as rawpipe.py (records/s = expect / (last delivery
confirmed - first record taken)), plus ``system: faustpipe``.  Preload with
``loadgen.py --mode drain --preload-only``; `bench/compare.py --systems
faustpipe` does it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

import faust
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from faust.types import StreamT

from streams.testing.workers import proc_status_kib


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--prefix", default="xwait")
    ap.add_argument("--expect", type=int, required=True)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--timeout-s", type=float, default=300)
    ap.add_argument("--out")
    a = ap.parse_args()
    scratch = f"{a.prefix}.faustpipe"
    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    for future in admin.create_topics([NewTopic(scratch, a.partitions, 1)]).values():
        with contextlib.suppress(KafkaException):  # it exists already: fine
            future.result(30)

    # The worker's consumer: read_committed, from the earliest offset, raw bytes.
    app = faust.App(f"{a.prefix}-faustpipe", broker=f"kafka://{a.bootstrap}", store="memory://",
                    topic_partitions=a.partitions, consumer_auto_offset_reset="earliest",
                    key_serializer="raw", value_serializer="raw", autodiscover=False,
                    web_enabled=False, stream_wait_empty=False)
    raw: dict[str, Any] = {"key_type": bytes, "value_type": bytes,
                           "key_serializer": "raw", "value_serializer": "raw"}
    inputs = app.topic(f"{a.prefix}.requests", f"{a.prefix}.replies",
                       partitions=a.partitions, acks=False, **raw)
    producer = Producer({"bootstrap.servers": a.bootstrap, "partitioner": "murmur2_random",
                         "linger.ms": 5, "acks": "all", "enable.idempotence": True,
                         "queue.buffering.max.messages": 1_000_000})
    tally = {"consumed": 0, "delivered": 0, "errors": 0}
    times: dict[str, float] = {"start": time.time()}

    def on_delivery(err: Any, _msg: Any) -> None:
        tally["delivered"] += 1
        tally["errors"] += err is not None
        times["last_delivery"] = time.time()

    def finish() -> None:
        producer.flush(30)
        first = times.get("first")
        secs = times["last_delivery"] - first if first and "last_delivery" in times else None
        hwm = proc_status_kib(os.getpid(), "VmHWM")
        res = {"system": "faustpipe", "expect": a.expect, "consumed": tally["consumed"],
               "delivered": tally["delivered"], "delivery_errors": tally["errors"],
               "seconds": round(secs, 3) if secs else None,
               "records_per_s": round(a.expect / secs, 1) if secs else None,
               "first_consumed_after_start_s":
                   round(first - times["start"], 2) if first else None,
               "peak_rss_mib": None if hwm is None else round(hwm / 1024, 1)}
        text = json.dumps(res, indent=2)
        if a.out:
            Path(a.out).write_text(text)
        print(text, flush=True)
        os._exit(0 if tally["consumed"] >= a.expect else 1)

    async def pipe(stream: StreamT[bytes]) -> None:
        async for event in stream.events():
            times.setdefault("first", time.time())
            while True:
                try:
                    producer.produce(scratch, key=event.key, value=event.value,
                                     on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
            tally["consumed"] += 1
            if tally["consumed"] >= a.expect:
                finish()

    app.agent(inputs, name="faustpipe", concurrency=1)(pipe)

    async def give_up() -> None:
        if time.time() - times["start"] > a.timeout_s:
            finish()

    app.timer(interval=1.0)(give_up)
    worker = faust.Worker(app, loglevel="warning", quiet=True)
    worker.execute_from_commandline()


if __name__ == "__main__":
    main()
