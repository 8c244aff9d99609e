"""`xwait adapter webhook`: the reference channel adapter (streams.adapter.webhook).

Its settings are flags or `XWAIT_WEBHOOK_*` variables (a flag wins), beside the
Kafka settings every command shares: the routes from a YAML file
(`--config`, XWAIT_WEBHOOK_CONFIG) or one URL template for every action
(`--url`, XWAIT_WEBHOOK_URL).
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

from streams.cli import EXIT_OK
from streams.config import Settings
from streams.errors import ConfigError

# The parser is built for every command: the adapter's modules (Kafka clients,
# prometheus_client) are imported only when it runs.
DEFAULT_METRICS_PORT = 6070  # streams.adapter.webhook.DEFAULT_METRICS_PORT
DEFAULT_RETRIES = 3  # streams.adapter.webhook.DEFAULT_RETRIES
DEFAULT_MAX_RETRY_WAIT_S = 30  # streams.adapter.webhook.DEFAULT_MAX_RETRY_WAIT_S

ENV = {
    "config": "XWAIT_WEBHOOK_CONFIG",
    "url": "XWAIT_WEBHOOK_URL",
    "group": "XWAIT_WEBHOOK_GROUP",
    "timeout": "XWAIT_WEBHOOK_TIMEOUT",
    "concurrency": "XWAIT_WEBHOOK_CONCURRENCY",
    "retries": "XWAIT_WEBHOOK_RETRIES",
    "max_retry_wait": "XWAIT_WEBHOOK_MAX_RETRY_WAIT",
    "metrics_port": "XWAIT_WEBHOOK_METRICS_PORT",
    "metrics_host": "XWAIT_WEBHOOK_METRICS_HOST",
}


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> \
        argparse.ArgumentParser:
    adapter = sub.add_parser("adapter", help="run a reference channel adapter")
    kinds = adapter.add_subparsers(dest="adapter_kind", required=True)
    webhook = kinds.add_parser(
        "webhook", help="POST each action to a URL and report what became of it",
        description="Consume <prefix>.actions in a consumer group, POST each action to the "
                    "URL its route names (by definition, action and party), report the "
                    "result of SEND_REQUEST, SEND_REMINDER and RUN_ESCALATION, then commit: "
                    "at least once. 2xx: delivered. Another 4xx than 408, 425, 429: failed "
                    "for good. 408, 425, 429, 5xx, a timeout, no connection: POSTed again "
                    "by the adapter (--retries, after the answer's Retry-After or 1, 2, 4 "
                    "s, each wait at most --max-retry-wait), then failed: sent again by the "
                    "definition's on_send_failure. Every POST of one action, retries and "
                    "send retries alike, carries the same Idempotency-Key.")
    webhook.add_argument("--config", type=Path, help="routes, timeout, concurrency, retries, "
                                                      "max_retry_wait: a YAML file "
                                                      "(XWAIT_WEBHOOK_CONFIG)")
    webhook.add_argument("--url", help="one URL template for every action, e.g. "
                                       "http://host/hook/{definition}/{action} "
                                       "(XWAIT_WEBHOOK_URL)")
    webhook.add_argument("--group", help="consumer group (XWAIT_WEBHOOK_GROUP, default "
                                         "<prefix>-webhook)")
    webhook.add_argument("--timeout", help="per POST: seconds or ISO 8601, default 10 "
                                           "(XWAIT_WEBHOOK_TIMEOUT)")
    webhook.add_argument("--concurrency", help="POSTs in flight, default 8 "
                                               "(XWAIT_WEBHOOK_CONCURRENCY)")
    webhook.add_argument("--retries", help=f"POSTs again after 408, 425, 429, 5xx, a timeout "
                                           f"or no connection, before the failure is "
                                           f"reported, default {DEFAULT_RETRIES}, 0: none "
                                           "(XWAIT_WEBHOOK_RETRIES)")
    webhook.add_argument("--max-retry-wait", help=f"the longest wait before one retry, a "
                                                  f"Retry-After included (a longer one is cut "
                                                  f"to it): seconds or ISO 8601, default "
                                                  f"{DEFAULT_MAX_RETRY_WAIT_S} "
                                                  "(XWAIT_WEBHOOK_MAX_RETRY_WAIT)")
    webhook.add_argument("--metrics-port", help=f"Prometheus metrics port, default "
                                                f"{DEFAULT_METRICS_PORT}, 0: none "
                                                "(XWAIT_WEBHOOK_METRICS_PORT)")
    webhook.add_argument("--metrics-host", help="metrics address, default 127.0.0.1 "
                                                "(XWAIT_WEBHOOK_METRICS_HOST)")
    webhook.add_argument("--from-beginning", action="store_true",
                         help="a group's first run starts at the oldest action (default: at "
                              "those written after the adapter started)")
    return webhook


def _given(args: argparse.Namespace, name: str) -> str | None:
    value = getattr(args, name, None)
    return str(value) if value is not None else os.environ.get(ENV[name]) or None


def _whole(text: str | None, variable: str) -> int | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"{variable}: Expected a whole number, but got {text!r}") from None


def run_adapter(args: argparse.Namespace, settings: Settings) -> int:
    from streams.adapter.webhook import load_config, run, seconds
    from streams.client._kafka import probe

    config_path = _given(args, "config")
    timeout = _given(args, "timeout")
    max_retry_wait = _given(args, "max_retry_wait")
    config = load_config(
        Path(config_path) if config_path else None, url=_given(args, "url"),
        timeout_s=None if timeout is None else seconds(timeout, ENV["timeout"], "timeout"),
        concurrency=_whole(_given(args, "concurrency"), ENV["concurrency"]),
        retries=_whole(_given(args, "retries"), ENV["retries"]),
        max_retry_wait_s=None if max_retry_wait is None else seconds(
            max_retry_wait, ENV["max_retry_wait"], "max_retry_wait"),
        group=_given(args, "group"),
        metrics_port=_whole(_given(args, "metrics_port"), ENV["metrics_port"]),
        metrics_host=_given(args, "metrics_host"),
        from_beginning=args.from_beginning or None)
    logging.getLogger("streams").setLevel(logging.INFO)
    logging.getLogger().setLevel(logging.INFO)
    # Its line per request repeats the adapter's own (which says what became of the action).
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    probe(settings)
    run(settings, config)
    return EXIT_OK
