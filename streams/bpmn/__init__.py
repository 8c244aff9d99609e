"""Wait definitions as BPMN 2.0 and back: the seed's shape, out for modellers, in from them.

Pure: definitions in, XML text out, and back; no Kafka, faust or web.

    to_bpmn(definition) -> str         BPMN 2.0 XML with diagram interchange (laid out)
    from_bpmn(text, source=...) -> dict    the definition in the YAML format of
                                       topology/waits (check it with
                                       streams.definitions.definition_from_mapping)
    shape(definition) -> Graph         the nodes, flows and roles (for the console's counts)

Refusals are `BpmnError`s naming the node that breaks the pattern.
"""

from __future__ import annotations

from streams.bpmn.errors import BpmnError
from streams.bpmn.graph import Graph
from streams.bpmn.layout import lay_out
from streams.bpmn.reader import read
from streams.bpmn.shape import build
from streams.bpmn.writer import to_xml
from streams.core.definition import WaitDefinition

__all__ = ["BpmnError", "Graph", "from_bpmn", "shape", "to_bpmn"]


def shape(definition: WaitDefinition) -> Graph:
    return build(definition)


def to_bpmn(definition: WaitDefinition) -> str:
    graph = build(definition)
    return to_xml(graph, lay_out(graph))


def from_bpmn(text: str | bytes, *, source: str = "(bpmn)") -> dict[str, object]:
    from streams.bpmn.interpret import interpret

    return interpret(read(text, source=source))
