"""The import refuses shapes that break the pattern, naming the node; modellers' ids are fine."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from streams.bpmn import BpmnError, from_bpmn, shape
from streams.bpmn.graph import Flow, Graph, Node
from streams.bpmn.layout import lay_out
from streams.bpmn.writer import to_xml
from tests.bpmn.conftest import reloaded, same, shipped

DEFINITIONS = {d.name: d for d in shipped()}


def xml_of(name: str, change: Callable[[Graph], None] | None = None) -> str:
    graph = shape(DEFINITIONS[name])
    if change is not None:
        change(graph)
    return to_xml(graph, lay_out(graph))


def refused(xml: str | bytes) -> BpmnError:
    with pytest.raises(BpmnError) as caught:
        from_bpmn(xml, source="model.bpmn")
    return caught.value


def refused_at(node: str, xml: str | bytes, *says: str) -> None:
    """The import refuses `xml`, naming `node`, with each of `says` in its message."""
    err = refused(xml)
    assert err.node == node
    for text in says:
        assert text in str(err)


def drop(g: Graph, *node_ids: str) -> None:
    for node_id in node_ids:
        del g.nodes[node_id]
    g.flows = [f for f in g.flows if f.source in g.nodes and f.target in g.nodes]


def retarget(g: Graph, source: str, old: str, new: str) -> None:
    for i, f in enumerate(g.flows):
        if f.source == source and f.target == old:
            g.flows[i] = Flow(f.id, source, new, f.name, f.condition)


def test_a_gateway_branch_that_is_not_a_catch_event_is_refused_by_name() -> None:
    def task(g: Graph) -> None:
        g.nodes["reply_received"].kind = "serviceTask"
        g.nodes["reply_received"].message = None

    refused_at("reply_received", xml_of("expense-approval", task),
               "branch of the event-based gateway 'wait'", "must be a catch event")


def test_a_probe_loop_without_a_deadline_gate_is_refused_at_its_readiness_gateway() -> None:
    def no_gate(g: Graph) -> None:
        drop(g, "deadline_gate", "run_escalation", "end_escalated")
        g.flows.append(Flow("flow_not_yet", "ready_gate", "poll_timer", "Not yet"))
        g.nodes["ready_gate"].default = "flow_not_yet"

    refused_at("ready_gate", xml_of("probe", no_gate), "without a deadline gate", "never ends")


def test_an_exit_without_a_name_is_refused() -> None:
    def unnamed(g: Graph) -> None:
        g.nodes["end_escalated"].name = ""

    refused_at("end_escalated", xml_of("expense-approval", unnamed), "has no name", "both exits")


def test_one_end_event_for_both_exits_is_refused() -> None:
    def merged(g: Graph) -> None:
        for f in [f for f in g.flows if f.target == "end_escalated"]:
            retarget(g, f.source, "end_escalated", "end_received")
        drop(g, "end_escalated")

    refused_at("end_received", xml_of("race", merged), "ends both received and escalated waits")


def test_a_wait_without_a_deadline_is_refused_at_its_gateway() -> None:
    refused_at("wait", xml_of("race", lambda g: drop(g, "sla_deadline", "run_escalation",
                                                     "end_escalated")), "has no deadline")


def test_a_deadline_that_ends_without_running_the_escalation_is_refused() -> None:
    def straight(g: Graph) -> None:
        retarget(g, "sla_deadline", "run_escalation", "end_escalated")
        drop(g, "run_escalation")

    refused_at("sla_deadline", xml_of("race", straight), "without running the escalation")


@pytest.mark.parametrize(("node", "timer", "expected"), [
    ("reminder_timer", ("timeDuration", "P1D"), "must be a timeCycle"),
    ("sla_deadline", ("timeCycle", "R2/P1D"), "must be a timeDuration"),
    ("sla_deadline", ("timeDuration", "three days"), "ISO 8601"),
    ("reminder_timer", ("timeCycle", "every day"), "reminder cycle"),
])
def test_timers_of_the_wrong_form_or_text_are_refused_by_name(
        node: str, timer: tuple[str, str], expected: str) -> None:
    def change(g: Graph) -> None:
        g.nodes[node].timer = timer

    refused_at(node, xml_of("expense-approval", change), expected)


def test_invalid_replies_routed_anywhere_but_review_or_escalation_are_refused() -> None:
    def elsewhere(g: Graph) -> None:
        g.add(Node("notify", "serviceTask", "Notify someone"))
        g.flows.append(Flow("flow_notify_end", "notify", "end_received"))
        retarget(g, "valid_gate", "review_reply", "notify")
        drop(g, "review_reply")

    refused_at("valid_gate", xml_of("slow-approval", elsewhere), "'notify'")


def test_a_node_off_every_path_is_refused() -> None:
    def forgotten(g: Graph) -> None:
        g.add(Node("Task_0x1", "task", "Forgotten"))

    refused_at("Task_0x1", xml_of("race", forgotten), "not on any path")


def test_a_reply_branch_catching_a_signal_is_refused() -> None:
    xml = xml_of("race")
    start = xml.index('<bpmn:messageEventDefinition id="reply_received_message"')
    end = xml.index("/>", start) + 2
    refused_at("reply_received",
               xml[:start] + '<bpmn:signalEventDefinition id="sig" />' + xml[end:],
               "signalEventDefinition")


def test_a_diagram_that_says_another_variant_than_its_shape_is_refused() -> None:
    err = refused(xml_of("race", lambda g: g.settings.update(variant="probe")))
    assert "shape of a single-channel wait" in str(err) and 'variant="probe"' in str(err)


@pytest.mark.parametrize(("text", "expected"), [
    (b"not xml at all", "does not parse"),
    (b"<html><body/></html>", "Expected a BPMN 2.0 file"),
    (b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "aaaa">]>'
     b'<d xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL">&a;</d>', "does not parse"),
    (b'<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL"/>',
     "exactly one process"),
])
def test_files_that_are_not_one_bpmn_process_are_refused(text: bytes, expected: str) -> None:
    assert expected in str(refused(text))


def test_a_modellers_ids_do_not_matter_only_the_shape_does() -> None:
    """Camunda Modeler names elements Gateway_0x1abc: the import reads types and flows."""
    def foreign(g: Graph) -> None:
        rename = {old: f"Element_{i:04d}" for i, old in enumerate(g.nodes)}
        g.nodes = {rename[k]: n for k, n in g.nodes.items()}
        for n in g.nodes.values():
            n.id = rename.get(n.id, n.id)
        flows = []
        defaults = {n.default: n for n in g.nodes.values() if n.default}
        for i, f in enumerate(g.flows):
            flow = Flow(f"Flow_{i:04d}", rename[f.source], rename[f.target], f.name,
                        f.condition)
            if f.id in defaults:
                defaults[f.id].default = flow.id
            flows.append(flow)
        g.flows = flows

    for name in ("expense-approval", "vendor-quote", "two-stage-approval", "probe",
                 "first-valid"):
        raw = from_bpmn(xml_of(name, foreign), source="model.bpmn")
        assert same(reloaded(raw, name), DEFINITIONS[name]), name


def test_a_diagram_without_xwait_settings_imports_with_the_defaults() -> None:
    def plain(g: Graph) -> None:
        g.settings = {}
        g.response_schema = None

    raw = from_bpmn(xml_of("slow-approval", plain), source="model.bpmn")
    d = reloaded(raw, "slow-approval")
    assert d.response_schema is None and d.invalid_reply.value == "review"
    assert d.stages == DEFINITIONS["slow-approval"].stages
