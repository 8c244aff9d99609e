"""Shared helpers for the BPMN tests: every shipped definition, and checks on exported XML."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from lxml import etree
from SpiffWorkflow.bpmn.parser import BpmnParser, BpmnValidator

from streams.config import REPO_ROOT
from streams.core.definition import WaitDefinition
from streams.definitions import definition_from_mapping, load_definitions

SHIPPED_FOLDERS = (REPO_ROOT / "topology" / "waits", REPO_ROOT / "tests" / "e2e" / "waits")


def shipped() -> list[WaitDefinition]:
    found: list[WaitDefinition] = []
    for folder in SHIPPED_FOLDERS:
        found.extend(load_definitions(folder).values())
    return found


def same(a: WaitDefinition, b: WaitDefinition) -> bool:
    """Equal as definitions: where each was read from does not count."""
    return replace(a, source="") == replace(b, source="")


def reloaded(raw: dict[str, object], name: str) -> WaitDefinition:
    return definition_from_mapping(raw, file=f"{name}.bpmn", default_name=name)


def spiff_parse(xml: str, where: Path | str = "exported.bpmn") -> BpmnParser:
    """SpiffWorkflow's parser, validating against the BPMN 2.0 XML schema first."""
    parser = BpmnParser(validator=BpmnValidator())
    parser.add_bpmn_xml(etree.fromstring(xml.encode()), filename=str(where))
    return parser
