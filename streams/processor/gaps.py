"""Reading input records the fetch passed over, straight from the broker.

When the agent receives a record above the next offset it expects
(`streams.processor.inputs`), the offsets in between were either never
records (transaction markers, aborted transactions, records removed by
retention) or records the fetch skipped.  A plain confluent-kafka consumer,
outside the group and committing nothing, reads exactly that range; the
agent applies whatever it returns before the record that revealed the gap.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, KafkaException, TopicPartition

from streams.errors import XwaitError
from streams.processor.model import InputRecord, Role

log = logging.getLogger(__name__)

# A range the broker does not deliver within this time is an outage: the
# worker stops rather than guess (its inputs are read again on restart).
READ_TIMEOUT_S = 60.0


class GapReadFailed(XwaitError):
    """The offsets of a gap could not be read."""


class GapReader:
    def __init__(self, conf: dict[str, Any]) -> None:
        self._conf = {**conf, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                      "isolation.level": "read_committed", "enable.partition.eof": False}
        self._consumer: Any = None

    def read(self, role: Role, topic: str, partition: int, start: int, stop: int
             ) -> list[InputRecord]:
        """The records of offsets [start, stop) that exist (blocking: run it in a thread)."""
        if self._consumer is None:
            self._consumer = Consumer(self._conf)
        consumer = self._consumer
        out: list[InputRecord] = []
        give_up = time.monotonic() + READ_TIMEOUT_S
        try:
            consumer.assign([TopicPartition(topic, partition, start)])
            while True:
                for msg in consumer.consume(500, timeout=1.0):
                    if msg.error() is not None:
                        raise GapReadFailed(f"{topic}[{partition}]: {msg.error()}")
                    offset = msg.offset()
                    if offset >= stop:
                        return out
                    ts_type, ts = msg.timestamp()
                    out.append(InputRecord(role, topic, partition, offset, msg.key(),
                                           msg.value(), ts if ts >= 0 else None,
                                           ts_type == TIMESTAMP_LOG_APPEND_TIME))
                if time.monotonic() > give_up:
                    raise GapReadFailed(f"{topic}[{partition}] offsets {start}..{stop - 1}: "
                                        f"offset {stop} not reached within {READ_TIMEOUT_S:.0f}s")
        except KafkaException as exc:
            raise GapReadFailed(f"{topic}[{partition}]: {exc}") from exc
        finally:
            try:
                consumer.unassign()
            except KafkaException:
                log.debug("unassign after a gap read failed", exc_info=True)

    def data_end(self, topic: str, partition: int, end: int) -> int:
        """The offset after the last record below `end` that is data, not a transaction marker.

        faust restores a changelog partition until it has seen the record at
        its end offset - 1.  Behind a committed transaction that offset is the
        commit marker, which no consumer ever sees, so the restore would wait
        forever; it must wait for the last data record instead.
        (Blocking: run it in a thread.)
        """
        if self._consumer is None:
            self._consumer = Consumer(self._conf)
        consumer = self._consumer
        window = 16
        try:
            while True:
                start = max(0, end - window)
                last = -1
                consumer.assign([TopicPartition(topic, partition, start)])
                give_up = time.monotonic() + READ_TIMEOUT_S
                while True:
                    got = consumer.position([TopicPartition(topic, partition)])[0].offset
                    if got >= end:
                        break
                    for msg in consumer.consume(500, timeout=0.5):
                        if msg.error() is None and msg.offset() < end:
                            last = max(last, msg.offset())
                    if time.monotonic() > give_up:
                        raise GapReadFailed(f"{topic}[{partition}]: the end offset {end} was "
                                            f"not reached within {READ_TIMEOUT_S:.0f}s")
                if last >= 0 or start == 0:
                    return last + 1
                window *= 16
        except KafkaException as exc:
            raise GapReadFailed(f"{topic}[{partition}]: {exc}") from exc
        finally:
            try:
                consumer.unassign()
            except KafkaException:
                log.debug("unassign after reading a changelog tail failed", exc_info=True)

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


__all__ = ["GapReadFailed", "GapReader"]
