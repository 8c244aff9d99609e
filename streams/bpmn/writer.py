"""The graph as BPMN 2.0 XML, with diagram interchange (BPMNDI) for every node and flow.

Elements come in the order the BPMN 2.0 schema asks for (extension
elements first, then incoming/outgoing, then event definitions or loop
characteristics), so a validating parser takes the file as it is.  What
BPMN has no place for goes under the xwait namespace: the process's
`xwait:definition` (variant, invalid-reply route, early-reply TTL,
retention and `xwait:responseSchema`) and a few attributes on nodes
(`xwait:target` of an escalation, `xwait:party`, `xwait:stage`, a probe's
`xwait:deadline` and `xwait:reminder`).  bpmn-js and Camunda Modeler keep
foreign attributes and extension elements when they save a file.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET  # noqa: S405 - writing only; reading uses defusedxml
from importlib import metadata

from streams.bpmn.graph import Graph, Node
from streams.bpmn.layout import Bounds, Layout

__all__ = ["NS", "to_xml"]

NS = {
    "bpmn": "http://www.omg.org/spec/BPMN/20100524/MODEL",
    "bpmndi": "http://www.omg.org/spec/BPMN/20100524/DI",
    "dc": "http://www.omg.org/spec/DD/20100524/DC",
    "di": "http://www.omg.org/spec/DD/20100524/DI",
    "xsi": "http://www.w3.org/2001/XMLSchema-instance",
    "xwait": "urn:xwait:bpmn:1",
}
for _prefix, _uri in NS.items():
    ET.register_namespace(_prefix, _uri)


def q(prefix: str, local: str) -> str:
    return f"{{{NS[prefix]}}}{local}"


def _version() -> str:
    try:
        return metadata.version("xwait")
    except metadata.PackageNotFoundError:  # pragma: no cover - a bare source tree
        return "unknown"


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:.1f}"


def _bounds(parent: ET.Element, b: Bounds) -> None:
    ET.SubElement(parent, q("dc", "Bounds"), x=_num(b.x), y=_num(b.y), width=_num(b.w),
                  height=_num(b.h))


def _message_ids(g: Graph) -> dict[str, str]:
    """Message name -> id, one message per distinct name (a channel is one message)."""
    ids: dict[str, str] = {}
    for node in g.nodes.values():
        if node.message and node.message not in ids:
            ids[node.message] = f"message_{len(ids) + 1}"
    return ids


def _expression(parent: ET.Element, tag: str, text: str) -> None:
    el = ET.SubElement(parent, q("bpmn", tag))
    el.set(q("xsi", "type"), "bpmn:tFormalExpression")
    el.text = text


def _node(process: ET.Element, g: Graph, node: Node, messages: dict[str, str]) -> None:
    el = ET.SubElement(process, q("bpmn", node.kind), id=node.id)
    if node.name:
        el.set("name", node.name)
    if node.default:
        el.set("default", node.default)
    for name, value in sorted(node.attrs.items()):
        el.set(q("xwait", name), value)
    for flow in g.incoming(node.id):
        ET.SubElement(el, q("bpmn", "incoming")).text = flow.id
    for flow in g.outgoing(node.id):
        ET.SubElement(el, q("bpmn", "outgoing")).text = flow.id
    if node.multi_instance:
        ET.SubElement(el, q("bpmn", "multiInstanceLoopCharacteristics"))
    if node.message is not None:
        definition = ET.SubElement(el, q("bpmn", "messageEventDefinition"),
                                   id=f"{node.id}_message")
        if node.message:
            definition.set("messageRef", messages[node.message])
    if node.timer is not None:
        definition = ET.SubElement(el, q("bpmn", "timerEventDefinition"), id=f"{node.id}_timer")
        _expression(definition, node.timer[0], node.timer[1])


def to_xml(g: Graph, layout: Layout) -> str:
    root = ET.Element(q("bpmn", "definitions"), {
        "id": f"definitions_{g.process_id}",
        "targetNamespace": "urn:xwait:definitions",
        "exporter": "xwait",
        "exporterVersion": _version(),
    })
    messages = _message_ids(g)
    for name, mid in messages.items():
        ET.SubElement(root, q("bpmn", "message"), id=mid, name=name)
    process = ET.SubElement(root, q("bpmn", "process"), id=g.process_id, name=g.name,
                            isExecutable="true")
    ext = ET.SubElement(process, q("bpmn", "extensionElements"))
    settings = ET.SubElement(ext, q("xwait", "definition"), g.settings)
    if g.response_schema is not None:
        ET.SubElement(settings, q("xwait", "responseSchema")).text = g.response_schema
    for node in g.nodes.values():
        _node(process, g, node, messages)
    for flow in g.flows:
        el = ET.SubElement(process, q("bpmn", "sequenceFlow"), id=flow.id,
                           sourceRef=flow.source, targetRef=flow.target)
        if flow.name:
            el.set("name", flow.name)
        if flow.condition is not None:
            _expression(el, "conditionExpression", flow.condition)
    diagram = ET.SubElement(root, q("bpmndi", "BPMNDiagram"), id=f"diagram_{g.process_id}")
    plane = ET.SubElement(diagram, q("bpmndi", "BPMNPlane"), id=f"plane_{g.process_id}",
                          bpmnElement=g.process_id)
    for node in g.nodes.values():
        shape = ET.SubElement(plane, q("bpmndi", "BPMNShape"), id=f"{node.id}_di",
                              bpmnElement=node.id)
        if node.kind == "exclusiveGateway":
            shape.set("isMarkerVisible", "true")
        _bounds(shape, layout.shapes[node.id])
        if node.id in layout.labels:
            _bounds(ET.SubElement(shape, q("bpmndi", "BPMNLabel")), layout.labels[node.id])
    for flow in g.flows:
        edge = ET.SubElement(plane, q("bpmndi", "BPMNEdge"), id=f"{flow.id}_di",
                             bpmnElement=flow.id)
        for x, y in layout.edges[flow.id]:
            ET.SubElement(edge, q("di", "waypoint"), x=_num(x), y=_num(y))
        if flow.id in layout.edge_labels:
            _bounds(ET.SubElement(edge, q("bpmndi", "BPMNLabel")), layout.edge_labels[flow.id])
    ET.indent(root, space="  ")
    body = ET.tostring(root, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"
