"""docs/reference/cli.md: every command and flag of `streams.cli.build_parser()`."""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Iterator
from typing import Any

from refpages.markdown import HEADER, Undocumented, code, one_line, table


def commands(parser: argparse.ArgumentParser, prefix: str = ""
              ) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every (command words, parser) below `parser`, depth first, in the parser's order."""
    for action in parser._actions:  # noqa: SLF001
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for name, sub in action.choices.items():
                words = f"{prefix} {name}".strip()
                yield words, sub
                yield from commands(sub, words)


SHARED_GROUPS = ("Kafka and topology", "Kafka security")


def _shared(group: Any) -> bool:
    return any((group.title or "").startswith(title) for title in SHARED_GROUPS)


def _argument(action: argparse.Action) -> list[str]:
    if action.option_strings:
        name = ", ".join(action.option_strings)
        if action.nargs != 0:
            name += " " + (action.metavar if isinstance(action.metavar, str)
                           else action.dest.upper())
    else:
        name = str(action.metavar or action.dest)
    text = action.help or ""
    if action.choices and not isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
        text += f" (one of: {', '.join(map(str, action.choices))})"
    if action.default not in (None, False, [], argparse.SUPPRESS) and action.option_strings \
            and "default" not in text:
        text += f" (default {action.default})"
    return [code(name), text]


def cli() -> str:
    from streams import cli as module
    from streams.cli import build_parser

    parser = build_parser()
    every = list(commands(parser))
    sections = []
    for words, sub in every:
        own = [a for g in sub._action_groups if not _shared(g)  # noqa: SLF001
               for a in g._group_actions  # noqa: SLF001
               if a.dest not in ("help",) and not isinstance(a, argparse._SubParsersAction)]  # noqa: SLF001
        subs = [a for a in sub._actions if isinstance(a, argparse._SubParsersAction)]  # noqa: SLF001
        about = sub.description or _help_of(parser, words)
        if not about:
            raise Undocumented(f"`xwait {words}` has neither help nor description")
        part = [f"### xwait {words}\n", one_line(about) + "\n"]
        if subs:
            part.append("Subcommands: " + ", ".join(
                f"`{words} {name}`" for name in subs[0].choices) + ".\n")
        for action in own:
            if action.option_strings and not (action.help or "").strip():
                raise Undocumented(f"`xwait {words}` {action.dest}: no help")
        if own:
            part.append(table(["argument", "meaning"], [_argument(a) for a in own]))
        if any(_shared(g) and g._group_actions for g in sub._action_groups):  # noqa: SLF001
            part.append("And [the flags every Kafka command shares]"
                        "(#flags-every-kafka-command-shares).\n")
        sections.append("\n".join(part))
    shared_rows: list[list[str]] = []
    seen: set[str] = set()
    for _, sub in every:
        for group in sub._action_groups:  # noqa: SLF001
            if _shared(group):
                for action in group._group_actions:  # noqa: SLF001
                    if action.dest not in seen:
                        seen.add(action.dest)
                        shared_rows.append(_argument(action))
    return (
        HEADER + "# CLI reference\n\n"
        "Every command and flag of `xwait`, from its argument parser (`xwait COMMAND "
        "--help` prints the same). `xwait --version` prints the version.\n\n"
        "## Exit codes\n\n" + _exit_codes(module.__doc__ or "")
        + "\n## Commands\n\n" + "\n".join(sections)
        + "\n## Flags every Kafka command shares\n\n"
        "Given after a command's own; each overrides its `XWAIT_*` variable "
        "([configuration](configuration.md)).\n\n"
        + table(["flag", "meaning"], shared_rows))


def _help_of(parser: argparse.ArgumentParser, words: str) -> str:
    """The `help=` a command was added with (argparse keeps it on the choices action)."""
    *parents, last = words.split()
    node = parser
    for word in parents:
        node = next(a for a in node._actions  # noqa: SLF001
                    if isinstance(a, argparse._SubParsersAction)).choices[word]  # noqa: SLF001
    sub = next(a for a in node._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    for choice in sub._choices_actions:  # noqa: SLF001
        if choice.dest == last:
            return choice.help or ""
    return ""


def _exit_codes(doc: str) -> str:
    """The CLI module's docstring, past its title: what each exit code means."""
    return inspect.cleandoc(doc.split("\n", 1)[1]) + "\n"
