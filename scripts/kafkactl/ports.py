"""Which port each node's controller listens on: its client port + 1000, unless that falls
in the kernel's ephemeral range (or past 65535), in which case a free port outside the
range, chosen once and recorded.

Why outside the ephemeral range: the kernel gives a client's outgoing connection a
source port from that range (ip_local_port_range, 32768-60999 on Linux by default).  A
node that connects to another node's controller port before it listens can be given
that very port as its source port, and TCP then connects the socket to itself (the
"simultaneous open"): the node reads its own request back and dies, and while any
process's outgoing connection holds the port, the controller cannot bind it (a start
refused as "port taken").  A port outside the range is never handed out that way.

Chosen ports are recorded (beside the single broker's files, in the cluster's
cluster.json), so that a node started later, `status` and the next start find them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path

from kafkactl.layout import CONTROLLER_OFFSET

# The ports a controller may be given when its default is unusable: above the well-known
# and registered services most machines run, outside the ephemeral range.
LOWEST = 20000
HIGHEST = 65535
LINUX_EPHEMERAL = range(32768, 61000)


def ephemeral_ports(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> range:
    """The kernel's ephemeral range (ip_local_port_range): the source ports it gives clients."""
    try:
        low, high = (int(v) for v in path.read_text().split())
    except (OSError, ValueError):
        return LINUX_EPHEMERAL  # Linux's default
    return range(low, high + 1)


def usable(port: int, ephemeral: range) -> bool:
    """A port a controller may listen on: a port at all, and never a client's source port."""
    return 1024 <= port <= HIGHEST and port not in ephemeral


def default_ports(clients: Sequence[int]) -> list[int]:
    """Each client port + CONTROLLER_OFFSET: the layout of every default base."""
    return [p + CONTROLLER_OFFSET for p in clients]


def choose(clients: Sequence[int], ephemeral: range, taken: Callable[[int], bool]) -> list[int]:
    """One free port per node outside `ephemeral` and apart from the client ports.

    The search starts at a place that depends on the first client port (the same
    base chooses the same ports while they are free; two clusters on different bases
    rarely look in the same place) and walks up, wrapping around.
    """
    candidates = [p for p in range(LOWEST, HIGHEST + 1)
                  if p not in ephemeral and p not in clients]
    if not candidates:
        raise ValueError(f"no port from {LOWEST} to {HIGHEST} is outside the ephemeral range "
                         f"{ephemeral.start}-{ephemeral.stop - 1}")
    start = int.from_bytes(hashlib.sha256(str(clients[0]).encode()).digest()[:4], "big")
    chosen: list[int] = []
    for i in range(len(candidates)):
        port = candidates[(start + i) % len(candidates)]
        if not taken(port):
            chosen.append(port)
            if len(chosen) == len(clients):
                return chosen
    raise ValueError(f"no {len(clients)} free ports outside the ephemeral range "
                     f"{ephemeral.start}-{ephemeral.stop - 1}")


def plan(clients: Sequence[int], recorded: Sequence[int] | None, ephemeral: range,
         taken: Callable[[int], bool], may_choose: bool) -> list[int] | None:
    """The controller ports of nodes listening for clients on `clients`.

    The recorded ones, kept while they are recorded (a node started later must find
    its peers), unless `may_choose` (a start with no node running) and another process
    holds one of them now; else the default when every default port is usable; else,
    when `may_choose`, ports chosen now (for the caller to record); else the recorded
    ones, or None (never chosen: nothing was started there).
    """
    if recorded is not None and len(recorded) == len(clients) and not (
            may_choose and any(taken(p) for p in recorded)):
        return list(recorded)
    default = default_ports(clients)
    if all(usable(p, ephemeral) for p in default):
        return default
    if may_choose:
        return choose(clients, ephemeral, taken)
    return list(recorded) if recorded else None


__all__ = ["choose", "default_ports", "ephemeral_ports", "plan", "usable"]
