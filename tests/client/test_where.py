"""`--where FILTER`: one syntax, clear refusals, the same answer from the list API and
from the re-check of one wait."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.client import InvalidRequest
from streams.client.where import FIELDS, Where

NOW = int(datetime(2026, 12, 7, 10, 0, tzinfo=UTC).timestamp() * 1000)
DAY = 86_400_000


def parse(text: str) -> Where:
    return Where.parse(text, now_ms=lambda: NOW)


def test_every_field_is_read_and_becomes_the_list_api_s_parameters() -> None:
    where = parse("definition=expense-approval, version=v2,state=parked,tenant=acme,"
                  "key=order-,parkedAfter=2026-11-01T00:00:00Z,parkedBefore=-P30D,"
                  "dueAfter=1765000000000,dueBefore=PT2H")
    assert where.query() == {
        "definition": "expense-approval", "version": "v2", "state": "parked",
        "tenant": "acme", "key": "order-",
        "parkedFrom": str(int(datetime(2026, 11, 1, tzinfo=UTC).timestamp() * 1000)),
        "parkedTo": str(NOW - 30 * DAY - 1),  # before: the API's bound includes its end
        "dueFrom": "1765000000000", "dueTo": str(NOW + 2 * 3_600_000 - 1)}
    assert where.describe()["parkedBefore"] == "2026-11-07T10:00:00.000Z"
    assert where.text.startswith("definition=expense-approval,version=v2,")


def test_durations_count_from_when_the_filter_is_read() -> None:
    assert parse("parkedBefore=-P1W").parked_before == NOW - 7 * DAY
    assert parse("dueAfter=+PT30M").due_after == NOW + 1_800_000
    assert parse("dueAfter=2026-12-08").due_after == int(
        datetime(2026, 12, 8).astimezone().timestamp() * 1000)  # a date: its local midnight


@pytest.mark.parametrize(("text", "says"), [
    ("", "at least one condition"),
    (" , ", "at least one condition"),
    ("definition", "expected field=value"),
    ("=x", "expected field=value"),
    ("owner=ann", "unknown field 'owner'; the fields are definition, version"),
    ("state=sleeping", "state must be one of parked, in_review, suspended, done, all"),
    ("tenant=a,tenant=b", "tenant is given twice"),
    ("tenant=", "tenant has no value"),
    ("parkedBefore=yesterday", "parkedBefore must be an ISO 8601 date and time"),
    ("parkedBefore=-P1M", "years or months"),
    ("parkedAfter=-P1D,parkedBefore=-P2D", "nothing is parkedAfter"),
    ("key=" + "k" * 1100, "key: Expected a wait key of at most 1024 bytes"),
])
def test_a_bad_filter_is_refused_naming_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(InvalidRequest, match="--where") as caught:
        parse(text)
    assert says in str(caught.value)


def test_the_re_check_of_a_wait_takes_every_state_but_done_by_default() -> None:
    wait = {"key": "k1", "state": "parked", "definition": "d", "tenant": None,
            "parkedAt": NOW, "nextDueAt": NOW + 5, "definitionVersion": "v1"}
    assert parse("definition=d").matches(wait)
    assert not parse("definition=d").matches({**wait, "state": "done"})
    assert parse("definition=d,state=all").matches({**wait, "state": "done"})
    assert not parse("definition=e").matches(wait)
    assert parse("version=v1").matches(wait) and not parse("version=v2").matches(wait)
    assert parse("key=k").matches(wait) and not parse("key=x").matches(wait)
    assert not parse("tenant=acme").matches(wait)
    suspended = {**wait, "state": "suspended", "nextDueAt": None}
    assert not parse("dueBefore=PT1H").matches(suspended), "nothing is due while suspended"
    assert parse("state=suspended").matches(suspended)


@given(st.integers(NOW - 3 * DAY, NOW + 3 * DAY), st.sampled_from(["-P1D", "PT0.5S", "P1D"]),
       st.sampled_from(["-P2D", "-PT1S", "PT1H"]))
def test_before_and_after_mean_the_same_to_the_api_and_to_the_re_check(
    at: int, before: str, after: str,
) -> None:
    """The list API's inclusive bounds (parkedFrom/parkedTo) select exactly the waits the
    half-open range of the filter does, to the millisecond."""
    for name, api in (("parked", "parked"), ("due", "due")):
        try:
            where = parse(f"{name}After={after},{name}Before={before}")
        except InvalidRequest:
            continue  # an empty range
        q = where.query()
        by_api = int(q[f"{api}From"]) <= at <= int(q[f"{api}To"])
        wait = {"state": "parked", "parkedAt": at, "nextDueAt": at}
        assert where.matches(wait) == by_api


def test_the_fields_are_the_documented_ones() -> None:
    assert FIELDS == ("definition", "version", "state", "tenant", "key", "parkedAfter",
                      "parkedBefore", "dueAfter", "dueBefore")
