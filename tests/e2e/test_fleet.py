"""A worker refuses to join a group that holds workers of an earlier version.

Those subscribed the group to the input topics and the changelog; this
version to `<app id>-assignment`.  faust's assignor co-partitions each set on
its own, so a mixed group gives one waits partition to two workers at once.
The earlier worker is played by a consumer of the group assigned the requests
topic, as an earlier worker was.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from streams.config import Settings
from streams.frame.fleet import check
from streams.testing.workers import XWAIT, free_port, settings_env
from streams.topics import assignment_topic
from tests.e2e.conftest import new_e2e

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def test_a_worker_refuses_a_group_with_workers_of_an_earlier_version(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings: Settings = new_e2e(kafka_bootstrap, tmp_path, "fleet", partitions=2)
    check(settings, assignment_topic(settings))  # an empty group: nothing to refuse
    earlier = Consumer(settings.confluent(**{"group.id": settings.app_id,
                                             "client.id": "xwait-before-2026-12-03",
                                             "session.timeout.ms": 10_000}))
    try:
        earlier.subscribe([settings.topic("requests")])
        deadline = time.monotonic() + 30
        while not earlier.assignment():
            assert time.monotonic() < deadline, "the earlier worker was never assigned"
            earlier.poll(0.2)
        # It waits one session timeout for the earlier worker to leave before it refuses:
        # the least the broker allows (group.min.session.timeout.ms), not the default 20 s.
        env = {**os.environ, **settings_env(settings), "XWAIT_DATA_DIR": str(tmp_path / "data"),
               "XWAIT_WEB_PORT": str(free_port()), "XWAIT_SESSION_TIMEOUT": "6"}
        started = subprocess.run([str(XWAIT), "worker"], env=env, capture_output=True,
                                 text=True, timeout=120)
    finally:
        earlier.close()
    assert started.returncode == 2
    line = started.stderr.strip().splitlines()[-1]
    assert "workers of an earlier version are running" in line
    assert f"holds {settings.topic('requests')}" in line and "stop every worker" in line
