"""streams.testing.workers.free_port: the ports the tests poll before a server listens."""

from __future__ import annotations

import socket

from streams.testing.workers import LOWEST_FREE_PORT, ephemeral_ports, free_port


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
