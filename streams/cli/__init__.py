"""The `xwait` command line.

Exit codes scripts can trust: 0 success, 1 the operation failed (for
`topics describe`: the topics are not healthy), 2 bad usage or configuration,
3 Kafka (or the Schema Registry) unreachable, said in one line within 5 s
(`XWAIT_CONNECT_TIMEOUT`) of running the command, start-up included (for
`worker` and `adapter`: of its start-up; for `status` and `list`: no worker
answered), 4 no such wait: a worker answered that no wait has the key
(`reply`, the operator commands, `status`, `result`). `result` also says how
the wait ended: 0 RECEIVED, 5 ESCALATED, 6 CANCELLED, 7 no outcome within
`--timeout`. 130: interrupted (Ctrl-C) while a bulk operation ran.

`reply` and the operator commands with `--wait` say what the worker made of
the record (its receipt, `streams.core.receipts`): 0 a reply won / a command
was applied, 5 escalated (an invalid reply, where the definition escalates
them), 7 no receipt within `--timeout` (it was sent, and is decided when a
worker gets to it), 8 held (before its request, or while its wait is
suspended), 9 in review (it won but failed validation), 10 late, 11 duplicate,
12 tenant mismatch, 13 rejected or refused for another reason (printed), 14
unchanged (a command that asked for what already was), 15 recorded (a probe's
not-ready result).

Per command, what "failed" (1) and "bad usage" (2) mean:

* `start`, `reply`, `suspend`, `resume`, `cancel`, `deliver`, `reschedule`, `review`,
  `migrate`, `report`: 2
  when an argument is refused before anything is produced (unknown definition, a
  channel the wait's definition lacks, JSON that does not parse, a deadline or
  shift isodate cannot read, a key with `~` or NUL or longer than 1024 bytes
  (`streams.core.keys.MAX_KEY_BYTES`), a broken definition folder, a `migrate
  --to` version the definitions topic does not hold: the message lists the
  versions it holds); 4 when a worker says no wait has the key (`--force`
  sends anyway; `report` asks no worker); 1 when a topic is missing or Kafka
  refused or did not confirm a record.
* `cancel`, `suspend`, `resume`, `migrate`, `reschedule` with `--where FILTER` (a
  bulk operation, streams/cli/bulk.py): 0 every selected wait was applied or
  skipped, or the `--dry-run` count was printed; 1 some were refused (the
  summary gives each worker's reason) or not confirmed within `--timeout`, or
  Kafka stopped taking commands: the same command with `--operation ID` goes
  on; 2 a filter it cannot read (an unknown field, a bad time: the message
  names it), KEY and `--where` together, `migrate --where` without `--to` or
  with a version the definitions topic does not hold, or "no" to its question
  on a terminal, with nothing sent; 3 no worker answered at `--console`, or not
  every worker answered the list (the selection would be incomplete); 130
  interrupted: the summary says what was done.
* `tail`: 1 when `--count N` records did not arrive within `--timeout`, or a
  record could not be decoded (it is reported on stderr, the tail goes on).
* `definitions`: 1 when a definition is broken (the message names the file
  and the field) or the folder holds none.  `definitions export`: 2 for an
  unknown name or a broken definition.  `definitions import`: 1 when the
  file's shape breaks the pattern (the message names the node) or the
  definition it gives is refused; 2 when the file cannot be read.
  `definitions remove`: 1 when waits not yet done still follow the definition
  (the message counts them by version) or a worker still loads it; 3 when no
  worker answers.
* `status`, `list`: 4 when the key is unknown (404), 1 when the worker refused
  the request; 3 when no worker answered at `--console` or none could answer
  for the key during a rebalance (503); `status`: 2 for a key no wait can have
  (NUL, or longer than 1024 bytes), without asking a worker.
* `worker`: 3 when the broker does not answer, 2 when the web port is taken.
* `adapter webhook`: 2 for a configuration it refuses (the message names the file
  and field), 3 when the broker does not answer, 1 when Kafka did not take the
  results of a batch (nothing of it was committed; run it under a supervisor).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from streams import config
from streams.client import _budget
from streams.errors import ConfigError, KafkaUnavailable, XwaitError

# Start-up cost is part of the CLI's interface: `--help`, `status` and `reply`
# should spend at most 0.3 s of CPU before doing anything (issue 31: 0.9 s).
# So this module imports only argparse, the settings and the error root; each
# command imports what it needs when it runs (streams.cli.<command>), and the
# version is looked up only for `--version`.

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_KAFKA = 3
EXIT_NO_SUCH_WAIT = 4
EXIT_ESCALATED = 5
EXIT_CANCELLED = 6
EXIT_NO_RESULT = 7
EXIT_HELD = 8
EXIT_IN_REVIEW = 9
EXIT_LATE = 10
EXIT_DUPLICATE = 11
EXIT_TENANT_MISMATCH = 12
EXIT_REFUSED = 13
EXIT_UNCHANGED = 14
EXIT_RECORDED = 15
EXIT_INTERRUPTED = 130  # the shell's 128 + SIGINT, as any command stopped by Ctrl-C

BULK_COMMANDS = ("cancel", "suspend", "resume", "migrate", "reschedule")
"""The operator commands that also take `--where FILTER` (streams.cli.bulk)."""


def _common(parser: argparse.ArgumentParser, *, console: bool = True) -> None:
    """The flags every Kafka command shares, in groups listed after the command's own.

    Call it last: argparse prints a command's own options first, then these
    groups, so `xwait reply --help` starts with what a reply needs.
    """
    parser.add_argument("--json", action="store_true", help="print data as JSON")
    kafka = parser.add_argument_group("Kafka and topology (shared by every command)")
    kafka.add_argument("--bootstrap", help="Kafka bootstrap servers (XWAIT_BOOTSTRAP)")
    kafka.add_argument("--prefix", dest="topic_prefix", help="topic prefix (XWAIT_TOPIC_PREFIX)")
    kafka.add_argument("--partitions", type=int, help="partitions per topic (XWAIT_PARTITIONS)")
    kafka.add_argument("--topology", type=Path, help="topology folder (XWAIT_TOPOLOGY)")
    kafka.add_argument("--schema-registry", dest="schema_registry_url", metavar="URL",
                       help="Confluent-compatible Schema Registry (XWAIT_SCHEMA_REGISTRY_URL)")
    if console:
        _console_flag(kafka)
    security = parser.add_argument_group(
        "Kafka security (the SASL password only from XWAIT_SASL_PASSWORD: a flag would show "
        "in the process list)")
    for flag, variable in SECURITY_FLAGS.items():
        security.add_argument(f"--{flag}", dest=variable, metavar=flag.split("-", 1)[1].upper(),
                              help=f"({variable})")


def _console_flag(parser: argparse.ArgumentParser | Any) -> None:
    parser.add_argument("--console", dest="console_url",
                        help="a worker's web URL, to check keys and read status "
                             "(XWAIT_CONSOLE_URL, default http://127.0.0.1:6066)")


def _version() -> str:
    from importlib import metadata  # 30 ms: only for --version

    try:
        return metadata.version("xwait")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare tree
        return "unknown (not installed)"


class _VersionAction(argparse.Action):
    """`--version`, looked up only when asked for (argparse's own wants the text up front)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str | None = None) -> None:  # noqa: A002
        super().__init__(option_strings, dest, nargs=0, default=default,
                         help=help or "show the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        print(f"xwait {_version()}")  # on stdout, as argparse's own version action
        parser.exit()


# Flags that stand for XWAIT_* security variables; applied as if set in the
# environment, so that flags and variables go through the same checks.
SECURITY_FLAGS = {
    "security-protocol": "XWAIT_SECURITY_PROTOCOL",
    "sasl-mechanism": "XWAIT_SASL_MECHANISM",
    "sasl-username": "XWAIT_SASL_USERNAME",
    "ssl-cafile": "XWAIT_SSL_CAFILE",
    "ssl-certfile": "XWAIT_SSL_CERTFILE",
    "ssl-keyfile": "XWAIT_SSL_KEYFILE",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="xwait", description="The external wait, on Kafka.")
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", required=True)

    topics = sub.add_parser("topics", help="create or check the contract's topics")
    topics_sub = topics.add_subparsers(dest="topics_command", required=True)
    for name, text in (("create", "create missing topics (idempotent)"),
                       ("describe", "show topics; fail when co-partitioning is broken, a "
                                    "partition is under-replicated or has no leader, or a "
                                    "setting differs from the topology")):
        cmd = topics_sub.add_parser(name, help=text)
        cmd.add_argument("--replication-factor", type=_positive_int,
                         help="replicas of every topic (XWAIT_REPLICATION_FACTOR; default: "
                              "topics.yaml's, 1 in the example)")
        cmd.add_argument("--min-insync-replicas", type=_positive_int,
                         help="replicas a write needs in sync (XWAIT_MIN_INSYNC_REPLICAS; "
                              "default: 2 from 3 replicas up, else 1)")
        _common(cmd)

    worker = sub.add_parser("worker", help="run a stream-processing worker")
    worker.add_argument("--data-dir", type=Path, help="RocksDB folder (XWAIT_DATA_DIR)")
    worker.add_argument("--guarantee", choices=[g.value for g in config.Guarantee],
                        help="processing guarantee (XWAIT_GUARANTEE)")
    worker.add_argument("--timer-tick", type=float, help="stream clock tick, s (XWAIT_TIMER_TICK)")
    worker.add_argument("--web-port", type=int, help="web/console port (XWAIT_WEB_PORT)")
    worker.add_argument("--web-host", help="web/console bind address (XWAIT_WEB_HOST)")
    worker.add_argument("--web-advertised-host",
                        help="host other workers reach this one by (XWAIT_WEB_ADVERTISED_HOST)")
    worker.add_argument("--loglevel", dest="log_level", help="log level (XWAIT_LOG_LEVEL)")
    worker.add_argument("--processes", type=_positive_int, default=1,
                        help="run N workers of the app under one supervisor, each with its "
                             "own data folder (<data-dir>/<i>) and web port (<web-port>+i), "
                             "i = 0..N-1 (default 1: this process is the worker)")
    _common(worker)

    from streams.cli.producing import add_producing_commands
    add_producing_commands(sub)

    from streams.cli.adapter import add_parser as add_adapter
    _common(add_adapter(sub))

    result = sub.add_parser(
        "result", help="wait for the outcome of one wait; the exit code says how it ended")
    result.add_argument("key")
    result.add_argument("--timeout", type=_positive_float, default=30.0,
                        help="give up after S seconds (exit 7; default 30)")
    _common(result, console=True)

    tail = sub.add_parser("tail", help="print outcomes, actions or rejected records as JSON lines")
    tail.add_argument("kind", choices=["outcomes", "actions", "rejected"])
    tail.add_argument("--from-beginning", action="store_true",
                      help="start at the oldest record instead of new ones only")
    tail.add_argument("--count", type=_positive_int, help="stop after N records")
    tail.add_argument("--timeout", type=_positive_float,
                      help="stop after S seconds (with --count: fail when fewer arrived)")
    tail.add_argument("--group", dest="group_id",
                      help="consumer group, to commit progress (default: a throw-away group)")
    tail.add_argument("--key", help="only the records of this wait key, from when it parked "
                                    "(a wait no worker knows: from the oldest record)")
    tail.add_argument("--raw", action="store_true",
                      help="print exactly what `codec.from_json` reads back (bytes as base64, "
                           "JSON fields as text) instead of decoded text and nested JSON")
    tail.add_argument("--headers", action="store_true",
                      help='print each record with its Kafka headers: {"headers": {...}, '
                           '"record": {...}} (the wait\'s traceparent travels there)')
    _common(tail)

    definitions = sub.add_parser(
        "definitions", help="list and validate the wait definitions in topology/waits, and "
                            "the versions waits follow; export one as BPMN, import one "
                            "from BPMN; remove one no wait follows")
    _common(definitions)
    _definition_commands(definitions)

    _reading_commands(sub)
    return parser


def _definition_commands(definitions: argparse.ArgumentParser) -> None:
    """`definitions export`, `import` and `remove`; bare `definitions` lists them and the
    versions in use."""
    dsub = definitions.add_subparsers(dest="definitions_command",
                                      metavar="{export,import,remove}")
    # export and remove are alike in shape (duplicates lists the pair), deliberately: two
    # commands' parsers, each with its own words.
    export = dsub.add_parser(
        "export", help="write a definition as BPMN 2.0 (--bpmn) or as normalised YAML",
        description="Write the definition NAME of topology/waits (or the YAML file at that "
                    "path) as BPMN 2.0 XML with its diagram (--bpmn), for Camunda Modeler or "
                    "bpmn.io, or as YAML with every default spelled out.")
    export.add_argument("name", help="definition name, or the path of a .yaml file")
    export.add_argument("--bpmn", action="store_true", help="BPMN 2.0 XML (default: YAML)")
    export.add_argument("-o", "--output", type=Path, help="write to FILE (default: stdout)")
    # SUPPRESS: given before `export`, the flag keeps its value (argparse would reset it).
    export.add_argument("--topology", type=Path, default=argparse.SUPPRESS,
                        help="topology folder (XWAIT_TOPOLOGY)")
    imp = dsub.add_parser(
        "import", help="read a modelled external wait (BPMN 2.0) into a definition's YAML",
        description="Read FILE.bpmn, check that it has the external wait's shape and that "
                    "the definition it gives is one a worker accepts, and write that "
                    "definition as YAML (for topology/waits). Refused shapes are named by node.")
    imp.add_argument("file", type=Path, help="the .bpmn file")
    imp.add_argument("-o", "--output", type=Path, help="write to FILE (default: stdout)")
    imp.add_argument("--name", help="the definition's name (default: the process's name)")
    remove = dsub.add_parser(
        "remove", help="forget every stored version of a definition no wait follows",
        description="Remove the stored versions of NAME from <prefix>.definitions. Refused "
                    "while waits not yet done follow any of them (the count by version is "
                    "printed) or while a worker still loads NAME from its files.")
    remove.add_argument("name", help="definition name")
    _common(remove)


def _reading_commands(sub: Any) -> None:
    """`status` and `list` read a worker's console API, not Kafka."""
    status = sub.add_parser("status", help="show one wait: state, timers, suspension, trace")
    status.add_argument("key")
    listing = sub.add_parser("list", help="list waits (not done by default), by next due time")
    listing.add_argument("--state", choices=["parked", "in_review", "suspended", "done", "all"],
                         help="only waits in this state (default: every state but done; done "
                              "waits are kept with their history until purged)")
    listing.add_argument("--definition", help="only waits of this definition")
    listing.add_argument("--tenant", help="only waits of this tenant")
    listing.add_argument("--key", dest="key_prefix", help="only keys starting with this")
    listing.add_argument("--outcome", choices=["RECEIVED", "ESCALATED", "CANCELLED"],
                         help="only finished waits that ended so (implies --state done)")
    listing.add_argument("--parked-from", help="parked at or after (ISO 8601 date-time, "
                                               "or epoch ms)")
    listing.add_argument("--parked-to", help="parked at or before (ISO 8601 date-time, or "
                                             "epoch ms)")
    listing.add_argument("--after", help="the next page: the cursor the previous page printed")
    listing.add_argument("--limit", type=_positive_int, help="at most N waits (default 100)")
    for cmd in (status, listing):
        _console_flag(cmd)
        cmd.add_argument("--json", action="store_true", help="print data as JSON")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected 1 or more, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number above zero, got {text!r}")
    return value


def settings_from(args: argparse.Namespace) -> config.Settings:
    flagged = {v: getattr(args, v) for v in SECURITY_FLAGS.values()
               if getattr(args, v, None) is not None}
    settings = config.from_env({**os.environ, **flagged})
    overrides: dict[str, Any] = {}
    for name in ("bootstrap", "topic_prefix", "partitions", "replication_factor",
                 "min_insync_replicas", "topology", "data_dir",
                 "timer_tick", "web_port", "web_host", "web_advertised_host", "log_level",
                 "console_url", "schema_registry_url"):
        overrides[name] = getattr(args, name, None)
    if getattr(args, "guarantee", None):
        overrides["guarantee"] = config.Guarantee(args.guarantee)
    if overrides["log_level"] is not None:
        overrides["log_level"] = config.log_level(overrides["log_level"])
    for name, flag in (("console_url", "--console"), ("schema_registry_url", "--schema-registry")):
        if overrides[name] is not None:
            overrides[name] = config.checked_url(flag, overrides[name])
    return settings.with_overrides(**overrides)


def emit(data: Any, as_json: bool, text: str) -> None:
    print(json.dumps(data, indent=2, sort_keys=True) if as_json else text)


def fail_with(code: int, message: str) -> int:
    """Say why on stderr; `code`, for the command to exit with."""
    print(message, file=sys.stderr)
    return code


_IMPORTED = time.monotonic()

EXIT_MARGIN_S = 0.4
"""What is kept of the 5 s for saying "Kafka unreachable" and closing the clients."""


def _process_started() -> float:
    """``time.monotonic()`` when this process started (from /proc), else when this module
    was imported: the 5 s the exit codes promise count from running the command."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            after_name = f.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime", encoding="ascii") as f:
            uptime = float(f.read().split()[0])
        age = uptime - int(after_name[19]) / os.sysconf("SC_CLK_TCK")  # field 22: starttime
    except (OSError, ValueError, IndexError):
        return _IMPORTED
    return time.monotonic() - min(max(age, 0.0), time.monotonic() - _IMPORTED + 60.0)


def main(argv: Sequence[str] | None = None) -> int:
    # Run as a command (argv None), the budget counts from the process start;
    # called from Python (tests, scripts), from this call.
    # The budget itself is set once the settings say how long it is (`_main`).
    started = _process_started() if argv is None else time.monotonic()
    try:
        return _main(argv, started)
    finally:
        _budget.answer_by(None)  # the SDK, used in the same process later, has no budget


def _main(argv: Sequence[str] | None, started: float) -> int:
    parser = build_parser()
    raw = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(raw)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s %(message)s")
    # librdkafka narrates every retry (coordinator loading, connection refused);
    # the CLI reports the outcome in one line of its own instead, which names
    # librdkafka's last error (streams.client._kafka).  A worker logs them.
    if args.command != "worker":
        config.LIBRDKAFKA_LOGGER.propagate = False
    try:
        settings = settings_from(args)
        _budget.answer_by(started + settings.connect_timeout - EXIT_MARGIN_S)
        if args.command == "topics":
            from streams.cli.topics import run_topics

            return run_topics(args, settings)
        if args.command == "worker" and args.processes > 1:
            from streams.cli.supervisor import supervise

            return supervise(settings, raw, args.processes)
        if args.command == "worker":
            from streams.cli.worker import run_worker

            # A worker runs for days: its first metadata request gets the whole
            # XWAIT_CONNECT_TIMEOUT after its (slower) start-up, never a remainder a busy
            # machine ate.
            _budget.answer_by(None)
            return run_worker(settings)
        if args.command == "start":
            from streams.cli.start import run_start

            return run_start(args, settings)
        if args.command == "reply":
            from streams.cli.reply import run_reply

            return run_reply(args, settings)
        if getattr(args, "where", None) is not None or (
                args.command in BULK_COMMANDS and args.key is None):
            from streams.cli.bulk import run_bulk

            return run_bulk(args, settings)
        if args.command in ("suspend", "resume", "cancel", "deliver", "review", "reschedule",
                            "migrate"):
            from streams.cli.commands import run_command

            return run_command(args, settings)
        if args.command == "adapter":
            from streams.cli.adapter import run_adapter

            _budget.answer_by(None)  # runs for days, as a worker does
            return run_adapter(args, settings)
        if args.command == "report":
            from streams.cli.commands import run_report

            return run_report(args, settings)
        if args.command == "tail":
            from streams.cli.tail import run_tail

            return run_tail(args, settings)
        if args.command == "result":
            from streams.cli.result import run_result

            return run_result(args, settings)
        if args.command == "definitions":
            if getattr(args, "definitions_command", None) == "export":
                from streams.cli.bpmn import run_export

                return run_export(args, settings)
            if getattr(args, "definitions_command", None) == "import":
                from streams.cli.bpmn import run_import

                return run_import(args, settings)
            if getattr(args, "definitions_command", None) == "remove":
                from streams.cli.definitions import run_remove

                return run_remove(args, settings)
            from streams.cli.definitions import run_definitions

            return run_definitions(args, settings)
        if args.command == "status":
            from streams.cli.status import run_status

            return run_status(args, settings)
        if args.command == "list":
            from streams.cli.status import run_list

            return run_list(args, settings)
    except ConfigError as exc:
        return fail_with(EXIT_USAGE, f"xwait: configuration error: {exc}")
    except KafkaUnavailable as exc:
        return fail_with(EXIT_KAFKA, f"xwait: Kafka unreachable: {exc}")
    except BrokenPipeError:
        # `xwait tail ... | head`: the reader has what it wanted and left.  Stop
        # quietly, as cat does, instead of a traceback (and another at exit,
        # when Python flushes stdout into the closed pipe).
        _silence_stdout()
        return EXIT_OK
    except XwaitError as exc:
        from streams.client.errors import NoSuchWait
        from streams.codec import RegistryUnavailable  # only on this path: fastavro and all

        if isinstance(exc, RegistryUnavailable):
            return fail_with(EXIT_KAFKA, f"xwait: Schema Registry unreachable: {exc}")
        text = exc.explain("--force") if isinstance(exc, NoSuchWait) else str(exc)
        return fail_with(_exit_code(exc), f"xwait: {text}")
    parser.error(f"unknown command {args.command}")
    return EXIT_USAGE  # pragma: no cover - parser.error exits


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout is no file (captured in tests)
        pass


def _exit_code(exc: XwaitError) -> int:
    """2 for what the user can fix in the command or the configuration, else 1."""
    # Imported here, only on the error path: `topics` and `worker` need neither.
    from streams.client.errors import InvalidRequest, NoSuchWait
    from streams.core.errors import DefinitionError

    if isinstance(exc, NoSuchWait):
        return EXIT_NO_SUCH_WAIT
    return EXIT_USAGE if isinstance(exc, InvalidRequest | DefinitionError) else EXIT_FAILED
