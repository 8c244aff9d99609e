"""docs/reference/configuration.md: every setting, the variable and flag of each, the
webhook adapter's variables and the development scripts' own."""

from __future__ import annotations

import ast
import inspect
import re
from dataclasses import MISSING, fields
from enum import Enum
from pathlib import Path
from typing import Any

from refpages.cli import commands
from refpages.markdown import HEADER, REPO, Undocumented, attribute_docs, code, escape, table


def _from_env_variables() -> dict[str, str]:
    """Field name (of Settings or Security) -> the XWAIT_* variable `from_env` reads for it.

    Read from `from_env`'s source: each keyword of its `Settings(...)` and
    `Security(...)` calls, the names assigned before them, and the module's
    helper functions they call.
    """
    from streams import config

    module = ast.parse(inspect.getsource(config))
    helpers = {n.name: n for n in module.body if isinstance(n, ast.FunctionDef)}
    from_env = helpers["from_env"]
    assigned = {n.targets[0].id: n.value for n in ast.walk(from_env)
                if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)}

    def variables(expr: ast.AST, seen: frozenset[str] = frozenset()) -> set[str]:
        found: set[str] = set()
        for node in ast.walk(expr):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and re.fullmatch(r"XWAIT_[A-Z_]+", node.value):
                found.add(node.value)
            elif isinstance(node, ast.Name) and node.id in assigned and node.id not in seen:
                value = assigned[node.id]
                if not (isinstance(value, ast.Call)
                        and getattr(value.func, "id", "") in ("Settings", "Security")):
                    found |= variables(value, seen | {node.id})
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id in helpers and node.func.id != "from_env":
                found |= {c.value for c in ast.walk(helpers[node.func.id])
                          if isinstance(c, ast.Constant) and isinstance(c.value, str)
                          and re.fullmatch(r"XWAIT_[A-Z_]+", c.value)}
        return found

    out: dict[str, str] = {}
    for call in ast.walk(from_env):
        if isinstance(call, ast.Call) and getattr(call.func, "id", "") in ("Settings",
                                                                           "Security"):
            for keyword in call.keywords:
                if keyword.arg == "security":
                    continue
                names = variables(keyword.value)
                if len(names) != 1:
                    raise SystemExit(f"from_env: {keyword.arg} reads {sorted(names) or 'no'} "
                                     "XWAIT_* variable(s); expected one")
                out[keyword.arg or ""] = names.pop()
    return out


def _flags() -> dict[str, set[str]]:
    """A destination (a Settings field, or an XWAIT_* variable) -> the flags that set it."""
    from streams.cli import build_parser

    found: dict[str, set[str]] = {}
    for _, parser in commands(build_parser()):
        for action in parser._actions:  # noqa: SLF001 - argparse keeps no public list
            if action.option_strings and action.dest not in ("help", "json"):
                found.setdefault(action.dest, set()).update(
                    s for s in action.option_strings if s.startswith("--"))
    return found


def _default(field_default: Any, doc: str) -> tuple[str, str]:
    """The default as shown, and the docstring without its `Default:` line."""
    shown = re.search(r"^Default: (.+)$", doc, re.M)
    if shown:
        return shown.group(1), re.sub(r"\n?^Default: .+$", "", doc, flags=re.M).strip()
    if isinstance(field_default, Path) or field_default is MISSING or field_default is None:
        raise Undocumented(f"a setting whose default is {field_default!r} needs a "
                           "'Default: ...' line in its docstring (what a reader sees)")
    value = field_default.value if isinstance(field_default, Enum) else field_default
    return code(str(value)), doc


def configuration() -> str:
    from streams import config
    from streams.cli import SECURITY_FLAGS, adapter

    variables = _from_env_variables()
    flags = _flags()
    rows = []
    for cls in (config.Settings, config.Security):
        docs = attribute_docs(cls)
        for f in fields(cls):
            if f.name not in variables:
                continue  # not a setting (security is the Security below; app_id_derived)
            variable = variables[f.name]
            doc = docs.get(f.name, "")
            if not doc:
                raise Undocumented(f"{cls.__name__}.{f.name} ({variable}) has no docstring: "
                                   "write what it means under the field in streams/config.py")
            shown, doc = _default(f.default, doc)
            given = sorted(flags.get(f.name, set()) | flags.get(variable, set()))
            rows.append([code(variable), ", ".join(code(g) for g in given), shown, doc])
    missing = sorted(set(SECURITY_FLAGS.values()) - {r[0].strip("`") for r in rows})
    if missing:
        raise SystemExit(f"security flags for variables from_env does not read: {missing}")
    webhook = _webhook_rows(adapter)
    scripts = "\n".join(_script_environment(name) for name in ("kafka", "registry"))
    return (
        HEADER + "# Configuration reference\n\n"
        "Every setting is an environment variable; a command's flag overrides it. "
        "No `.env` file is read: export the variables, or use your process "
        "manager's environment file. A value that is refused names the variable and "
        "what was expected (exit 2).\n\n"
        "## The worker, the CLI and the SDK\n\n"
        "From `streams.config.Settings` and `Security`: each setting's docstring and "
        "default, the variable `from_env` reads, and the flags that override it.\n\n"
        + table(["variable", "flag", "default", "meaning"], rows)
        + "\n## The webhook adapter\n\n"
        "`xwait adapter webhook` (see [channel adapters]"
        "(../guides/adapters.md#the-webhook-adapter)): from `streams.cli.adapter`; a flag "
        "wins over its variable.\n\n"
        + table(["variable", "flag", "meaning"], webhook)
        + "\n## The development scripts\n\n"
        "`scripts/kafka` and `scripts/registry` (a broker and a Schema Registry on "
        "this machine), from their own documentation.\n\n" + scripts)


def _webhook_rows(adapter: Any) -> list[list[str]]:
    from streams.cli import build_parser

    [(_, webhook)] = [(n, p) for n, p in commands(build_parser()) if n == "adapter webhook"]
    helps = {a.dest: (a.option_strings, a.help or "") for a in webhook._actions}  # noqa: SLF001
    rows = []
    for dest, variable in adapter.ENV.items():
        options, text = helps[dest]
        text = re.sub(r"\s*\(" + variable + r"(, ([^)]*))?\)", r"; \2", text).rstrip("; ")
        if not text:
            raise Undocumented(f"adapter webhook --{dest} has no help")
        rows.append([code(variable), ", ".join(code(o) for o in options), text])
    return rows


def _script_environment(name: str) -> str:
    doc = ast.get_docstring(ast.parse((REPO / "scripts" / name).read_text())) or ""
    paragraph = next((p for p in doc.split("\n\n") if p.startswith("Environment:")), "")
    if not paragraph:
        raise Undocumented(f"scripts/{name}: its docstring has no 'Environment:' paragraph")
    return f"`scripts/{name}`: " + escape(" ".join(paragraph.split()[1:])) + "\n"
