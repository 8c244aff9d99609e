"""Every shipped definition goes out as BPMN that a real BPMN parser takes, and comes back equal."""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from streams.bpmn import from_bpmn, shape, to_bpmn
from streams.bpmn.layout import lay_out
from streams.cli.bpmn import definition_yaml
from streams.core.definition import WaitDefinition
from streams.definitions import load_definition
from tests.bpmn.conftest import reloaded, same, shipped, spiff_parse

BPMN = "{http://www.omg.org/spec/BPMN/20100524/MODEL}"
DEFINITIONS = shipped()
SEED_IDS = {"start", "compose", "send_request", "wait", "reply_received", "reminder_timer",
            "send_reminder", "sla_deadline", "validate", "valid_gate", "review_reply",
            "run_escalation", "end_received", "end_escalated"}


def by_name(name: str) -> WaitDefinition:
    return next(d for d in DEFINITIONS if d.name == name)


@pytest.mark.parametrize("definition", DEFINITIONS, ids=lambda d: d.name)
def test_a_shipped_definition_exported_and_imported_is_the_same_definition(
        definition: WaitDefinition, tmp_path: Path) -> None:
    xml = to_bpmn(definition)
    raw = from_bpmn(xml, source=f"{definition.name}.bpmn")
    assert same(reloaded(raw, definition.name), definition)
    # And the YAML the import writes loads, as a worker would, to the same definition.
    path = tmp_path / f"{definition.name}.yaml"
    path.write_text(definition_yaml(raw, "a test"))
    assert same(load_definition(path), definition)


@pytest.mark.parametrize("definition", DEFINITIONS, ids=lambda d: d.name)
def test_the_exported_xml_passes_the_bpmn_schema_and_spiffworkflows_parser(
        definition: WaitDefinition) -> None:
    xml = to_bpmn(definition)
    parser = spiff_parse(xml)
    process = shape(definition).process_id
    assert parser.get_process_ids() == [process]
    spec = parser.get_spec(process)
    names = set(spec.task_specs)
    assert {"start", "end_received", "end_escalated"} <= names


@pytest.mark.parametrize("definition", DEFINITIONS, ids=lambda d: d.name)
def test_every_node_and_flow_is_drawn_and_no_flow_crosses_a_shape(
        definition: WaitDefinition) -> None:
    graph = shape(definition)
    layout = lay_out(graph)
    assert set(layout.shapes) == set(graph.nodes)
    assert set(layout.edges) == {f.id for f in graph.flows}
    boxes = list(layout.shapes.values())
    for a, b in itertools.combinations(boxes, 2):
        assert a.x + a.w <= b.x or b.x + b.w <= a.x or a.y + a.h <= b.y or b.y + b.h <= a.y
    for flow in graph.flows:
        points = layout.edges[flow.id]
        for (x0, y0), (x1, y1) in itertools.pairwise(points):
            assert x0 == x1 or y0 == y1, f"{flow.id} has a slanted stretch"
        inner = points[1:-1] if len(points) > 2 else []
        for node_id, box in layout.shapes.items():
            if node_id in (flow.source, flow.target):
                continue
            for (x0, y0), (x1, y1) in itertools.pairwise(points):
                lo_x, hi_x, lo_y, hi_y = min(x0, x1), max(x0, x1), min(y0, y1), max(y0, y1)
                crosses = lo_x < box.x + box.w and hi_x > box.x and \
                    lo_y < box.y + box.h and hi_y > box.y
                assert not crosses, f"{flow.id} crosses {node_id} ({inner})"


def test_expense_approval_uses_the_seeds_node_ids_and_iso_timers() -> None:
    root = ET.fromstring(to_bpmn(by_name("expense-approval")))  # noqa: S314 - our own output
    process = root.find(f"{BPMN}process")
    assert process is not None
    kinds = {el.get("id"): el.tag.removeprefix(BPMN) for el in process if el.get("id")}
    assert SEED_IDS <= set(kinds)
    assert kinds["wait"] == "eventBasedGateway"
    assert kinds["valid_gate"] == "exclusiveGateway"
    assert kinds["review_reply"] == "userTask"
    assert kinds["send_request"] == kinds["send_reminder"] == "sendTask"
    timers = {el.get("id"): (child.tag.removeprefix(BPMN), child.text)
              for el in process for d in el.findall(f"{BPMN}timerEventDefinition")
              for child in d}
    assert timers["reminder_timer"] == ("timeCycle", "R2/P1D")
    assert timers["sla_deadline"] == ("timeDuration", "P3D")
    assert timers["escalation_1_deadline"] == ("timeDuration", "PT12H")
    # The seed's conditions on the validity gateway: Valid, and Invalid by default.
    flows = {f.get("id"): f for f in process.findall(f"{BPMN}sequenceFlow")}
    valid = flows["flow_valid_gate_to_end_received"]
    assert valid.get("name") == "Valid"
    condition = valid.find(f"{BPMN}conditionExpression")
    assert condition is not None and condition.text == "=vars.responseValid == true"
    gate = process.find(f"{BPMN}exclusiveGateway[@id='valid_gate']")
    assert gate is not None and gate.get("default") == "flow_valid_gate_to_review_reply"


def test_the_variants_nodes_are_drawn() -> None:
    quote = shape(by_name("vendor-quote")).nodes
    assert {"reply_received_email", "reply_received_webhook", "reply_received_portal"} <= \
        set(quote)
    assert {quote[i].message for i in quote if i.startswith("reply_received_")} == \
        {"email", "webhook", "portal"}
    fv = shape(by_name("first-valid")).nodes
    assert fv["fan_out"].kind == fv["join"].kind == "parallelGateway"
    assert {"send_request_carrier-a", "send_request_carrier-b", "close_out"} <= set(fv)
    probe = shape(by_name("probe")).nodes
    assert probe["poll_timer"].timer == ("timeDuration", "PT5M")
    assert probe["deadline_gate"].attrs["deadline"] == "PT2H"
    assert "wait" not in probe  # no event to catch, so no event-based gateway
    chained = shape(by_name("two-stage-approval")).nodes
    assert {"manager_wait", "finance_wait", "manager_run_escalation",
            "finance_escalation_1_wait"} <= set(chained)


def test_the_xwait_settings_bpmn_cannot_say_travel_in_extension_elements() -> None:
    xml = to_bpmn(by_name("expense-approval"))
    root = ET.fromstring(xml)  # noqa: S314 - our own output
    found = root.find(f"{BPMN}process/{BPMN}extensionElements/{{urn:xwait:bpmn:1}}definition")
    assert found is not None
    assert found.attrib == {"variant": "single-channel", "invalidReply": "review",
                            "earlyReplyTtl": "PT10M", "retention": "P7D"}
    schema = found.find("{urn:xwait:bpmn:1}responseSchema")
    assert schema is not None and yaml.safe_load(schema.text or "")["required"] == ["decision"]
