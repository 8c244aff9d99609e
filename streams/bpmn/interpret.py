"""A modelled external wait read back into a definition, or refused naming the node.

The process is walked from its start event the way the seed draws the
pattern, by element types and flows, not by ids (a diagram drawn in a
modeller has ids like `Gateway_0x1abc`):

    start -> service tasks (compose) -> the request -> the wait
    the request   a send task; a multi-instance send task or a parallel
                  fan-out of send tasks (first valid response wins)
    the wait      an event-based gateway whose branches are catch events:
                  messages (one per channel), a timer cycle that loops back
                  through a send task (reminders), one timer duration (the
                  deadline); or, for a probe, a poll timer -> poll task ->
                  readiness gateway -> deadline gateway -> back to the timer
    replies       converge on a validation task and an exclusive gateway:
                  its conditional flow is the accepted reply, its default
                  the invalid one (to a user task for review, or to where
                  the deadline leads)
    the deadline  runs the escalation (a service task) and ends the wait, or
                  opens the next escalation level (a service task naming the
                  target, then a wait of its own); the last level's deadline
                  ends the wait
    both exits    named end events, one for received, one for escalated

What BPMN cannot say (response schema, retention, early-reply TTL) comes
from the process's `xwait:definition`; what it can say comes from the shape,
and where both speak (variant, invalid-reply route) they must agree.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from streams.bpmn.errors import BpmnError
from streams.bpmn.graph import Flow, Graph, Node
from streams.core.durations import parse_cycle_ms, parse_duration_ms

__all__ = ["interpret"]

_EBG = "eventBasedGateway"
_XOR = "exclusiveGateway"
_CATCH = "intermediateCatchEvent"


@dataclass
class _Wait:
    """One wait (a stage at one escalation level) as read from the diagram."""

    entry: str
    deadline: str
    deadline_node: str
    after_deadline: str  # where the deadline leads
    accepted_to: str  # where an accepted reply leads
    invalid: str  # "review", "escalate" or "resume" (first-valid)
    channels: list[str] = field(default_factory=list)
    reminder: str | None = None
    poll: str | None = None
    poll_node: str = ""


@dataclass
class _Stage:
    name: str
    party: str | None
    waits: list[_Wait]
    targets: list[str]  # escalation level targets, in order


class _Reader:
    def __init__(self, g: Graph) -> None:
        self.g = g
        self.source = f"process '{g.process_id}'"
        self.seen: set[str] = set()
        self.entries: set[str] = set()
        self.received_ends: set[str] = set()
        self.escalated_ends: set[str] = set()
        self.probe = False
        self.first_valid = False

    # -- small helpers --------------------------------------------------------------
    def fail(self, node: str | None, message: str) -> BpmnError:
        return BpmnError(self.source, message, node)

    def n(self, node_id: str) -> Node:
        return self.g.nodes[node_id]

    def visit(self, node: Node) -> Node:
        self.seen.add(node.id)
        return node

    def out(self, node: Node) -> list[Flow]:
        return self.g.outgoing(node.id)

    def next(self, node: Node, what: str) -> Node:
        """The one node after `node`; refused when it has none or several."""
        flows = self.out(node)
        if len(flows) != 1:
            raise self.fail(node.id, f"{node.label} must have exactly one outgoing flow "
                                     f"({what}), but has {len(flows)}")
        return self.visit(self.n(flows[0].target))

    def duration(self, node: Node, text: str, what: str) -> str:
        try:
            parse_duration_ms(text)
        except ValueError as exc:
            raise self.fail(node.id, f"{node.label}: {what}: {exc}") from None
        return text

    def gate_flows(self, gate: Node, what: str) -> tuple[Flow, list[Flow]]:
        """(the default flow, the conditional ones) of an exclusive gateway."""
        flows = self.out(gate)
        default = [f for f in flows if f.id == gate.default]
        if not default:
            raise self.fail(gate.id, f"{gate.label} must have a default flow ({what})")
        others = [f for f in flows if f.id != gate.default]
        return default[0], others

    # -- the walk ------------------------------------------------------------------------
    def definition(self) -> dict[str, Any]:
        g = self.g
        starts = [n for n in g.nodes.values() if n.kind == "startEvent"]
        if len(starts) != 1:
            raise self.fail(starts[1].id if starts else None,
                            f"Expected one start event, but found {len(starts)}")
        node = self.visit(starts[0])
        node = self.next(node, "to compose the request")
        while node.kind in ("serviceTask", "task", "scriptTask"):
            node = self.next(node, "to the request")
        parties: list[str] = []
        send: Node | None = None
        if node.kind == "parallelGateway":
            self.first_valid = True
            parties, entry = self.fan_out(node)
        elif node.kind == "sendTask":
            self.first_valid = node.multi_instance
            send = node
            entry = self.next(node, "to the wait")
        else:
            raise self.fail(node.id, f"{node.label} comes where the request is sent: expected "
                                     "a bpmn:sendTask (or a parallel gateway fanning out to one "
                                     "send task per party)")
        names = _stage_names(send) if send is not None else ("", None)
        stages: list[_Stage] = []
        while True:
            stage = self.stage(entry)
            stage.name, stage.party = names
            stages.append(stage)
            after = self.n(stage.waits[0].accepted_to)
            if self.first_valid or after.kind != "sendTask":
                break
            # Chained: an accepted reply sends the next stage's request.
            names = _stage_names(after)
            entry = self.next(after, "to the stage's wait")
        self.ends(stages)
        unvisited = [n for n in g.nodes.values() if n.id not in self.seen]
        if unvisited:
            first = unvisited[0]
            raise self.fail(first.id, f"{first.label} is not on any path of the external wait "
                                      "(start, request, wait, replies, reminders, deadline, "
                                      "escalation, the two ends)")
        return self.result(stages, parties)

    def fan_out(self, fan: Node) -> tuple[list[str], Node]:
        """First valid response wins: one send task per party, joined again."""
        parties: list[str] = []
        join: Node | None = None
        for flow in self.out(fan):
            send = self.visit(self.n(flow.target))
            if send.kind != "sendTask":
                raise self.fail(send.id, f"{send.label} is a branch of the fan-out "
                                         f"{fan.label}: each branch sends the request to one "
                                         "party (a bpmn:sendTask)")
            party = send.attrs.get("party") or send.name
            if not party:
                raise self.fail(send.id, f"{send.label} sends to a party but names none "
                                         "(xwait:party or the task's name)")
            parties.append(party)
            after = self.next(send, "to the join")
            if after.kind != "parallelGateway" or (join is not None and after.id != join.id):
                raise self.fail(after.id, f"{after.label} follows {send.label}: every party's "
                                          "send task leads to the same joining parallel "
                                          "gateway")
            join = after
        if join is None:
            raise self.fail(fan.id, f"{fan.label} fans out to no party")
        return parties, self.next(join, "to the wait")

    def stage(self, entry: Node) -> _Stage:
        """A stage from its wait: the waits of every escalation level, in order."""
        waits: list[_Wait] = []
        targets: list[str] = []
        node = entry
        while True:
            wait = self.one_wait(node, len(waits))
            waits.append(wait)
            after = self.n(wait.after_deadline)
            deadline = self.n(wait.deadline_node)
            if after.kind == "endEvent":
                if not targets:
                    raise self.fail(deadline.id, f"{deadline.label} ends the wait without "
                                                 "running the escalation: lead it to a service "
                                                 "task (run_escalation) first")
                self.escalated_ends.add(after.id)
                break
            if after.kind != "serviceTask":
                raise self.fail(after.id, f"{after.label} follows the deadline "
                                          f"{deadline.label}: expected the escalation (a "
                                          "bpmn:serviceTask) or, after the last level, the end")
            following = self.next(after, "after the escalation")
            if following.kind == "endEvent":
                if targets:
                    raise self.fail(after.id, f"{after.label} runs an escalation and ends; after "
                                              "the last level the wait ends without one: lead "
                                              f"{deadline.label} straight to the end event")
                self.escalated_ends.add(following.id)
                break
            target = after.attrs.get("target") or after.name
            if not target:
                raise self.fail(after.id, f"{after.label} opens an escalation level but names "
                                          "no target (xwait:target or the task's name)")
            targets.append(target)
            node = following
        for w in waits[1:]:
            if w.accepted_to != waits[0].accepted_to:
                raise self.fail(w.entry, f"an accepted reply at '{w.entry}' leads to "
                                         f"'{w.accepted_to}', but at '{waits[0].entry}' to "
                                         f"'{waits[0].accepted_to}': every level of a stage "
                                         "continues the same way")
        return _Stage("", None, waits, targets)

    def one_wait(self, entry: Node, level: int) -> _Wait:
        if entry.id in self.entries:
            raise self.fail(entry.id, f"{entry.label} is entered again by a later escalation "
                                      "level: each level waits at its own gateway")
        self.entries.add(entry.id)
        self.visit(entry)
        if entry.kind == _EBG and not self.probe:
            return self.event_wait(entry, level)
        if entry.kind == _CATCH and entry.timer is not None and (self.probe or level == 0):
            self.probe = True
            return self.probe_wait(entry, level)
        raise self.fail(entry.id, f"{entry.label} comes where the wait begins: expected an "
                                  "event-based gateway (replies, reminders and the deadline "
                                  "race) or, for a probe, a poll timer")

    def event_wait(self, gate: Node, level: int) -> _Wait:
        replies: list[Node] = []
        reminder: str | None = None
        deadline: Node | None = None
        for flow in self.out(gate):
            branch = self.visit(self.n(flow.target))
            if branch.kind not in (_CATCH, "receiveTask"):
                raise self.fail(branch.id, f"{branch.label} is a branch of the event-based "
                                           f"gateway {gate.label}, but every branch must be a "
                                           "catch event (a reply's message or a timer) or a "
                                           "receive task")
            if branch.event is not None:
                raise self.fail(branch.id, f"{branch.label} catches a {branch.event}: the wait "
                                           "catches replies (messages) and timers only")
            if branch.message is not None:
                replies.append(branch)
                continue
            if branch.timer is None:
                raise self.fail(branch.id, f"{branch.label} catches nothing: give it a "
                                           "message (a reply) or a timer")
            after = self.next(branch, "to what the timer starts")
            loops = after.kind == "sendTask" and [f.target for f in self.out(after)] == [gate.id]
            if loops:
                if level > 0:
                    raise self.fail(branch.id, f"{branch.label} sends reminders at an escalation "
                                               "level; xwait reminds only before the first "
                                               "deadline")
                if reminder is not None:
                    raise self.fail(branch.id, f"{gate.label} has two reminder loops")
                reminder = self.cycle(branch)
                continue
            if deadline is not None:
                raise self.fail(branch.id, f"{gate.label} has two deadlines ({deadline.label} "
                                           f"and {branch.label}); one wait has one SLA")
            deadline = branch
        if deadline is None:
            raise self.fail(gate.id, f"{gate.label} has no deadline: an external wait needs a "
                                     "timer (timeDuration) on the gateway that ends in "
                                     "escalation")
        if deadline.timer is None or deadline.timer[0] != "timeDuration":
            raise self.fail(deadline.id, f"{deadline.label} is the deadline: its timer must be "
                                         "a timeDuration such as P3D")
        if not replies:
            raise self.fail(gate.id, f"{gate.label} waits for no reply: add a message catch "
                                     "event per reply channel")
        channels = [r.message or "" for r in replies]
        if len(replies) > 1 and "" in channels:
            blank = replies[channels.index("")]
            raise self.fail(blank.id, f"{blank.label} has no message name: with several reply "
                                      "catch events each names its channel by its message")
        if len(set(channels)) != len(channels):
            twice = replies[len(set(channels[: len(channels)]))]
            raise self.fail(twice.id, f"{gate.label} catches the same channel twice")
        validate = {self.next(r, "to the validation").id for r in replies}
        if len(validate) != 1:
            raise self.fail(gate.id, f"the replies of {gate.label} go to different nodes "
                                     f"({', '.join(sorted(validate))}); they converge on one "
                                     "validation task")
        after_deadline = self.next(deadline, "to the escalation")
        accepted, invalid = self.validation(self.n(validate.pop()), gate, after_deadline)
        return _Wait(gate.id, self.duration(deadline, deadline.timer[1], "the deadline"),
                     deadline.id, after_deadline.id, accepted, invalid,
                     [c for c in channels if c], reminder)

    def cycle(self, timer: Node) -> str:
        if timer.timer is None or timer.timer[0] != "timeCycle":
            raise self.fail(timer.id, f"{timer.label} loops back as a reminder: its timer must "
                                      "be a timeCycle such as R2/PT24H (how many, how often)")
        try:
            parse_cycle_ms(timer.timer[1])
        except ValueError as exc:
            raise self.fail(timer.id, f"{timer.label}: the reminder cycle: {exc}") from None
        return timer.timer[1]

    def validation(self, validate: Node, gate: Node, after_deadline: Node) -> tuple[str, str]:
        """(where an accepted reply goes, the invalid route) from the validation on."""
        # Alike in shape with probe_wait's poll and readiness gateway (duplicates lists the
        # pair), deliberately: two patterns' checks, each refusal in its own words.
        if validate.kind not in ("serviceTask", "task", "businessRuleTask", "scriptTask"):
            raise self.fail(validate.id, f"{validate.label} receives the replies: expected the "
                                         "validation (a bpmn:serviceTask)")
        vg = self.next(validate, "to the gateway on validity")
        if vg.kind != _XOR:
            raise self.fail(vg.id, f"{vg.label} follows the validation: expected an exclusive "
                                   "gateway (valid or not)")
        default, others = self.gate_flows(vg, "where invalid replies go")
        if len(others) != 1:
            raise self.fail(vg.id, f"{vg.label} must have one conditional flow (the accepted "
                                   f"reply) besides its default, but has {len(others)}")
        accepted = self.visit(self.n(others[0].target))
        invalid = self.visit(self.n(default.target))
        if invalid.id == gate.id:
            return accepted.id, "resume"
        if invalid.kind == "userTask":
            back = self.next(invalid, "after the review")
            if back.id != accepted.id:
                raise self.fail(invalid.id, f"{invalid.label} reviews invalid replies and must "
                                            f"lead where accepted replies go ({accepted.label})")
            return accepted.id, "review"
        if invalid.id == after_deadline.id:
            return accepted.id, "escalate"
        raise self.fail(vg.id, f"{vg.label} sends invalid replies (its default flow) to "
                               f"{invalid.label}: expected a review (a bpmn:userTask), the "
                               "escalation the deadline leads to, or, when the first valid "
                               "reply wins, back to the wait")

    def probe_wait(self, timer: Node, level: int) -> _Wait:
        if timer.timer is None or timer.timer[0] != "timeDuration":
            raise self.fail(timer.id, f"{timer.label} is the poll timer: its timer must be a "
                                      "timeDuration (the time between polls)")
        poll_every = self.duration(timer, timer.timer[1], "the poll interval")
        poll = self.next(timer, "to the poll")
        if poll.kind not in ("serviceTask", "sendTask", "task"):
            raise self.fail(poll.id, f"{poll.label} follows the poll timer: expected the poll "
                                     "(a bpmn:serviceTask)")
        ready = self.next(poll, "to the readiness gateway")
        if ready.kind != _XOR:
            raise self.fail(ready.id, f"{ready.label} follows the poll: expected an exclusive "
                                      "gateway (is the result ready?)")
        not_yet, others = self.gate_flows(ready, "not ready yet")
        if len(others) != 1:
            raise self.fail(ready.id, f"{ready.label} must have one conditional flow (ready) "
                                      "besides its default (not yet)")
        gate = self.visit(self.n(not_yet.target))
        if gate.id == timer.id or gate.kind != _XOR:
            raise self.fail(ready.id, f"the probe loop goes from {ready.label} to {gate.label} "
                                      "without a deadline gate: without one the loop never "
                                      "ends; add an exclusive gateway that escalates once the "
                                      "deadline passed and otherwise returns to the timer")
        deadline_text = gate.attrs.get("deadline")
        if not deadline_text:
            raise self.fail(gate.id, f"{gate.label} is the deadline gate but does not say when: "
                                     "give it xwait:deadline, an ISO 8601 duration such as PT2H")
        deadline = self.duration(gate, deadline_text, "xwait:deadline")
        loop, branches = self.gate_flows(gate, "no: back to the poll timer")
        if loop.target != timer.id:
            raise self.fail(gate.id, f"{gate.label}: while the deadline has not passed the loop "
                                     f"returns to the poll timer {timer.label}, not to "
                                     f"{self.n(loop.target).label}")
        reminder: str | None = None
        escalate: Node | None = None
        for flow in branches:
            target = self.visit(self.n(flow.target))
            if target.kind == "sendTask" and [f.target for f in self.out(target)] == [timer.id]:
                if level > 0 or reminder is not None:
                    raise self.fail(target.id, f"{target.label}: one reminder loop, before the "
                                               "first deadline only")
                reminder = target.attrs.get("reminder", "")
                try:
                    parse_cycle_ms(reminder)
                except ValueError as exc:
                    raise self.fail(target.id, f"{target.label} reminds on the probe loop: its "
                                               f"xwait:reminder cycle: {exc}") from None
                continue
            if escalate is not None:
                raise self.fail(gate.id, f"{gate.label} has two ways out once the deadline "
                                         "passed")
            escalate = target
        if escalate is None:
            raise self.fail(gate.id, f"{gate.label} never escalates: its conditional flow "
                                     "leads to the escalation once the deadline passed")
        accepted, invalid = self.validation(self.visit(self.n(others[0].target)), timer,
                                            escalate)
        channels = json.loads(poll.attrs.get("channels", "[]"))
        return _Wait(timer.id, deadline, gate.id, escalate.id, accepted, invalid,
                     list(channels), reminder, poll_every, poll.id)

    # -- the two exits ---------------------------------------------------------------
    def ends(self, stages: list[_Stage]) -> None:
        last = stages[-1].waits[0]
        received = self.n(last.accepted_to)
        if self.first_valid and received.kind == "sendTask":
            received = self.next(received, "after closing out the other parties")
        if received.kind != "endEvent":
            raise self.fail(received.id, f"{received.label} follows an accepted reply of the "
                                         "last stage: expected the received end event")
        self.received_ends.add(received.id)
        for end_id in sorted(self.received_ends | self.escalated_ends):
            end = self.n(end_id)
            if not end.name:
                raise self.fail(end.id, f"{end.label} has no name: both exits of an external "
                                        "wait are named (received, escalated), or a wait that "
                                        "ended cannot be told from one that never did")
        both = self.received_ends & self.escalated_ends
        if both:
            end = self.n(sorted(both)[0])
            raise self.fail(end.id, f"{end.label} ends both received and escalated waits: the "
                                    "two exits must be two named end events")

    # -- the definition ---------------------------------------------------------------
    def result(self, stages: list[_Stage], parties: list[str]) -> dict[str, Any]:
        g = self.g
        waits = [w for s in stages for w in s.waits]
        invalid = {w.invalid for w in waits}
        if self.first_valid:
            wrong = [w for w in waits if w.invalid != "resume"]
            if wrong:
                raise self.fail(wrong[0].entry, "when the first valid reply wins, an "
                                                "unacceptable reply returns to its wait (the "
                                                "validity gateway's default flow)")
            route = g.settings.get("invalidReply", "review")
        else:
            if "resume" in invalid or len(invalid) != 1:
                raise self.fail(waits[0].entry, "every wait routes invalid replies the same "
                                                "way (all to review or all to escalation)")
            route = invalid.pop()
            said = g.settings.get("invalidReply")
            if said is not None and said != route:
                raise self.fail(None, f"the diagram sends invalid replies to {route}, but "
                                      f"xwait:definition says invalidReply=\"{said}\"")
        channels = waits[0].channels
        for w in waits[1:]:
            if w.channels != channels:
                raise self.fail(w.entry, f"'{w.entry}' accepts the channels {w.channels}, but "
                                         f"'{waits[0].entry}' accepts {channels}: every wait "
                                         "of one definition takes the same channels")
        polls = {w.poll for w in waits}
        if len(polls) != 1:
            raise self.fail(waits[1].entry, "every level of a probe polls at the same interval")
        if self.first_valid:
            variant = "first-valid"
        elif self.probe:
            variant = "probe"
        elif len(stages) > 1:
            variant = "chained"
        else:
            variant = "multi-channel" if len(channels) > 1 else "single-channel"
        said_variant = g.settings.get("variant")
        if said_variant is not None and said_variant != variant:
            raise self.fail(None, f"the diagram has the shape of a {variant} wait, but "
                                  f"xwait:definition says variant=\"{said_variant}\"")
        out: dict[str, Any] = {"name": g.name, "variant": variant}
        if channels:
            out["channels"] = channels
        if parties:
            out["parties"] = parties
        if variant == "chained":
            out["stages"] = [_stage_out(s) for s in stages]
        else:
            out.update({k: v for k, v in _stage_out(stages[0]).items()
                        if k not in ("name", "party")})
        out["invalid_reply"] = route
        for key, field_name in (("earlyReplyTtl", "early_reply_ttl"),
                                ("retention", "retention")):
            if key in g.settings:
                out[field_name] = g.settings[key]
        if "sendFailure" in g.settings:
            retries = g.settings.get("sendRetries", "0")
            if not retries.isdigit():
                raise self.fail(None, f"xwait:definition says sendRetries=\"{retries}\", "
                                      "not a whole number")
            out["on_send_failure"] = {"retries": int(retries), "then": g.settings["sendFailure"],
                                      "backoff": g.settings.get("sendBackoff", "PT1M")}
        if self.probe:
            out["poll"] = waits[0].poll
        if g.response_schema is not None:
            try:
                out["response_schema"] = json.loads(g.response_schema)
            except ValueError as exc:
                raise self.fail(None, f"xwait:responseSchema is not JSON: {exc}") from None
        return out


def _stage_names(send: Node) -> tuple[str, str | None]:
    return send.attrs.get("stage") or send.name, send.attrs.get("party")


def _stage_out(stage: _Stage) -> dict[str, Any]:
    first = stage.waits[0]
    out: dict[str, Any] = {"name": stage.name}
    if stage.party is not None:
        out["party"] = stage.party
    out["deadline"] = first.deadline
    if first.reminder is not None:
        limit, every = parse_cycle_ms(first.reminder)
        out["reminder"] = {"every": first.reminder.split("/", 1)[1], "limit": limit}
        del every
    if stage.targets:
        out["escalation"] = [{"target": t, "deadline": w.deadline}
                             for t, w in zip(stage.targets, stage.waits[1:], strict=True)]
    return out


def interpret(g: Graph) -> dict[str, Any]:
    """The definition in the YAML format of topology/waits, or a BpmnError naming the node."""
    return _Reader(g).definition()
