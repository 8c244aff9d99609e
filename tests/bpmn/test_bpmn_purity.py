"""The BPMN package is pure: definitions in, XML out and back; no Kafka, faust or web."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import streams.bpmn

FORBIDDEN = ("faust", "aiokafka", "confluent_kafka", "rocksdict", "fastavro", "aiohttp")


def test_importing_the_bpmn_package_loads_no_kafka_faust_rocksdb_avro_or_web_library() -> None:
    code = ("import sys, streams.bpmn, streams.bpmn.interpret\n"
            f"print(','.join(m for m in {FORBIDDEN!r} if m in sys.modules))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, cwd=Path(streams.bpmn.__file__).parents[2])
    assert result.stdout.strip() == ""
