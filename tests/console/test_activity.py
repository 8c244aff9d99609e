"""The rolling hour of counts behind the diagram, and which node each count lands on."""

from __future__ import annotations

from streams.console.activity import Activity, HourWindow
from streams.console.diagram import node_counts
from streams.core import EmitOutcome, OutcomeKind, OutcomeReason
from streams.processor.model import NO_WAIT, Handled, InputRecord, Role, RowHead
from tests.bpmn.conftest import shipped

DEFINITIONS = {d.name: d for d in shipped()}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_counts_older_than_an_hour_leave_the_window() -> None:
    clock = Clock()
    window = HourWindow(clock)
    window.add("d", "reminder|0")
    clock.now += 1800
    window.add("d", "reminder|0", 2)
    window.add("other", "reminder|0")
    assert window.totals("d") == {"reminder|0": 3}
    clock.now += 1801  # the first count is now an hour and a second old
    assert window.totals("d") == {"reminder|0": 2}
    clock.now += 3600
    assert window.totals("d") == {}


def record() -> InputRecord:
    return InputRecord(Role.TIMERS, "t", 0, 1, b"k", b"")


def handled(definition: str, counters: list[str], outcomes: list[EmitOutcome] | None = None,
            place: tuple[int, int] = (0, 0)) -> Handled:
    head = RowHead(definition=definition)
    return Handled(wait_key="k", head_before=head, head_after=head, counters=counters,
                   outcomes=outcomes or [], place=place)


def outcome(definition: str, kind: OutcomeKind, reason: OutcomeReason) -> EmitOutcome:
    return EmitOutcome("o", "k", definition, None, kind, reason, None, False, None, None,
                       None, 0, 0, 0, 0, ())


def test_the_observer_counts_actions_and_outcomes_by_definition_but_not_replays() -> None:
    activity = Activity(Clock())
    activity(record(), handled("race", ["actions.RUN_ESCALATION"], [
        outcome("race", OutcomeKind.ESCALATED, OutcomeReason.DEADLINE_EXHAUSTED)],
        place=(0, 1)), 0)
    activity(record(), handled("race", ["actions.SEND_REQUEST"]), 0)
    activity(record(), handled("race", ["actions.SEND_REQUEST", "replayed"]), 0)
    activity(record(), Handled(head_before=NO_WAIT, head_after=NO_WAIT,
                               counters=["rejected.unmatched"]), 0)
    assert activity.totals("race") == {"escalation|0|1": 1, "send_request|0": 1,
                                       "outcome|ESCALATED|deadline_exhausted": 1}


def test_counts_land_on_the_nodes_of_the_diagram_with_the_query_that_lists_their_waits() -> None:
    d = DEFINITIONS["expense-approval"]
    nodes = node_counts(d, {"parked": 4, "in_review": 1, "suspended": 2}, {
        "send_request|0": 7, "reminder|0": 5, "escalation|0|1": 2, "review|0": 1,
        "outcome|RECEIVED|reply_valid": 3, "outcome|ESCALATED|deadline_exhausted": 1,
        "outcome|CANCELLED|cancelled_by_operator": 1})
    assert nodes["wait"][0] == {"label": "parked (all stages and levels)", "count": 4,
                                "list": {"state": "parked"}}
    assert nodes["wait"][1]["list"] == {"state": "suspended"}
    assert {b["label"]: b["count"] for b in nodes["review_reply"]} == \
        {"in review": 1, "reviews (1 h)": 1}
    assert nodes["send_reminder"] == [{"label": "reminders (1 h)", "count": 5, "list": {}}]
    assert nodes["run_escalation"][0]["count"] == 2
    assert nodes["end_received"] == [{"label": "reply_valid (1 h)", "count": 3,
                                      "list": {"state": "done", "outcome": "RECEIVED"}}]
    assert nodes["end_escalated"][0]["list"] == {"state": "done", "outcome": "ESCALATED"}
    assert nodes["send_request"][0]["count"] == 7
    assert not any("cancelled" in b["label"] for bs in nodes.values() for b in bs)


def test_chained_and_probe_counts_find_their_stage_and_level_nodes() -> None:
    chained = node_counts(DEFINITIONS["two-stage-approval"], {}, {
        "escalation|1|1": 1, "reminder|0": 2, "send_request|1": 3})
    assert chained["finance_run_escalation"][0]["count"] == 1
    assert chained["manager_send_reminder"][0]["count"] == 2
    assert chained["finance_send_request"][0]["count"] == 3
    assert chained["manager_wait"][0]["label"] == "parked (all stages and levels)"
    probe = node_counts(DEFINITIONS["probe"], {"parked": 1}, {"poll|0|0": 9})
    assert probe["poll"][0] == {"label": "polls (1 h)", "count": 9, "list": {}}
    assert probe["poll_timer"][0]["label"] == "parked"
    fan = node_counts(DEFINITIONS["first-valid"], {}, {"send_request|0": 3, "close_out": 2})
    assert fan["fan_out"][0]["count"] == 3 and fan["close_out"][0]["count"] == 2
