"""Starting waits with the SDK: what lands on the requests topic, and what is refused first."""

from __future__ import annotations

import base64
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Message

from streams import codec
from streams.client import (
    InvalidRequest,
    UnknownChannel,
    UnknownDefinition,
    WaitSpec,
    XwaitClient,
    new_correlation_key,
)
from streams.codec import RecordType
from streams.config import REPO_ROOT, Settings
from streams.partitioning import partition_for

ReadRaw = Callable[[Settings, str, int], list[Message]]
EndOffsets = Callable[[Settings, str], list[int]]


def decoded(record_type: RecordType, msg: Message) -> dict[str, Any]:
    return codec.decode(record_type, msg.value())



def test_new_correlation_key_has_at_least_128_random_bits_and_no_party_separator() -> None:
    keys = {new_correlation_key() for _ in range(1000)}
    assert len(keys) == 1000
    for key in keys:
        assert "~" not in key
        assert not key.startswith("-"), "a CLI would read the key as an option"
        assert len(bytes.fromhex(key)) * 8 >= 128


def test_start_wait_produces_a_start_wait_under_a_fresh_key_on_the_murmur2_partition(
    topics: Settings, read_raw: ReadRaw,
) -> None:
    before = int(time.time() * 1000)
    with XwaitClient(topics) as client:
        key = client.start_wait("expense-approval", tenant="acme",
                                payload={"amount": 120, "currency": "EUR"})

    [msg] = read_raw(topics, "requests", 1)
    assert msg.key() == key.encode()
    assert msg.partition() == partition_for(key.encode(), topics.partitions)
    record = decoded(RecordType.START_WAIT, msg)
    assert record["correlationKey"] == key
    assert record["definition"] == "expense-approval"
    assert record["tenant"] == "acme"
    assert record["payload"] == '{"amount":120,"currency":"EUR"}'
    assert record["parties"] == [] and record["deadline"] is None
    assert before <= record["requestedAt"] <= int(time.time() * 1000)
    assert len(base64.urlsafe_b64decode(key + "==")) >= 16


def test_start_many_gives_each_item_its_own_key_and_deadline_on_its_murmur2_partition(
    topics: Settings, read_raw: ReadRaw,
) -> None:
    specs = [WaitSpec("expense-approval", deadline=f"PT{i + 1}H") for i in range(20)]
    specs.append(WaitSpec("first-valid", correlation_key="chosen-key",
                          parties=["carrier-a", "carrier-b"], payload='{"lane": "HAM-NYC"}'))
    progress: list[tuple[int, int]] = []
    with XwaitClient(topics) as client:
        keys = client.start_many(specs, on_progress=lambda done, total: progress.append(
            (done, total)))

    assert len(set(keys)) == 21 and keys[-1] == "chosen-key"
    assert progress[-1] == (21, 21)
    by_key = {(m.key() or b"").decode(): m for m in read_raw(topics, "requests", 21)}
    assert set(by_key) == set(keys)
    for i, key in enumerate(keys[:20]):
        msg = by_key[key]
        assert msg.partition() == partition_for(key.encode(), topics.partitions)
        assert decoded(RecordType.START_WAIT, msg)["deadline"] == f"PT{i + 1}H"
    last = decoded(RecordType.START_WAIT, by_key["chosen-key"])
    assert last["parties"] == ["carrier-a", "carrier-b"]
    assert last["payload"] == '{"lane": "HAM-NYC"}'  # JSON text is kept verbatim


def test_unknown_definition_is_refused_with_the_known_ones_before_anything_is_produced(
    topics: Settings, end_offsets: EndOffsets,
) -> None:
    with XwaitClient(topics) as client, pytest.raises(UnknownDefinition) as caught:
        client.start_many([WaitSpec("expense-approval"), WaitSpec("expense-aproval")])
    assert caught.value.name == "expense-aproval"
    assert "expense-approval" in caught.value.known and "vendor-quote" in caught.value.known
    assert "expense-approval, first-valid" in str(caught.value)
    assert end_offsets(topics, "requests") == [0] * topics.partitions


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"deadline": "three days"}, "deadline: Expected an ISO 8601 duration"),
    ({"deadline": "P1M"}, "years or months"),
    ({"correlation_key": "abc~party"}, "contains '~'"),
    ({"correlation_key": ""}, "non-empty"),
    ({"payload": "{not json"}, "payload is not valid JSON"),
    ({"payload": {"when": object()}}, "not representable as JSON"),
    ({"parties": ["a"]}, "only for a first-valid definition"),
])
def test_a_bad_argument_is_refused_before_anything_is_produced(
    topics: Settings, kwargs: dict[str, Any], message: str, end_offsets: EndOffsets,
) -> None:
    with XwaitClient(topics) as client, pytest.raises(InvalidRequest, match=message):
        client.start_wait("expense-approval", **kwargs)
    assert end_offsets(topics, "requests") == [0] * topics.partitions


def test_first_valid_parties_must_be_distinct_names_without_separator(
    topics: Settings, end_offsets: EndOffsets,
) -> None:
    with XwaitClient(topics) as client:
        for parties in (["a", "a"], ["a~b"], [""]):
            with pytest.raises(InvalidRequest, match="distinct, non-empty names"):
                client.start_wait("first-valid", parties=parties)
        with pytest.raises(InvalidRequest, match="same correlation key more than once"):
            client.start_many([WaitSpec("probe", correlation_key="k"),
                               WaitSpec("probe", correlation_key="k")])
    assert end_offsets(topics, "requests") == [0] * topics.partitions


def _topology_with(tmp_path: Path, *names: str) -> Path:
    folder = tmp_path / "topology"
    (folder / "waits").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "topology" / "topics.yaml", folder / "topics.yaml")
    for name in names:
        shutil.copy(REPO_ROOT / "topology" / "waits" / f"{name}.yaml", folder / "waits")
    return folder


def test_reply_on_a_channel_no_definition_accepts_is_refused_before_anything_is_produced(
    topics: Settings, tmp_path: Path, end_offsets: EndOffsets,
) -> None:
    channelled = topics.with_overrides(
        topology=_topology_with(tmp_path, "expense-approval", "vendor-quote"))
    with XwaitClient(channelled) as client:
        with pytest.raises(UnknownChannel) as caught:
            client.reply("some-key", {"decision": "approved"}, channel="fax")
        assert caught.value.known == ("email", "portal", "webhook")
        client.reply("some-key", {"decision": "approved"}, channel="webhook")
    assert sum(end_offsets(topics, "replies")) == 1


def test_a_definition_without_channels_accepts_any_channel(
    topics: Settings, end_offsets: EndOffsets,
) -> None:
    # probe.yaml lists no channels, so with the shipped definitions every channel is known.
    with XwaitClient(topics) as client:
        client.reply("some-key", {"resultReady": True}, channel="fax")
    assert sum(end_offsets(topics, "replies")) == 1


def test_a_wait_started_inside_an_opentelemetry_span_carries_that_spans_trace(
    topics: Settings, read_raw: ReadRaw,
) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    tracer = TracerProvider().get_tracer("the caller")
    with tracer.start_as_current_span("checkout") as span, XwaitClient(topics) as client:
        key = client.start_wait("expense-approval")
        context = span.get_span_context()
    assert key.traceparent == (f"00-{context.trace_id:032x}-{context.span_id:016x}-"
                               f"{int(context.trace_flags):02x}")
    [msg] = read_raw(topics, "requests", 1)
    assert dict(msg.headers() or []) == {"traceparent": (key.traceparent or "").encode()}


def test_each_wait_started_outside_a_span_gets_a_fresh_trace_of_its_own(
    topics: Settings, read_raw: ReadRaw,
) -> None:
    given = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    with XwaitClient(topics) as client:
        keys = client.start_many([WaitSpec("expense-approval"), WaitSpec("expense-approval"),
                                  WaitSpec("expense-approval", traceparent=given)])
    traces = [k.traceparent for k in keys]
    assert traces[2] == given and len(set(traces)) == 3
    assert all(isinstance(k, str) and str(k) == k for k in keys)  # the key, as before
    sent = {m.key(): dict(m.headers() or [])["traceparent"]
            for m in read_raw(topics, "requests", 3)}
    assert sent == {k.encode(): (k.traceparent or "").encode() for k in keys}
    with pytest.raises(InvalidRequest, match="not a W3C traceparent"), \
            XwaitClient(topics) as client:
        client.start_wait("expense-approval", traceparent="00-xyz")
