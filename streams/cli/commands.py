"""`xwait suspend|resume|cancel|deliver|reschedule KEY` and `xwait review accept|correct KEY`."""

from __future__ import annotations

import argparse

from streams.cli import EXIT_OK, emit
from streams.cli.reply import json_arg
from streams.client import XwaitClient
from streams.config import Settings


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    key, operator, force = args.key, args.operator, args.force
    with XwaitClient(settings) as client:
        if args.command == "suspend":
            client.suspend(key, args.reason, operator=operator, force=force)
        elif args.command == "resume":
            client.resume(key, reason=args.reason, operator=operator, force=force)
        elif args.command == "cancel":
            client.cancel(key, args.reason, operator=operator, force=force)
        elif args.command == "deliver":
            client.deliver(key, json_arg("--data", args.data), reason=args.reason,
                           operator=operator, force=force)
        elif args.command == "reschedule":
            client.reschedule(key, deadline=args.deadline, move_by=args.by, reason=args.reason,
                              operator=operator, force=force)
        elif args.review_command == "accept":
            client.review(key, "Accept", args.note, operator=operator, force=force)
        else:
            client.review(key, "Submit Correction", args.note,
                          corrected_data=json_arg("--data", args.data), operator=operator,
                          force=force)
    command = "REVIEW" if args.command == "review" else args.command.upper()
    topic = settings.topic("commands")
    sent = {"sent": "Command", "command": command, "correlationKey": key, "operator": operator,
            "topic": topic}
    if args.command == "reschedule":
        sent.update(deadline=args.deadline, moveBy=args.by)
    emit(sent,
         args.json, f"{command.lower()} sent  key={key} topic={topic}")
    return EXIT_OK
