"""`xwait reply KEY --channel C --data JSON`: answer a wait as a channel adapter would."""

from __future__ import annotations

import argparse
import json

from streams.cli.receipt import sent_and_decided
from streams.client import InvalidRequest, XwaitClient
from streams.config import Settings


def json_arg(flag: str, text: str) -> str:
    """The flag's JSON text, checked, so the error names the flag rather than a field."""
    try:
        json.loads(text)
    except ValueError as exc:
        raise InvalidRequest(f"{flag} is not valid JSON: {exc}") from exc
    return text


def run_reply(args: argparse.Namespace, settings: Settings) -> int:
    data = json_arg("--data", args.data)
    topic = settings.topic("replies")
    with XwaitClient(settings) as client:
        return sent_and_decided(
            lambda: client.reply(args.key, data, channel=args.channel, tenant=args.tenant,
                                 reply_id=args.reply_id, force=args.force,
                                 wait=(args.timeout or True) if args.wait else False),
            {"sent": "Reply", "correlationKey": args.key, "channel": args.channel,
             "topic": topic},
            args.json, f"reply sent  key={args.key} channel={args.channel} topic={topic}")
