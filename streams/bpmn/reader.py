"""BPMN 2.0 XML into the graph model: the one process, its nodes and flows, xwait's settings.

The file may come from anywhere (Camunda Modeler, bpmn.io, another tool), so
it is parsed with defusedxml: no DTDs, no entities, no network.  Diagram
interchange is ignored on the way in; the shape is read from the process.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET  # noqa: S405 - types only; parsing goes through defusedxml

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring

from streams.bpmn.errors import BpmnError
from streams.bpmn.graph import Flow, Graph, Node
from streams.bpmn.writer import NS

__all__ = ["read"]

MODEL = NS["bpmn"]
XWAIT = NS["xwait"]
# Elements of a process that are not part of its flow: they are skipped.
_ARTIFACTS = frozenset({"laneSet", "textAnnotation", "association", "dataObject",
                        "dataObjectReference", "dataStoreReference", "group", "documentation",
                        "property", "ioSpecification"})
_TIMER_FORMS = ("timeDuration", "timeCycle", "timeDate")


def _local(tag: str) -> tuple[str, str]:
    """'{ns}local' -> (ns, local)."""
    if tag.startswith("{"):
        ns, _, local = tag[1:].partition("}")
        return ns, local
    return "", tag


def _text(el: ET.Element | None) -> str:
    return " ".join((el.text or "").split()) if el is not None else ""


def _name(el: ET.Element) -> str:
    return " ".join(el.get("name", "").split())


def read(text: str | bytes, *, source: str) -> Graph:
    try:
        root = fromstring(text)
    except (ET.ParseError, DefusedXmlException, ValueError) as exc:
        raise BpmnError(source, f"Expected a BPMN 2.0 XML file, but it does not parse: {exc}"
                        ) from exc
    if _local(root.tag) != (MODEL, "definitions"):
        raise BpmnError(source, "Expected a BPMN 2.0 file (a <definitions> element of "
                                f"namespace {MODEL}), but the document is <{root.tag}>")
    # Message names are channels: kept exactly as written.
    messages = {m.get("id", ""): m.get("name", "") for m in root.iter(f"{{{MODEL}}}message")}
    processes = [p for p in root.findall(f"{{{MODEL}}}process")
                 if any(_local(c.tag)[1] not in _ARTIFACTS | {"extensionElements"}
                        for c in p)]
    if len(processes) != 1:
        found = ", ".join(repr(p.get("id")) for p in processes) or "none"
        raise BpmnError(source, "Expected exactly one process holding the wait, but found "
                                f"{len(processes)} ({found})")
    process = processes[0]
    g = Graph(process.get("id", ""), process.get("name") or process.get("id") or "")
    for child in process:
        ns, kind = _local(child.tag)
        if ns != MODEL or kind in _ARTIFACTS:
            continue
        if kind == "extensionElements":
            _settings(g, child)
        elif kind == "sequenceFlow":
            g.flows.append(Flow(child.get("id", ""), child.get("sourceRef", ""),
                                child.get("targetRef", ""), _name(child),
                                _text(child.find(f"{{{MODEL}}}conditionExpression")) or None))
        else:
            node = _node(child, kind, messages)
            if node.id in g.nodes:
                raise BpmnError(source, f"Expected unique ids, but {node.id!r} is used twice",
                                node.id)
            g.nodes[node.id] = node
    for flow in g.flows:
        for end in (flow.source, flow.target):
            if end not in g.nodes:
                raise BpmnError(source, f"sequence flow '{flow.id}' refers to {end!r}, which is "
                                        "not a node of the process", flow.id)
    return g


def _settings(g: Graph, ext: ET.Element) -> None:
    found = ext.find(f"{{{XWAIT}}}definition")
    if found is None:
        return
    g.settings = {k: v for k, v in found.attrib.items() if not k.startswith("{")}
    schema = found.find(f"{{{XWAIT}}}responseSchema")
    if schema is not None:
        g.response_schema = schema.text or ""


def _node(el: ET.Element, kind: str, messages: dict[str, str]) -> Node:
    node = Node(el.get("id", ""), kind, _name(el), default=el.get("default"))
    for key, value in el.attrib.items():
        ns, local = _local(key)
        if ns == XWAIT:
            node.attrs[local] = value
    for child in el:
        ns, local = _local(child.tag)
        if ns != MODEL:
            continue
        if local == "messageEventDefinition":
            node.message = messages.get(child.get("messageRef", ""), "")
        elif local == "timerEventDefinition":
            for form in _TIMER_FORMS:
                found = child.find(f"{{{MODEL}}}{form}")
                if found is not None:
                    node.timer = (form, _text(found))
            if node.timer is None:
                node.timer = ("", "")
        elif local.endswith("EventDefinition"):
            node.event = local
        elif local == "multiInstanceLoopCharacteristics":
            node.multi_instance = True
    if kind == "receiveTask":
        node.message = messages.get(el.get("messageRef", ""), "")
    return node
