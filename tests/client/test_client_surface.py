"""The SDK's public surface is small, listed and stable."""

from __future__ import annotations

import streams.client
from streams.errors import XwaitError


def test_all_lists_exactly_the_public_names_and_each_exists() -> None:
    assert streams.client.__all__ == [
        "Action", "ActionKind", "ClientError", "DeliveryFailed", "InvalidRequest",
        "KafkaUnavailable", "NoSuchWait", "Outcome", "OutcomeKind", "Receipt", "ReceiptTimeout",
        "Rejected", "ResultTimeout", "TopicMissing", "TraceEntry",
        "UndecodableOutput", "UnknownChannel", "UnknownDefinition", "UnknownVersion", "Verdict",
        "WaitKey", "WaitSpec", "XwaitClient", "XwaitConsumer", "new_correlation_key",
    ]
    for name in streams.client.__all__:
        assert getattr(streams.client, name).__module__.startswith("streams.")


def test_every_sdk_error_hangs_from_the_one_root() -> None:
    sdk = streams.client  # the names as a user reaches them (the package's lazy attributes)
    assert issubclass(sdk.ClientError, XwaitError)
    for leaf in (sdk.DeliveryFailed, sdk.InvalidRequest, sdk.KafkaUnavailable, sdk.TopicMissing,
                 sdk.UndecodableOutput):
        assert issubclass(leaf, sdk.ClientError)
    for refusal in (sdk.UnknownDefinition, sdk.UnknownChannel, sdk.UnknownVersion,
                    sdk.NoSuchWait):
        assert issubclass(refusal, sdk.InvalidRequest)
    for timeout in (sdk.ResultTimeout, sdk.ReceiptTimeout):
        assert issubclass(timeout, sdk.ClientError) and issubclass(timeout, TimeoutError)


def test_the_exception_tree_drawn_in_the_errors_module_is_the_real_one() -> None:
    """Each class the drawing of streams/client/errors.py names hangs under the class the
    drawing puts it under."""
    import re

    import streams.client.errors as errors

    drawing = (errors.__doc__ or "").split("::", 1)[1].split("\n\n", 2)[1]
    parents: list[tuple[int, str]] = []
    checked = 0
    for line in drawing.splitlines():
        branch = re.search(r"[├└]── (\w+)", line)
        if branch is not None:
            depth, name = (branch.start() - 4) // 4 + 1, branch.group(1)
        elif line.strip().startswith("XwaitError"):
            depth, name = 0, "XwaitError"
        else:
            continue
        parents = [p for p in parents if p[0] < depth]
        if parents:
            parent = parents[-1][1]
            assert issubclass(getattr(streams.client, name),
                              getattr(streams.client, parent, XwaitError)), (
                f"{name} is drawn under {parent}")
            checked += 1
        parents.append((depth, name))
    assert checked == 12
