"""A wait definition drawn as the seed's BPMN shape: nodes, flows and grid cells.

The shape is the seed's single-channel base (`start`, `compose`,
`send_request`, `wait`, `reply_received`, `reminder_timer`, `send_reminder`,
`sla_deadline`, `validate`, `valid_gate`, `review_reply`, `run_escalation`,
`end_received`, `end_escalated`) with each variant's delta:

* multi-channel: one message catch event per channel on the gateway,
  `reply_received_<channel>`, all converging on `validate`;
* first-valid: `fan_out` (parallel gateway) to `send_request_<party>` per
  default party and `join`, or one multi-instance `send_request` when the
  request names its parties; `valid_gate`'s "not acceptable" flow returns
  to the gateway and an acceptable reply goes through `close_out`;
* probe: no gateway: `send_request` -> `poll_timer` -> `poll` ->
  `ready_gate`; "not yet" falls to `deadline_gate`, which loops back to the
  timer or escalates;
* chained: each stage is the base shape with its ids prefixed by the stage
  (`manager_wait`, `finance_sla_deadline`, ...); a stage's accepted reply
  leads to the next stage's `send_request`.

Escalation levels (rule 6, docs/rules.md) are drawn as the waits they are: the
deadline runs `run_escalation` (level 1; `run_escalation_2`, ... after it),
which opens `escalation_1_wait` with its own replies, validation and
deadline `escalation_1_deadline`; the last level's deadline ends the wait
(no further escalation is run, as in the core).  A definition without
levels runs the escalation once and ends, the seed's own flow.  Each wait
(stage and level) validates its own replies, so an invalid reply routed to
escalation goes where that wait's deadline goes.

The grid is laid out here, by hand, so the diagram reads like the seed's:
time runs left to right, the reminder loop sits above its gateway, replies
beside it, the deadline below, and each escalation level steps down and to
the right.  `streams.bpmn.layout` turns cells into pixels and routes flows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import timedelta

import isodate

from streams.bpmn.errors import BpmnError
from streams.bpmn.graph import Graph, Node
from streams.core.definition import InvalidReplyRoute, Stage, Variant, WaitDefinition

__all__ = ["build", "iso_duration", "process_id", "slugs"]

_SAFE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def _is_true(variable: str) -> str:
    """A gateway flow's condition (FEEL): the process variable `variable` is true."""
    return f"=vars.{variable} == true"


VALID = _is_true("responseValid")
ACCEPTABLE = _is_true("replyAcceptable")
READY = _is_true("resultReady")
DEADLINE_PASSED = _is_true("deadlinePassed")
REMINDER_DUE = _is_true("reminderDue")


def iso_duration(ms: int) -> str:
    """86_400_000 -> 'P1D': isodate writes what the loader's isodate reads back."""
    return str(isodate.duration_isoformat(timedelta(milliseconds=ms)))


def slugs(names: Sequence[str], fallback: str, *, plain: bool = False) -> list[str]:
    """Id parts for user-given names: the names themselves when they all make
    valid, distinct XML ids; otherwise (or when `plain`) `<fallback>1`,
    `<fallback>2`, ... (the names are kept in the elements' names and xwait
    attributes, which is what the import reads)."""
    if not plain and all(_SAFE.match(n) for n in names) and \
            len({n.lower() for n in names}) == len(names):
        return list(names)
    return [f"{fallback}{i + 1}" for i in range(len(names))]


def process_id(name: str, *, plain: bool = False) -> str:
    return name if _SAFE.match(name) and not plain else "wait_definition"


# Characters XML 1.0 cannot carry at all, even escaped.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


class _Builder:
    def __init__(self, d: WaitDefinition, plain: bool) -> None:
        self.d = d
        self.plain = plain
        self.g = Graph(process_id(d.name, plain=plain), d.name)
        self.channels = list(d.channels)
        self.channel_ids = slugs(self.channels, "channel", plain=plain)
        self.review = (d.invalid_reply is InvalidReplyRoute.REVIEW
                       and d.variant is not Variant.FIRST_VALID)
        # Per stage: the flows an accepted reply takes (source, name, condition).
        self.accepted: list[list[tuple[str, str, str | None]]] = []
        # Flows into end_escalated, made once it is placed: (source, name, condition, default).
        self.escalated: list[tuple[str, str, str | None, bool]] = []

    def node(self, id_: str, kind: str, name: str, cell: tuple[int, int], *,
             message: str | None = None, timer: tuple[str, str] | None = None,
             attrs: dict[str, str] | None = None, multi_instance: bool = False) -> str:
        self.g.add(Node(id_, kind, name, message=message, timer=timer, attrs=attrs or {},
                        multi_instance=multi_instance, cell=cell))
        return id_

    def free_col(self) -> int:
        return max(n.cell[0] for n in self.g.nodes.values()) + 1

    # -- the whole shape ---------------------------------------------------------
    def build(self) -> Graph:
        d, g = self.d, self.g
        g.settings = {
            "variant": d.variant.value,
            "invalidReply": d.invalid_reply.value,
            "earlyReplyTtl": iso_duration(d.early_reply_ttl_ms),
            "retention": iso_duration(d.retention_ms),
        }
        if d.on_send_failure is not None:  # what a failed send does (rule 12, docs/rules.md)
            policy = d.on_send_failure
            g.settings.update(sendFailure=policy.then.value, sendRetries=str(policy.retries),
                              sendBackoff=iso_duration(policy.backoff_ms))
        if d.response_schema is not None:
            g.response_schema = json.dumps(json.loads(d.response_schema), indent=2,
                                           sort_keys=True)
        self.node("start", "startEvent", "Wait requested", (0, 0), message="StartWait")
        self.node("compose", "serviceTask", "Compose request", (1, 0))
        g.connect("start", "compose")
        if d.variant is Variant.CHAINED:
            prev = "compose"
            ids = slugs([s.name for s in d.stages], "stage", plain=self.plain)
            for i, (stage, slug) in enumerate(zip(d.stages, ids, strict=True)):
                send = self.node(f"{slug}_send_request", "sendTask",
                                 f"Send request: {stage.name}", (self.free_col(), 0),
                                 attrs=_stage_attrs(stage))
                g.roles[("send_request", i)] = send
                for source, name, condition in self.accepted[-1] if i else ():
                    g.connect(source, send, name, condition)
                if not i:
                    g.connect(prev, send)
                self.stage(i, f"{slug}_", send)
        else:
            self.stage(0, "", self.requests())
        self.exits()
        return g

    def requests(self) -> str:
        """The request goes out: one send task, or first-valid's fan out; the last node."""
        d, g = self.d, self.g
        if d.variant is not Variant.FIRST_VALID or not d.parties:
            first_valid = d.variant is Variant.FIRST_VALID
            send = self.node("send_request", "sendTask",
                             "Send request to each party" if first_valid else "Send request",
                             (2, 0), multi_instance=first_valid)
            g.connect("compose", send)
            g.roles[("send_request", 0)] = send
            return send
        self.node("fan_out", "parallelGateway", "", (2, 0))
        g.connect("compose", "fan_out")
        self.node("join", "parallelGateway", "", (4, 0))
        party_ids = slugs(d.parties, "party", plain=self.plain)
        for i, (party, slug) in enumerate(zip(d.parties, party_ids, strict=True)):
            send = self.node(f"send_request_{slug}", "sendTask", f"Send request: {party}",
                             (3, i), attrs={"party": party})
            g.connect("fan_out", send)
            g.connect(send, "join")
            g.roles[("send_request", 0, party)] = send
        return "join"

    def stage(self, index: int, prefix: str, entry: str) -> None:
        """One stage: its first wait, then one wait per escalation level, stepping down."""
        g, stage = self.g, self.d.stages[index]
        levels = len(stage.escalation)
        accepted: list[tuple[str, str, str | None]] = []
        review = f"{prefix}review_reply"
        cell = (self.free_col(), 0)
        for level in range(levels + 1):
            lp = prefix if level == 0 else f"{prefix}escalation_{level}_"
            if self.d.variant is Variant.PROBE:
                gate, deadline = self.probe_wait(index, level, lp, entry, cell)
            else:
                gate, deadline = self.event_wait(index, level, lp, entry, cell)
            # Where the deadline (and an invalid reply routed to escalation) leads.
            col, row = g.nodes[deadline].cell
            # A probe's deadline gate leaves by its "Yes" branch.
            yes_name, yes_condition = (("Yes", DEADLINE_PASSED)
                                       if self.d.variant is Variant.PROBE else ("", None))
            if level < levels or levels == 0:
                target = stage.escalation[level].target if level < levels else None
                escalate = self.node(
                    f"{prefix}run_escalation" if level == 0
                    else f"{prefix}run_escalation_{level + 1}", "serviceTask",
                    f"Escalate to {target}" if target else "Run escalation", (col + 1, row),
                    attrs={"target": target} if target else None)
                g.roles[("escalation", index, level + 1)] = escalate
                g.connect(deadline, escalate, yes_name, yes_condition)
                if target is None:
                    self.escalated.append((escalate, "", None, False))
                entry, cell = escalate, (col + 2, row)
            else:
                escalate = ""
                self.escalated.append((deadline, yes_name, yes_condition, False))
            valid_gate = f"{lp}valid_gate"
            if self.d.variant is Variant.FIRST_VALID:
                accepted.append((valid_gate, "Acceptable", ACCEPTABLE))
                g.connect(valid_gate, gate, "Not acceptable", default=True)
                continue
            accepted.append((valid_gate, "Valid", VALID))
            if self.review:
                if review not in g.nodes:
                    vg_col, vg_row = g.nodes[valid_gate].cell
                    self.node(review, "userTask", "Review reply", (vg_col + 1, vg_row - 1))
                    g.roles[("review", index)] = review
                g.connect(valid_gate, review, "Invalid", default=True)
            elif escalate:
                g.connect(valid_gate, escalate, "Invalid", default=True)
            else:
                self.escalated.append((valid_gate, "Invalid", None, True))
        if self.review:
            accepted.append((review, "", None))
        self.accepted.append(accepted)

    def event_wait(self, index: int, level: int, lp: str, entry: str,
                   cell: tuple[int, int]) -> tuple[str, str]:
        """An event-based gateway racing replies, reminders and the deadline.

        Returns (the gateway, its deadline timer).
        """
        g, stage = self.g, self.d.stages[index]
        col, row = cell
        gate = self.node(f"{lp}wait", "eventBasedGateway",
                         "Wait for a reply" if level == 0
                         else f"Wait for {stage.escalation[level - 1].target}", cell)
        g.roles[("wait", index, level)] = gate
        g.connect(entry, gate)
        validate = self.node(f"{lp}validate", "serviceTask", "Validate reply", (col + 2, row))
        valid_gate = self.node(f"{lp}valid_gate", "exclusiveGateway",
                               "Acceptable?" if self.d.variant is Variant.FIRST_VALID
                               else "Valid?", (col + 3, row))
        for reply in self.replies(lp, (col + 1, row)):
            g.connect(gate, reply)
            g.connect(reply, validate)
        g.connect(validate, valid_gate)
        if level == 0 and stage.reminder is not None:
            r = stage.reminder
            every = iso_duration(r.interval_ms)
            timer = self.node(f"{lp}reminder_timer", "intermediateCatchEvent",
                              f"Reminder ({r.limit}x every {every})", (col + 1, row - 1),
                              timer=("timeCycle", f"R{r.limit}/{every}"))
            send = self.node(f"{lp}send_reminder", "sendTask", "Send reminder",
                             (col + 2, row - 1))
            g.roles[("reminder", index)] = send
            g.connect(gate, timer)
            g.connect(timer, send)
            g.connect(send, gate)
        deadline_ms = (stage.deadline_ms if level == 0
                       else stage.escalation[level - 1].deadline_ms)
        deadline = self.node(f"{lp}sla_deadline" if level == 0 else f"{lp}deadline",
                             "intermediateCatchEvent", f"Deadline ({iso_duration(deadline_ms)})",
                             (col + 1, row + max(1, len(self.channels))),
                             timer=("timeDuration", iso_duration(deadline_ms)))
        g.connect(gate, deadline)
        return gate, deadline

    def replies(self, prefix: str, cell: tuple[int, int]) -> list[str]:
        """The reply catch events of one wait, one row each from `cell` down."""
        col, row = cell
        if not self.channels:
            return [self.node(f"{prefix}reply_received", "intermediateCatchEvent",
                              "Reply received", cell, message="")]
        if len(self.channels) == 1:
            return [self.node(f"{prefix}reply_received", "intermediateCatchEvent",
                              f"Reply ({self.channels[0]})", cell, message=self.channels[0])]
        return [self.node(f"{prefix}reply_received_{slug}", "intermediateCatchEvent",
                          f"Reply ({channel})", (col, row + i), message=channel)
                for i, (channel, slug) in enumerate(zip(self.channels, self.channel_ids,
                                                        strict=True))]

    def probe_wait(self, index: int, level: int, lp: str, entry: str,
                   cell: tuple[int, int]) -> tuple[str, str]:
        """The probe's loop: timer, poll, ready?, deadline passed? (back to the timer).

        Returns (the poll timer, the deadline gate).
        """
        g, d, stage = self.g, self.d, self.d.stages[index]
        col, row = cell
        poll_every = iso_duration(d.poll_interval_ms or 0)
        timer = self.node(f"{lp}poll_timer", "intermediateCatchEvent", f"Poll every {poll_every}",
                          cell, timer=("timeDuration", poll_every))
        g.roles[("wait", index, level)] = timer
        g.connect(entry, timer)
        poll = self.node(f"{lp}poll", "serviceTask", "Poll", (col + 1, row),
                         attrs={"channels": json.dumps(self.channels)} if self.channels else None)
        g.roles[("poll", index, level)] = poll
        ready = self.node(f"{lp}ready_gate", "exclusiveGateway", "Result ready?", (col + 2, row))
        validate = self.node(f"{lp}validate", "serviceTask", "Validate result", (col + 3, row))
        valid_gate = self.node(f"{lp}valid_gate", "exclusiveGateway", "Valid?", (col + 4, row))
        deadline = iso_duration(stage.deadline_ms if level == 0
                                else stage.escalation[level - 1].deadline_ms)
        gate = self.node(f"{lp}deadline_gate", "exclusiveGateway",
                         f"Deadline ({deadline}) passed?", (col + 2, row + 1),
                         attrs={"deadline": deadline})
        g.connect(timer, poll)
        g.connect(poll, ready)
        g.connect(ready, validate, "Ready", READY)
        g.connect(ready, gate, "Not yet", default=True)
        g.connect(validate, valid_gate)
        g.connect(gate, timer, "No", default=True)
        if level == 0 and stage.reminder is not None:
            r = stage.reminder
            send = self.node(f"{lp}send_reminder", "sendTask", "Send reminder",
                             (col + 1, row + 1),
                             attrs={"reminder": f"R{r.limit}/{iso_duration(r.interval_ms)}"})
            g.roles[("reminder", index)] = send
            g.connect(gate, send, "Remind", REMINDER_DUE)
            g.connect(send, timer)
        return timer, gate

    # -- the two exits -------------------------------------------------------------
    def exits(self) -> None:
        """Both exits, right of everything: received, and escalated beside its way in."""
        g, d = self.g, self.d
        col = self.free_col()
        after = "end_received"
        if d.variant is Variant.FIRST_VALID:
            after = self.node("close_out", "sendTask", "Close out the other parties", (col, 0))
            g.roles[("close_out",)] = after
            col += 1
        self.node("end_received", "endEvent", "Received", (col, 0))
        g.roles[("end_received",)] = "end_received"
        for source, name, condition in self.accepted[-1]:
            g.connect(source, after, name, condition)
        if after != "end_received":
            g.connect(after, "end_received")
        taken = {n.cell for n in g.nodes.values()}
        sources = {source for source, *_ in self.escalated}
        cell = (col, max(n.cell[1] for n in g.nodes.values()) + 1)
        if len(sources) == 1:
            c, r = g.nodes[next(iter(sources))].cell
            if (c + 1, r) not in taken:
                cell = (c + 1, r)
        self.node("end_escalated", "endEvent", "Escalated", cell)
        g.roles[("end_escalated",)] = "end_escalated"
        for source, name, condition, default in self.escalated:
            g.connect(source, "end_escalated", name, condition, default=default)


def _stage_attrs(stage: Stage) -> dict[str, str]:
    attrs = {"stage": stage.name}
    if stage.party is not None:
        attrs["party"] = stage.party
    return attrs


def build(d: WaitDefinition) -> Graph:
    """The definition's BPMN shape, with grid cells (rows may be negative) and roles.

    Ids are made of the definition's names where they can be; names that
    would clash with each other (a stage called `manager_escalation_1` beside
    `manager`) make every id plain (`stage1_wait`).
    """
    texts = [d.name, *d.channels, *d.parties,
             *(t for s in d.stages for t in (s.name, s.party or "",
                                            *(lv.target for lv in s.escalation)))]
    for text in texts:
        if _NOT_XML.search(text):
            raise BpmnError(d.source or d.name, f"Expected names that XML can carry, but "
                                                f"{text!r} holds a control character")
    try:
        graph = _Builder(d, plain=False).build()
    except ValueError:
        return _Builder(d, plain=True).build()
    if _clashing(graph):
        return _Builder(d, plain=True).build()
    return graph


def _clashing(g: Graph) -> bool:
    ids = [g.process_id, *g.nodes, *(f.id for f in g.flows)]
    ids += [f"{i}_di" for i in ids[1:]]
    ids += [f"{n}_message" for n in g.nodes] + [f"{n}_timer" for n in g.nodes]
    ids += [f"message_{i + 1}" for i in range(len(g.nodes))]
    return len(set(ids)) != len(ids)
