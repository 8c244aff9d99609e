"""`xwait definitions export NAME --bpmn` and `xwait definitions import FILE.bpmn`.

Export draws a definition of topology/waits (or a YAML file given by path) as
BPMN 2.0 with its diagram; import reads a modelled external wait back into
the YAML of topology/waits, with every check the worker makes at start-up.
Both write to stdout unless `-o FILE` is given.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from streams.bpmn import BpmnError, from_bpmn, to_bpmn
from streams.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE, fail_with
from streams.config import Settings
from streams.core.definition import WaitDefinition
from streams.core.errors import DefinitionError
from streams.definitions import definition_from_mapping, load_definition, load_definitions


def _find(name: str, settings: Settings) -> WaitDefinition:
    """A definition by name from the topology, or from a YAML file given by its path."""
    path = Path(name)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        return load_definition(path)
    found = load_definitions(settings.topology / "waits")
    if name not in found:
        raise DefinitionError(str(settings.topology / "waits"), "name",
                              f"one of {sorted(found)} (or the path of a .yaml file)",
                              f"there is no definition {name!r}")
    return found[name]


def _write(text: str, output: Path | None) -> None:
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text, encoding="utf-8")
        print(f"xwait: wrote {output}", file=sys.stderr)


def run_export(args: argparse.Namespace, settings: Settings) -> int:
    try:
        definition = _find(args.name, settings)
    except DefinitionError as exc:
        return fail_with(EXIT_USAGE, f"xwait: {exc}")
    try:
        text = to_bpmn(definition) if args.bpmn else definition_yaml(
            _mapping(definition), f"exported from {definition.source}")
    except BpmnError as exc:
        return fail_with(EXIT_FAILED, f"xwait: {exc}")
    _write(text, args.output)
    return EXIT_OK


def run_import(args: argparse.Namespace, settings: Settings) -> int:
    source = str(args.file)
    try:
        raw = from_bpmn(args.file.read_bytes(), source=source)
    except OSError as exc:
        return fail_with(EXIT_USAGE, f"xwait: cannot read {source}: {exc}")
    except BpmnError as exc:
        return fail_with(EXIT_FAILED, f"xwait: refused: {exc}")
    if args.name:
        raw["name"] = args.name
    try:
        definition_from_mapping(raw, file=source, default_name=args.file.stem)
    except DefinitionError as exc:
        return fail_with(EXIT_FAILED, f"xwait: refused: {exc}")
    _write(definition_yaml(raw, f"imported from {args.file.name}"), args.output)
    return EXIT_OK


def _mapping(d: WaitDefinition) -> dict[str, object]:
    """A loaded definition as the YAML mapping it can be read back from (via BPMN's reader:
    one way of writing a definition down, whichever way it came in)."""
    return from_bpmn(to_bpmn(d), source=d.source)


def definition_yaml(raw: dict[str, object], origin: str) -> str:
    """The YAML of topology/waits, fields in the order of the shipped files."""
    body = yaml.safe_dump(raw, sort_keys=False, allow_unicode=True, default_flow_style=None,
                          width=100)
    return f"# {raw.get('name')}: {origin} by `xwait definitions`.\n{body}"
