"""`xwait cancel|suspend|resume|migrate|reschedule --where FILTER`: a bulk operation.

The filter's syntax is streams.client.where's; what an operation does, and
why running it again goes on where it stopped, is streams.client.bulk's.
This module is the command line around them:

* ``--dry-run`` prints how many waits the filter selects and the first ten,
  and sends nothing;
* otherwise the operation's id is printed first (on stderr), the waits are
  commanded at ``--rate`` with a progress bar on stderr (when it is a
  terminal), and a summary is printed: applied, skipped (and why), refused
  (with the worker's reason), unconfirmed;
* on a terminal, it asks before commanding anything, unless ``--yes``.

Exit codes: 0 every selected wait was applied or skipped (a dry run: the
count was printed); 1 some were refused or not confirmed within
``--timeout``, or Kafka stopped taking commands (the summary says which;
run the same command with ``--operation ID`` to go on); 2 a filter or
argument it cannot use (nothing selected, nothing sent; ``--force`` is for
one KEY only), or the answer "no" to its question; 3 no worker answered at
``--console``, or not every worker answered the list (the selection would
be incomplete); 130 interrupted (Ctrl-C): what was done so far is
summarised, and the same command with ``--operation ID`` goes on.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from streams.cli import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_KAFKA,
    EXIT_OK,
    EXIT_USAGE,
    fail_with,
)
from streams.cli.status import read_token, waits_table
from streams.client import UnknownVersion, XwaitClient
from streams.client.bulk import (
    SAMPLE,
    BulkCommand,
    BulkKind,
    HttpWaits,
    NotAnswered,
    Operation,
    RejectedCommands,
    Summary,
    new_operation_id,
)
from streams.client.pacing import CONFIRM_TIMEOUT_S
from streams.client.where import Where
from streams.config import Settings

_SINGLE_ONLY = ("dry_run", "operation", "yes")  # flags that mean nothing for one KEY


def run_bulk(args: argparse.Namespace, settings: Settings) -> int:
    if args.key is not None:
        return fail_with(EXIT_USAGE,
                         f"xwait {args.command}: give a KEY or --where FILTER, not both")
    if args.where is None:
        return fail_with(EXIT_USAGE, f"xwait {args.command}: give the KEY of one wait, or "
                                     "--where FILTER to command every wait it selects "
                                     f"(xwait {args.command} --help)")
    if args.force:
        return fail_with(EXIT_USAGE, f"xwait {args.command}: --force is for one KEY; --where "
                                     "commands only waits a worker listed")
    where = Where.parse(args.where)
    command = BulkCommand(BulkKind(args.command), reason=args.reason, operator=args.operator,
                          version=getattr(args, "version", None),
                          deadline=getattr(args, "deadline", None),
                          move_by=getattr(args, "by", None))
    operation_id = args.operation or new_operation_id(args.command)
    op = Operation(HttpWaits(settings.console_url, read_token(settings)), where, command,
                   operation_id, rate=args.rate,
                   confirm_timeout=args.timeout or CONFIRM_TIMEOUT_S)
    try:
        if args.dry_run:
            return _dry_run(op, args)
        return _apply(op, args, settings)
    except NotAnswered as exc:
        return fail_with(EXIT_KAFKA, f"xwait: {exc}")


def _about(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _dry_run(op: Operation, args: argparse.Namespace) -> int:
    count, sample = op.preview(SAMPLE)
    if args.json:
        print(json.dumps({"dryRun": True, "command": args.command, "where": op.where.text,
                          "filter": op.where.describe(), "count": count, "sample": sample},
                         indent=2, sort_keys=True))
        return EXIT_OK
    took = _about(count * op.interval)
    lines = [f"{count} wait(s) match {op.where.text}"
             + (f": {args.command} would take about {took} at {args.rate:g} a second"
                if count else "")]
    if sample:
        lines += waits_table([dict(w) for w in sample])
        if count > len(sample):
            lines.append(f"... and {count - len(sample)} more")
    print("\n".join(lines))
    return EXIT_OK


def _apply(op: Operation, args: argparse.Namespace, settings: Settings) -> int:
    started_ms = int(time.time() * 1000)
    selection = op.select()
    if op.command.kind is BulkKind.MIGRATE:
        _check_version(settings, op.command.version or "", set(selection.values()))
    resume = (f"xwait {args.command} --where {_quoted(op.where.text)} --operation {op.id}")
    print(f"operation {op.id}: {args.command} {len(selection)} wait(s) matching "
          f"{op.where.text}\n  if it stops, run it again with --operation {op.id}",
          file=sys.stderr)
    if selection and sys.stdin.isatty() and not args.yes:
        answer = input(f"{args.command} {len(selection)} wait(s)? [y/N] ").strip().lower()
        if answer not in ("y", "yes"):
            return fail_with(EXIT_USAGE, "xwait: nothing sent")
    from streams.cli.start import ProgressBar  # tqdm: only when commanding

    bar = ProgressBar(sys.stderr, len(selection), label=args.command,
                      enabled=sys.stderr.isatty() and not args.json)

    def progress(done: int, total: int, summary: Summary) -> None:
        bar(done, total)
        bar.bar.set_postfix(applied=summary.applied, skipped=sum(summary.skipped.values()),
                            refused=len(summary.refused), refresh=False)

    rejections = RejectedCommands(settings, since_ms=started_ms)
    try:
        with XwaitClient(settings, check_keys=False) as client:
            summary = op.run(list(selection), client, rejections, on_progress=progress)
    finally:
        rejections.close()
        bar.finish()
    if args.json:
        print(json.dumps(summary.as_json(), indent=2, sort_keys=True))
    else:
        print(summary.text())
    if not summary.complete:
        print(f"xwait: not every wait was applied; to go on: {resume}", file=sys.stderr)
    if summary.stopped == "interrupted":
        return EXIT_INTERRUPTED
    return EXIT_OK if summary.complete else EXIT_FAILED


def _quoted(text: str) -> str:
    import shlex

    return shlex.quote(text)


def _check_version(settings: Settings, version: str, definitions: set[str]) -> None:
    """UnknownVersion (exit 2, nothing sent) unless the definitions topic holds ``version``
    of every definition the selection holds waits of."""
    from streams.definition_store import TOPIC_ROLE, DefinitionStore

    stored: dict[str, list[str]] = {}
    for found in DefinitionStore(settings).read_all().values():
        if found is not None:
            stored.setdefault(found.name, []).append(found.version)
    for name in sorted(definitions):
        if version not in stored.get(name, ()):
            raise UnknownVersion(version, name, {name: stored.get(name, [])},
                                 settings.topic(TOPIC_ROLE))


def _unused(args: argparse.Namespace) -> list[str]:
    """The bulk flags given with a single KEY (they would be ignored)."""
    return [f"--{name.replace('_', '-')}" for name in _SINGLE_ONLY if getattr(args, name, None)]


def refuse_bulk_flags(args: argparse.Namespace) -> str | None:
    """Why a single-key command refuses the bulk flags it was given; None if it was not."""
    unused = _unused(args)
    return (f"{', '.join(unused)} only go with --where FILTER" if unused else None)

