"""The `xwait` command line.

Exit codes scripts can trust: 0 success, 1 the operation failed (for
`topics describe`: the topics are not healthy), 2 bad usage or configuration,
3 Kafka unreachable.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from streams import config
from streams.errors import ConfigError, KafkaUnavailable, XwaitError

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_KAFKA = 3


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap", help="Kafka bootstrap servers (XWAIT_BOOTSTRAP)")
    parser.add_argument("--prefix", dest="topic_prefix", help="topic prefix (XWAIT_TOPIC_PREFIX)")
    parser.add_argument("--partitions", type=int, help="partitions per topic (XWAIT_PARTITIONS)")
    parser.add_argument("--topology", type=Path, help="topology folder (XWAIT_TOPOLOGY)")
    parser.add_argument("--json", action="store_true", help="print data as JSON")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="xwait", description="The external wait, on Kafka.")
    sub = parser.add_subparsers(dest="command", required=True)

    topics = sub.add_parser("topics", help="create or check the contract's topics")
    topics_sub = topics.add_subparsers(dest="topics_command", required=True)
    for name, text in (("create", "create missing topics (idempotent)"),
                       ("describe", "show topics; fail when co-partitioning is broken")):
        _common(topics_sub.add_parser(name, help=text))

    return parser


def settings_from(args: argparse.Namespace) -> config.Settings:
    settings = config.from_env()
    overrides: dict[str, Any] = {}
    for name in ("bootstrap", "topic_prefix", "partitions", "topology", "data_dir",
                 "timer_tick", "web_port", "web_host", "log_level"):
        overrides[name] = getattr(args, name, None)
    if getattr(args, "guarantee", None):
        overrides["guarantee"] = config.Guarantee(args.guarantee)
    return settings.with_overrides(**overrides)


def emit(data: Any, as_json: bool, text: str) -> None:
    print(json.dumps(data, indent=2, sort_keys=True) if as_json else text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s %(message)s")
    try:
        settings = settings_from(args)
        if args.command == "topics":
            from streams.cli.topics import run_topics

            return run_topics(args, settings)
    except ConfigError as exc:
        print(f"xwait: configuration error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KafkaUnavailable as exc:
        print(f"xwait: Kafka unreachable: {exc}", file=sys.stderr)
        return EXIT_KAFKA
    except XwaitError as exc:
        print(f"xwait: {exc}", file=sys.stderr)
        return EXIT_FAILED
    parser.error(f"unknown command {args.command}")
    return EXIT_USAGE  # pragma: no cover - parser.error exits
