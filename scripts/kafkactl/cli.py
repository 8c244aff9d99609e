"""scripts/kafka's commands: start, stop, kill, wipe, reset, status, logs, freeze, thaw."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from kafkactl.broker import Broker
from kafkactl.cluster import Cluster
from kafkactl.layout import DEFAULT_CLUSTER_PORT, DEFAULT_HOME, Fail, default_port
from kafkactl.wire import tail


def main(doc: str) -> int:
    """scripts/kafka with `sys.argv`; `doc` is its usage (the script's docstring)."""
    parser = argparse.ArgumentParser(prog="scripts/kafka", description=doc.splitlines()[0])
    parser.add_argument("command", choices=["start", "stop", "kill", "wipe", "reset", "status",
                                            "logs", "freeze", "thaw"])
    parser.add_argument("node", type=int, nargs="?",
                        help="one node of a cluster (1..N): start, stop, kill, wipe, logs, "
                             "freeze, thaw")
    parser.add_argument("--nodes", type=int,
                        help="a cluster of this many nodes (3 or more) instead of one broker")
    parser.add_argument("--json", action="store_true", help="`status` of a cluster as JSON")
    parser.add_argument("--lines", type=int, default=60, help="lines shown by `logs`")
    parser.add_argument("--sasl-port", type=int,
                        help="also listen for SASL_PLAINTEXT (PLAIN) clients on this port")
    parser.add_argument("--port", type=int,
                        help="client port (of a cluster: node 1's, node i has PORT+i-1)")
    args = parser.parse_args(sys.argv[1:])
    clustered = args.nodes is not None or args.node is not None
    if args.port is None:
        try:
            args.port = (int(os.environ.get("XWAIT_KAFKA_PORT") or DEFAULT_CLUSTER_PORT)
                         if clustered else default_port())
        except ValueError:
            print("scripts/kafka: error: XWAIT_KAFKA_PORT must be a port number",
                  file=sys.stderr)
            return 1
    home = Path(os.environ.get("XWAIT_KAFKA_HOME", DEFAULT_HOME))
    timeout = float(os.environ.get("XWAIT_KAFKA_START_TIMEOUT", "90"))
    broker = Broker(args.port, home, args.sasl_port)
    try:
        if not clustered:
            return run(args.command, broker_commands(broker, timeout, args.lines),
                       f"is for a node of a cluster: scripts/kafka {args.command} NODE "
                       "--nodes 3")
        if args.sasl_port is not None:
            raise Fail("--sasl-port is for the single broker, not a cluster")
        cluster = Cluster.recorded(args.port, home, args.nodes)
        if args.node is None:
            return run(args.command, cluster_commands(cluster, timeout, args.json),
                       f"needs a NODE (1..{cluster.nodes})")
        broker = cluster.node(args.node)
        return run(args.command, node_commands(cluster, broker, timeout, args.lines),
                   "is for the whole cluster: drop the NODE")
    except Fail as exc:
        first, _, rest = str(exc).partition("\n")
        print(f"scripts/kafka: error: {first}", file=sys.stderr)
        if rest:
            print(rest, file=sys.stderr)
        if exc.show_log:
            # The JVM's own output first: a JVM that never started the broker (an
            # unknown option, a heap it cannot have) says why there, not in the log.
            for path in exc.logs or (broker.stdout, broker.log):
                text = tail(path, 20)
                if text:
                    print(f"--- last lines of {path} ---\n{text}", file=sys.stderr)
        return 1
    return 0


Commands = dict[str, Callable[[], object]]


def run(command: str, commands: Commands, refusal: str) -> int:
    """Run `command` of `commands` (its exit status: a number it returns, else 0), or fail
    saying it `refusal`."""
    if command not in commands:
        raise Fail(f"`{command}` {refusal}")
    status = commands[command]()
    return status if isinstance(status, int) else 0


def broker_commands(broker: Broker, timeout: float, lines: int) -> Commands:
    return {"start": lambda: broker.start(timeout), "stop": broker.stop, "reset": broker.reset,
            "status": broker.status, "freeze": broker.freeze,
            "thaw": lambda: broker.freeze(thaw=True), "logs": lambda: broker.logs(lines)}


def cluster_commands(cluster: Cluster, timeout: float, as_json: bool) -> Commands:
    return {"start": lambda: cluster.start(timeout), "stop": cluster.stop,
            "reset": cluster.reset, "status": lambda: cluster.status(as_json)}


def node_commands(cluster: Cluster, broker: Broker, timeout: float, lines: int) -> Commands:
    return {"start": lambda: cluster.start_node(broker.node_id, timeout), "stop": broker.stop,
            "kill": broker.kill, "wipe": broker.wipe, "logs": lambda: broker.logs(lines),
            "freeze": broker.freeze, "thaw": lambda: broker.freeze(thaw=True)}
