"""streams.testing.workers.free_port: the ports the tests poll before a server listens."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from streams.testing.workers import (
    KAFKA_CONTROLLER_OFFSET,
    LOWEST_FREE_PORT,
    ephemeral_ports,
    free_broker_port,
    free_port,
)


def test_ports_are_free_and_outside_the_kernels_ephemeral_range() -> None:
    # Inside it, a client polling the port before its server listens can be given
    # that very port as its source port and connect to itself.
    ephemeral = ephemeral_ports()
    for _ in range(200):
        port = free_port()
        assert port not in ephemeral and LOWEST_FREE_PORT <= port <= 65535
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_each_offset_is_free_and_outside_the_range_too() -> None:
    ephemeral = ephemeral_ports()
    for offsets in ((1,), (1000,), (0, 1, 2, 1000, 1001, 1002)):
        for _ in range(50):
            base = free_port(*offsets)
            for port in (base, *(base + off for off in offsets)):
                assert port not in ephemeral and port <= 65535
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))


def test_a_broker_port_leaves_room_for_its_controller_listener() -> None:
    # scripts/kafka puts the controller on port + 1000: a broker on 64959 failed to start
    # (bind(): port must be 0-65535) when its port came from free_port().
    layout = (Path(__file__).resolve().parent.parent / "scripts" / "kafkactl"
              / "layout.py").read_text()
    assert f"\nCONTROLLER_OFFSET = {KAFKA_CONTROLLER_OFFSET}\n" in layout
    ephemeral = ephemeral_ports()
    for _ in range(200):
        port = free_broker_port()
        controller = port + KAFKA_CONTROLLER_OFFSET
        assert controller <= 65535 and controller not in ephemeral
        with socket.socket() as s:
            s.bind(("127.0.0.1", controller))


class _Repeating:
    """A random source that names each port twice before the next, as two processes
    looking at the same moment would."""

    def __init__(self) -> None:
        self.calls = 0

    def randrange(self, stop: int) -> int:
        self.calls += 1
        return ((self.calls - 1) // 2) % stop


def test_a_port_handed_out_is_not_handed_out_again_before_its_server_binds_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Between free_port's check and the bind (a worker's web port a second or two
    # later, a broker's up to a minute) another test process got the same port.
    from streams.testing import workers
    monkeypatch.setattr(workers, "CLAIMS", tmp_path / "claims")
    rng = _Repeating()
    monkeypatch.setattr(workers, "_rng", lambda: rng)
    first = free_port()
    second = free_port()
    assert first != second
    # Once the claim is old, the port (still free) may be handed out again.
    monkeypatch.setattr(workers, "CLAIM_S", 0.0)
    rng.calls = 0
    assert free_port() == first
