"""What the test kit promises a test, on the broker: `advance` returns with everything due
read, what was sent before it is decided before the clock moves, a test sees its own waits
only, and a worker refuses a test clock on topics the broker stamps."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from streams import topics
from streams.client import Action, ActionKind, Outcome
from streams.config import Guarantee, Settings
from streams.errors import ConfigError
from streams.testing.clock import worker_clock, write_clock
from streams.testing.kit import DELIVERED, Kit, SendResult, failed
from tests.prefixes import unique_prefix

pytestmark = [pytest.mark.kafka]


def _read_actions(kit: Kit, key: str) -> list[Action]:
    """The actions of `key` the kit has read so far, without settling first."""
    return [kit.session.decode(Action, value)
            for _, _, k, value in kit.session.records("actions") if k == key.encode()]


def test_advance_returns_with_every_timer_due_by_then_decided_and_read(xwait_kit: Kit) -> None:
    key = xwait_kit.start_wait("expense-approval")
    xwait_kit.advance("P2D")
    assert [a.action for a in _read_actions(xwait_kit, key)] == [
        "SEND_REQUEST", "SEND_REMINDER", "SEND_REMINDER"]


def test_what_was_sent_before_an_advance_is_decided_at_the_time_it_was_sent(
        xwait_kit: Kit) -> None:
    key = xwait_kit.start_wait("expense-approval")
    xwait_kit.advance("P1D")
    xwait_kit.client.reply(key, {"decision": "rejected"}, channel="portal")  # no settle
    xwait_kit.advance("P5D")
    outcome = xwait_kit.outcome(key)
    assert outcome is not None and outcome.outcome == "RECEIVED"
    assert xwait_kit.elapsed(outcome.ended_at) == timedelta(days=1)


def test_a_test_sees_only_its_own_waits_while_the_earlier_ones_go_on(xwait_kit: Kit) -> None:
    earlier = xwait_kit.start_wait("expense-approval")
    xwait_kit.advance("PT1H")
    kit = xwait_kit.session.new_test()
    assert kit.started_at == xwait_kit.now  # the clock goes on where the earlier test left it
    key = kit.start_wait("expense-approval", correlation_key=kit.key("expense-42"))
    kit.advance("P3DT12H")
    assert {a.correlation_key for a in kit.actions()} == {key}
    assert [o.correlation_key for o in kit.outcomes()] == [key]
    earlier_outcome = xwait_kit.outcome(earlier)  # its timers fired as the clock moved
    assert earlier_outcome is not None and earlier_outcome.outcome == "ESCALATED"


def test_the_fake_adapter_reports_what_its_handler_returns(xwait_kit: Kit) -> None:
    def handler(action: Action) -> SendResult:
        return failed("452 mailbox full") if action.action is ActionKind.SEND_REMINDER \
            else DELIVERED

    xwait_kit.adapter.handler = handler
    key = xwait_kit.start_wait("expense-approval")
    xwait_kit.advance("P1D")
    status = xwait_kit.status(key)
    assert status is not None
    events = [(e["event"], e["detail"]) for e in status["trace"]]
    assert [e for e, _ in events if e.startswith("send_")] == ["send_delivered", "send_failed"]
    assert "452 mailbox full" in events[-1][1]
    assert [a.action for a in xwait_kit.adapter.received] == ["SEND_REQUEST", "SEND_REMINDER"]


def test_the_clock_only_goes_forward(xwait_kit: Kit) -> None:
    for backwards in (timedelta(hours=-1), 0, -1):
        with pytest.raises(ValueError, match="only goes forward"):
            xwait_kit.advance(backwards)
    for text in ("-PT1H", "PT0S"):
        with pytest.raises(ValueError, match="Expected a"):
            xwait_kit.advance(text)
    xwait_kit.advance_to(xwait_kit.now + 1)
    with pytest.raises(ValueError, match="only goes forward"):
        xwait_kit.advance_to(xwait_kit.started_at)


def test_a_worker_refuses_a_test_clock_on_input_topics_the_broker_stamps(
        kafka_bootstrap: str, tmp_path: Path) -> None:
    prefix = unique_prefix("kc")
    clock = tmp_path / "clock"
    write_clock(clock, 946_890_000_000)
    settings = Settings(bootstrap=kafka_bootstrap, topic_prefix=prefix, partitions=1,
                        clock=f"file:{clock}")
    topics.create(settings, topics.load_specs(settings))  # as `xwait topics create` does
    # What the worker asks when it is built (streams.processor.worker.Worker): `xwait
    # worker` exits 2 with this line, before it takes any partition.
    with pytest.raises(ConfigError) as refused:
        worker_clock(settings)
    assert f"{prefix}.requests" in str(refused.value)
    assert "stamped by the broker (LogAppendTime)" in str(refused.value)
    assert "unset XWAIT_CLOCK in production" in str(refused.value)


def test_under_exactly_once_advance_returns_with_the_committed_outputs_read(
        xwait_kit: Kit) -> None:
    # A transaction's markers are written after its commit returns: read up to the
    # last stable offset right then, an advance missed outputs (2 in 40 here).
    assert xwait_kit.settings.guarantee is Guarantee.EXACTLY_ONCE  # tests/kit/conftest.py
    for _ in range(6):
        kit = xwait_kit.session.new_test()
        keys = [kit.start_wait("expense-approval") for _ in range(3)]
        kit.advance("P3D")
        assert {key: [a.action for a in _read_actions(kit, key)] for key in keys} == {
            key: ["SEND_REQUEST", "SEND_REMINDER", "SEND_REMINDER", "RUN_ESCALATION"]
            for key in keys}


def test_the_fake_adapter_answers_each_action_at_the_time_it_goes_out(xwait_kit: Kit) -> None:
    def manager(action: Action) -> None:  # answers when reminded, not before
        if action.action is ActionKind.SEND_REMINDER:
            xwait_kit.client.reply(action.correlation_key, {"decision": "approved"},
                                   channel="portal")

    xwait_kit.adapter.handler = manager
    key = xwait_kit.start_wait("expense-approval")
    xwait_kit.advance("P3D")  # the clock stops at the first reminder, a day in
    outcomes = [xwait_kit.session.decode(Outcome, value)
                for _, _, k, value in xwait_kit.session.records("outcomes")
                if k == key.encode()]
    assert [(o.outcome, xwait_kit.elapsed(o.ended_at)) for o in outcomes] == [
        ("RECEIVED", timedelta(days=1))]
