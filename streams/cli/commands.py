"""`xwait suspend|resume|cancel|deliver|reschedule|migrate KEY`, `xwait review accept|correct
KEY`, and `xwait report KEY ACTION_ID` for channel adapters."""

from __future__ import annotations

import argparse

from streams.cli import EXIT_OK, EXIT_USAGE, emit, fail_with
from streams.cli.receipt import sent_and_decided
from streams.cli.reply import json_arg
from streams.client import Receipt, XwaitClient
from streams.config import Settings


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    from streams.cli.bulk import refuse_bulk_flags

    refused = refuse_bulk_flags(args)
    if refused is not None:
        return fail_with(EXIT_USAGE, f"xwait {args.command}: {refused}")
    command = "REVIEW" if args.command == "review" else args.command.upper()
    topic = settings.topic("commands")
    sent = {"sent": "Command", "command": command, "correlationKey": args.key,
            "operator": args.operator, "topic": topic}
    if args.command == "reschedule":
        sent.update(deadline=args.deadline, moveBy=args.by)
    if args.command == "migrate":
        sent.update(version=args.version)
    with XwaitClient(settings) as client:
        return sent_and_decided(lambda: _send(client, args), sent, args.json,
                                f"{command.lower()} sent  key={args.key} topic={topic}")


def _send(client: XwaitClient, args: argparse.Namespace) -> Receipt | None:
    key, operator, force = args.key, args.operator, args.force
    wait = (args.timeout or True) if args.wait else False
    if args.command == "suspend":
        return client.suspend(key, args.reason, operator=operator, force=force, wait=wait)
    if args.command == "resume":
        return client.resume(key, reason=args.reason, operator=operator, force=force,
                             wait=wait)
    if args.command == "cancel":
        return client.cancel(key, args.reason, operator=operator, force=force, wait=wait)
    if args.command == "deliver":
        return client.deliver(key, json_arg("--data", args.data), reason=args.reason,
                              operator=operator, force=force, wait=wait)
    if args.command == "reschedule":
        return client.reschedule(key, deadline=args.deadline, move_by=args.by,
                                 reason=args.reason, operator=operator, force=force,
                                 wait=wait)
    if args.command == "migrate":
        return client.migrate(key, version=args.version, reason=args.reason,
                              operator=operator, force=force, wait=wait)
    if args.review_command == "accept":
        return client.review(key, "Accept", args.note, operator=operator, force=force,
                             wait=wait)
    return client.review(key, "Submit Correction", args.note,
                         corrected_data=json_arg("--data", args.data), operator=operator,
                         force=force, wait=wait)


def run_report(args: argparse.Namespace, settings: Settings) -> int:
    if args.permanent and args.failed is None:
        return fail_with(EXIT_USAGE, "xwait report: --permanent goes with --failed ERROR")
    with XwaitClient(settings) as client:
        if args.delivered:
            client.report_delivered(args.key, args.action_id)
        else:
            client.report_failed(args.key, args.action_id, args.failed,
                                 permanent=args.permanent)
    status = "delivered" if args.delivered else "failed"
    topic = settings.topic("replies")
    emit({"sent": "ActionResult", "status": status, "correlationKey": args.key,
          "actionId": args.action_id, "error": args.failed, "permanent": args.permanent,
          "topic": topic},
         args.json, f"result {status} sent  key={args.key} action={args.action_id} "
                    f"topic={topic}")
    return EXIT_OK
