"""Hypothesis: any definition the loader accepts goes out as BPMN and comes back the same."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams.bpmn import from_bpmn, shape, to_bpmn
from streams.bpmn.layout import lay_out
from streams.bpmn.shape import iso_duration
from streams.definitions import definition_from_mapping
from tests.bpmn.conftest import reloaded, same, spiff_parse

# Names as people write them, awkward ones included (spaces, accents, digits first,
# id-like clashes); control characters are refused by the loader's YAML anyway.
NAME_CHARS = st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="~")
names = st.one_of(
    st.sampled_from(["manager", "finance", "email", "portal", "director", "a_b", "a-b",
                     "manager_escalation_1", "flow", "start", "2nd", "Ünïcode", "two words"]),
    st.text(NAME_CHARS, min_size=1, max_size=10),
).filter(lambda s: bool(s.strip()))
durations = st.integers(1, 30 * 86_400).map(lambda s: iso_duration(s * 1000))
reminders = st.none() | st.fixed_dictionaries({"every": durations,
                                                "limit": st.integers(1, 4)})
levels = st.lists(st.fixed_dictionaries({"target": names, "deadline": durations}), max_size=3)
schemas = st.sampled_from([None, {"type": "object"},
                           {"type": "object", "required": ["decision"],
                            "properties": {"decision": {"enum": ["yes", "no"]}}}])


@st.composite
def definitions(draw: st.DrawFn) -> dict[str, Any]:
    variant = draw(st.sampled_from(["single-channel", "multi-channel", "first-valid",
                                    "probe", "chained"]))
    lo, hi = {"single-channel": (0, 1), "multi-channel": (2, 4)}.get(variant, (0, 3))
    raw: dict[str, Any] = {
        "name": draw(names), "variant": variant,
        "channels": draw(st.lists(names, min_size=lo, max_size=hi, unique=True)),
        "invalid_reply": draw(st.sampled_from(["review", "escalate"])),
    }
    if variant == "first-valid":
        raw["parties"] = draw(st.lists(names, max_size=3, unique=True))
    if variant == "probe":
        raw["poll"] = draw(durations)
    if variant == "chained":
        stage_names = draw(st.lists(names, min_size=2, max_size=3, unique=True))
        raw["stages"] = []
        for name in stage_names:
            stage: dict[str, Any] = {"name": name, "deadline": draw(durations),
                                     "escalation": draw(levels)}
            party = draw(st.none() | names)
            if party is not None:
                stage["party"] = party
            reminder = draw(reminders)
            if reminder is not None:
                stage["reminder"] = reminder
            raw["stages"].append(stage)
    else:
        raw["deadline"] = draw(durations)
        raw["escalation"] = draw(levels)
        reminder = draw(reminders)
        if reminder is not None:
            raw["reminder"] = reminder
    for field in ("early_reply_ttl", "retention"):
        if draw(st.booleans()):
            raw[field] = draw(durations)
    schema = draw(schemas)
    if schema is not None:
        raw["response_schema"] = schema
    return raw


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(definitions())
def test_any_accepted_definition_round_trips_through_bpmn(raw: dict[str, Any]) -> None:
    d = definition_from_mapping(raw, file="generated.yaml", default_name="generated")
    xml = to_bpmn(d)
    assert same(reloaded(from_bpmn(xml, source="generated.bpmn"), d.name), d)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(definitions())
def test_any_export_passes_the_bpmn_schema_and_no_flow_crosses_a_shape(
        raw: dict[str, Any]) -> None:
    d = definition_from_mapping(raw, file="generated.yaml", default_name="generated")
    spiff_parse(to_bpmn(d))
    graph = shape(d)
    layout = lay_out(graph)
    for flow in graph.flows:
        for node_id, box in layout.shapes.items():
            if node_id in (flow.source, flow.target):
                continue
            for (x0, y0), (x1, y1) in itertools.pairwise(layout.edges[flow.id]):
                assert not (min(x0, x1) < box.x + box.w and max(x0, x1) > box.x
                            and min(y0, y1) < box.y + box.h and max(y0, y1) > box.y), \
                    f"{flow.id} crosses {node_id}"
