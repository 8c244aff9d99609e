"""N KRaft nodes on loopback: scripts/kafka's cluster (`--nodes 3`)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from kafkactl.broker import Broker
from kafkactl.layout import Fail, new_cluster_id
from kafkactl.ports import default_ports, ephemeral_ports, plan
from kafkactl.wire import metadata_brokers, port_in_use


class Cluster:
    """N KRaft nodes on loopback, each a broker and a controller (the quorum's voters)."""

    def __init__(self, nodes: int, base: int, home: Path) -> None:
        if nodes < 3:
            raise Fail(f"--nodes {nodes}: a cluster has at least 3 nodes (a majority of its "
                       "controllers must survive one node's loss)")
        self.nodes = nodes
        self.base = base
        self.home = home
        self.folder = home / f"cluster-{base}"
        self.rf = min(3, nodes)
        self.min_isr = self.rf - 1
        self.clients = [base + i for i in range(nodes)]
        # None until chosen, when the default controller ports are not usable (`ports`).
        self.controllers = plan(self.clients, self._saved().get("controllerPorts"),
                                ephemeral_ports(), port_in_use, may_choose=False)

    @property
    def voters(self) -> str:
        return ",".join(f"{i}@127.0.0.1:{self.controller_port(i)}"
                        for i in range(1, self.nodes + 1))

    def controller_port(self, node_id: int) -> int:
        """Node `node_id`'s controller port (before a start chose them: the default)."""
        ports = self.controllers or default_ports(self.clients)
        return ports[node_id - 1]

    def _saved(self) -> dict[str, Any]:
        try:
            saved = json.loads((self.folder / "cluster.json").read_text())
        except (OSError, ValueError):
            return {}
        return saved if isinstance(saved, dict) else {}

    def _save(self, **fields: Any) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "cluster.json").write_text(json.dumps({**self._saved(), **fields}) + "\n")

    def place_controllers(self, running: bool) -> None:
        """Before a start: the controller ports (`ports.plan`), chosen and recorded when
        the default ones are not usable and no node runs (else the recorded ones)."""
        ephemeral = ephemeral_ports()
        got = plan(self.clients, self._saved().get("controllerPorts"), ephemeral, port_in_use,
                   may_choose=not running)
        if got is None:
            raise Fail(f"the controller ports of the cluster on port {self.base} were never "
                       f"recorded: `scripts/kafka start --nodes {self.nodes} --port "
                       f"{self.base}` starts every node")
        if got != default_ports(self.clients) and got != self._saved().get("controllerPorts"):
            self._save(controllerPorts=got)
            print(f"controller ports {default_ports(self.clients)} are not all outside the "
                  f"kernel's ephemeral ports ({ephemeral.start}-{ephemeral.stop - 1}): the "
                  f"controllers listen on {got} (recorded in {self.folder / 'cluster.json'})")
        self.controllers = got

    @classmethod
    def recorded(cls, base: int, home: Path, nodes: int | None) -> Cluster:
        """The cluster on `base` with the node count it was started with (else `nodes`, or 3)."""
        try:
            saved = json.loads((home / f"cluster-{base}" / "cluster.json").read_text())
            known = int(saved["nodes"])
        except (OSError, ValueError, KeyError, TypeError):
            known = None
        if nodes is not None and known is not None and nodes != known:
            raise Fail(f"the cluster on port {base} was made with {known} nodes, not {nodes}: "
                       f"`scripts/kafka reset --nodes {known} --port {base}` first")
        return cls(nodes or known or 3, base, home)

    def cluster_id(self) -> str:
        """The id every node is formatted with, made once and kept beside the nodes."""
        saved = self._saved().get("clusterId")
        if saved:
            return str(saved)
        cid = new_cluster_id()
        self._save(clusterId=cid, nodes=self.nodes, base=self.base)
        return cid

    def node(self, node_id: int) -> Broker:
        if not 1 <= node_id <= self.nodes:
            raise Fail(f"node {node_id}: the cluster has nodes 1 to {self.nodes}")
        return Broker.node(self, node_id)

    def all(self) -> list[Broker]:
        return [self.node(i) for i in range(1, self.nodes + 1)]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.all())

    def start(self, timeout: float) -> None:
        self.place_controllers(running=any(b.pid() is not None for b in self.all()))
        brokers = self.all()
        ports = [p for b in brokers if b.pid() is None for p in (b.port, b.controller_port)]
        taken = [p for p in ports if port_in_use(p)]
        if taken:
            raise Fail(f"port {taken[0]} on 127.0.0.1 is taken by another process; "
                       f"choose another base port with --port or XWAIT_KAFKA_PORT")
        started = time.monotonic()
        for b in brokers:
            b.launch()
        # The timeout is the nodes' to find each other, from the last launch: a busy
        # machine (load 40) took 80 s to format and launch three, and a deadline counted
        # from the first left the cluster 10 s to form.
        launched = time.monotonic()
        for b in brokers:
            b.wait_ready(max(1.0, timeout - (time.monotonic() - launched)), brokers=self.nodes)
        print(f"kafka cluster of {self.nodes} ready in {time.monotonic() - started:.1f}s: "
              f"bootstrap {self.bootstrap}")

    def start_node(self, node_id: int, timeout: float) -> None:
        self.place_controllers(running=any(b.pid() is not None for b in self.all()))
        b = self.node(node_id)
        if b.pid() is None:
            taken = [p for p in (b.port, b.controller_port) if port_in_use(p)]
            if taken:
                raise Fail(f"port {taken[0]} on 127.0.0.1 is taken by another process")
        b.launch()
        # Back once it is registered with the controller (it lists itself beside
        # another live node): the others need not all be up.
        b.wait_ready(timeout, brokers=2)

    def stop(self) -> None:
        for b in reversed(self.all()):
            b.stop()

    def reset(self) -> None:
        self.stop()
        if self.folder.exists():
            shutil.rmtree(self.folder)
            print(f"removed {self.folder}")

    def controller(self) -> int | None:
        """The active controller: the leader of the newest epoch any node recorded."""
        states = [s for b in self.all() if (s := b.quorum_state()) is not None and s[1] >= 0]
        return max(states)[1] if states else None

    def describe(self) -> dict[str, object]:
        nodes = {}
        for b in self.all():
            pid = b.pid()
            ids = metadata_brokers(b.port) if pid is not None else None
            nodes[str(b.node_id)] = {
                "port": b.port, "controllerPort": b.controller_port if self.controllers else None,
                "pid": pid, "answers": ids is not None, "brokersSeen": sorted(ids or ()),
                "data": str(b.data)}
        return {"nodes": nodes, "bootstrap": self.bootstrap, "controller": self.controller()}

    def status(self, as_json: bool) -> int:
        info = self.describe()
        nodes: dict[str, dict[str, object]] = info["nodes"]  # type: ignore[assignment]
        if as_json:
            print(json.dumps(info, indent=2))
        else:
            for node_id, n in nodes.items():
                state = ("not running" if n["pid"] is None else
                         f"running (pid {n['pid']}), "
                         + ("answers metadata requests" if n["answers"]
                            else "NOT answering metadata requests"))
                print(f"node {node_id}: 127.0.0.1:{n['port']} {state}")
            print(f"active controller: node {info['controller']}")
            print(f"bootstrap {info['bootstrap']}")
        return 0 if all(n["answers"] for n in nodes.values()) else 1
