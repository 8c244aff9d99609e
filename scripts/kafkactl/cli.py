"""scripts/kafka's commands: start, stop, kill, wipe, reset, status, logs, freeze, thaw."""

from __future__ import annotations

import argparse
import os
import sys
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
        if clustered:
            if args.sasl_port is not None:
                raise Fail("--sasl-port is for the single broker, not a cluster")
            cluster = Cluster.recorded(args.port, home, args.nodes)
            if args.node is not None:
                broker = cluster.node(args.node)
                return run_node(args.command, cluster, broker, timeout, args.lines)
            if args.command in ("kill", "wipe", "logs", "freeze", "thaw"):
                raise Fail(f"`{args.command}` needs a NODE (1..{cluster.nodes})")
            if args.command == "start":
                cluster.start(timeout)
            elif args.command == "stop":
                cluster.stop()
            elif args.command == "reset":
                cluster.reset()
            else:
                return cluster.status(args.json)
            return 0
        if args.command in ("kill", "wipe"):
            raise Fail(f"`{args.command}` is for a node of a cluster: scripts/kafka "
                       f"{args.command} NODE --nodes 3")
        if args.command == "start":
            broker.start(timeout)
        elif args.command == "stop":
            broker.stop()
        elif args.command == "reset":
            broker.reset()
        elif args.command == "status":
            return broker.status()
        elif args.command in ("freeze", "thaw"):
            broker.freeze(thaw=args.command == "thaw")
        else:
            broker.logs(args.lines)
    except Fail as exc:
        first, _, rest = str(exc).partition("\n")
        print(f"scripts/kafka: error: {first}", file=sys.stderr)
        if rest:
            print(rest, file=sys.stderr)
        if exc.show_log:
            # The JVM's own output first: a JVM that never started the broker (an
            # unknown option, a heap it cannot have) says why there, not in the log.
            for path in (broker.stdout, broker.log):
                text = tail(path, 20)
                if text:
                    print(f"--- last lines of {path} ---\n{text}", file=sys.stderr)
        return 1
    return 0


def run_node(command: str, cluster: Cluster, broker: Broker, timeout: float, lines: int) -> int:
    if command == "start":
        cluster.start_node(broker.node_id, timeout)
    elif command == "stop":
        broker.stop()
    elif command == "kill":
        broker.kill()
    elif command == "wipe":
        broker.wipe()
    elif command == "logs":
        broker.logs(lines)
    elif command in ("freeze", "thaw"):
        broker.freeze(thaw=command == "thaw")
    else:
        raise Fail(f"`{command}` is for the whole cluster: drop the NODE")
    return 0
