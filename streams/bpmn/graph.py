"""A BPMN process as the exporter builds it and the importer reads it: nodes and flows.

Only what the external wait needs is kept: the element's local tag
(`serviceTask`, `eventBasedGateway`, ...), its name, its event definition
(message name or timer text), the `xwait:*` attributes and, for the export,
its cell in the layout grid.  Both directions go through this one model, so
the writer and the reader agree on what an element carries.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Flow", "Graph", "Node", "TimerKind"]

# The timer event definition's three forms (BPMN 2.0 tTimerEventDefinition).
TimerKind = str  # "timeDuration" | "timeCycle" | "timeDate"


@dataclass(slots=True)
class Node:
    """One flow node.

    ``message`` is None for an element without a message event definition;
    "" for one whose message has no name (a reply on any channel).
    ``event`` names any other event definition found on import (a signal, an
    error...), which the pattern refuses.
    """

    id: str
    kind: str
    name: str = ""
    message: str | None = None
    timer: tuple[TimerKind, str] | None = None
    event: str | None = None
    attrs: dict[str, str] = field(default_factory=dict)  # xwait:* attributes, by local name
    multi_instance: bool = False
    default: str | None = None  # a gateway's default flow id
    cell: tuple[int, int] = (0, 0)  # (column, row) in the export's layout grid

    @property
    def label(self) -> str:
        """How refusals name the node: its id, and its name when it has one."""
        return f"'{self.id}' ({self.kind} '{self.name}')" if self.name else \
            f"'{self.id}' ({self.kind})"


@dataclass(frozen=True, slots=True)
class Flow:
    id: str
    source: str
    target: str
    name: str = ""
    condition: str | None = None


@dataclass(slots=True)
class Graph:
    """One process: its nodes in document order, its flows, and the xwait settings."""

    process_id: str
    name: str
    nodes: dict[str, Node] = field(default_factory=dict)
    flows: list[Flow] = field(default_factory=list)
    # The process's xwait:definition attributes (variant, invalidReply, ...).
    settings: dict[str, str] = field(default_factory=dict)
    response_schema: str | None = None  # JSON text of xwait:responseSchema
    # Semantic role -> node id, filled by the exporter for the console's counts:
    # ("wait", stage, level), ("reminder", stage), ("escalation", stage, level), ...
    roles: dict[tuple[object, ...], str] = field(default_factory=dict)

    def add(self, node: Node) -> Node:
        if node.id in self.nodes:
            raise ValueError(f"duplicate node id {node.id!r}")
        self.nodes[node.id] = node
        return node

    def connect(self, source: str, target: str, name: str = "",
                condition: str | None = None, default: bool = False) -> Flow:
        flow = Flow(f"flow_{source}_to_{target}", source, target, name, condition)
        if any(f.id == flow.id for f in self.flows):
            raise ValueError(f"duplicate flow {flow.id!r}")
        self.flows.append(flow)
        if default:
            self.nodes[source].default = flow.id
        return flow

    def outgoing(self, node_id: str) -> list[Flow]:
        return [f for f in self.flows if f.source == node_id]

    def incoming(self, node_id: str) -> list[Flow]:
        return [f for f in self.flows if f.target == node_id]
