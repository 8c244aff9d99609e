"""Talking to a broker without a client library: is a port taken, does the broker answer a
metadata request (the Kafka protocol, by hand), how to wait until it does."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable
from pathlib import Path

from kafkactl.layout import Fail


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _request(sock: socket.socket, api_key: int, version: int, body: bytes, corr: int) -> bytes:
    client = b"xwait-kafka-script"
    header = struct.pack(">hhih", api_key, version, corr, len(client)) + client
    msg = header + body
    sock.sendall(struct.pack(">i", len(msg)) + msg)
    size = struct.unpack(">i", _recv(sock, 4))[0]
    payload = _recv(sock, size)
    if struct.unpack(">i", payload[:4])[0] != corr:
        raise OSError("correlation id mismatch")
    return payload[4:]


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed")
        buf += chunk
    return buf


def metadata_brokers(port: int) -> set[int] | None:
    """The node ids of the brokers the broker on `port` lists (`metadata`), or None."""
    answer = metadata(port)
    return None if answer is None else answer[0]


def metadata(port: int) -> tuple[set[int], str | None] | None:
    """Ask the broker for cluster metadata over the Kafka protocol: the node ids of
    the brokers it lists and its cluster id, or None when it does not answer.

    ApiVersions (v0, always accepted) says which Metadata versions the broker
    serves; a non-flexible one (<= v8) is then asked for all topics. Ready
    means the broker lists itself - a merely listening socket is not enough.

    A port of the kernel's ephemeral range asked before its broker listens can
    connect to itself (its own source port, the "simultaneous open"): such a
    socket answers nothing and is closed at once, so that the broker can bind it.
    """
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            if sock.getsockname() == sock.getpeername():
                return None
            sock.settimeout(3)
            resp = _request(sock, 18, 0, b"", 1)
            error, count = struct.unpack(">hi", resp[:6])
            if error != 0:
                return None
            versions = {}
            for i in range(count):
                key, lo, hi = struct.unpack(">hhh", resp[6 + 6 * i: 12 + 6 * i])
                versions[key] = (lo, hi)
            lo, hi = versions.get(3, (0, -1))
            version = max(lo, 4)
            if version > min(hi, 8):
                return None
            body = struct.pack(">i", -1) + b"\x00"  # all topics, no auto-creation
            meta = _request(sock, 3, version, body, 2)
            # throttle_time_ms, then brokers: [node_id, host, port, rack (nullable)]
            count = struct.unpack(">i", meta[4:8])[0]
            at, ids = 8, set()
            for _ in range(count):
                node_id, host_len = struct.unpack(">ih", meta[at:at + 6])
                at += 6 + host_len + 4
                rack_len = struct.unpack(">h", meta[at:at + 2])[0]
                at += 2 + max(rack_len, 0)
                ids.add(node_id)
            cluster_len = struct.unpack(">h", meta[at:at + 2])[0]
            cluster = meta[at + 2:at + 2 + cluster_len].decode() if cluster_len >= 0 else None
            return ids, cluster
    except (OSError, struct.error):
        return None


def metadata_ok(port: int) -> bool:
    return bool(metadata_brokers(port))


def wait_until_ready(port: int, timeout: float, alive: Callable[[], bool] = lambda: True,
                     node_id: int = 1, brokers: int = 1, cluster: str | None = None) -> None:
    """Until the broker on `port` lists at least `brokers` brokers (itself among
    them, when it is a node of a cluster), of the cluster `cluster` when given: a
    broker another checkout launched on the same port in the same moment answers
    for a while on the port this one will fail to bind."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            raise Fail("the broker process exited during start-up", show_log=True)
        answer = metadata(port)
        if answer is not None and (cluster is None or answer[1] == cluster):
            ids = answer[0]
            if ids and len(ids) >= brokers and (brokers == 1 or node_id in ids):
                return
        time.sleep(0.25)
    raise Fail(f"the broker on port {port} did not answer a metadata request "
               + (f"listing {brokers} brokers " if brokers > 1 else "")
               + f"within {timeout:.0f}s", show_log=True)


def size(path: Path) -> int:
    """How many bytes `path` holds (0 when there is no such file)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def since(path: Path, offset: int) -> str:
    """What was appended to `path` after its first `offset` bytes."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def tail(path: Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
