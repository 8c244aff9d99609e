"""Each definition drawn as its BPMN diagram in the console, with live counts on its nodes.

Real workers, a real broker, Debian's Chromium through Playwright: the page
draws the diagram with the vendored bpmn-js, the badges count where waits
stand and how they ended in the last hour (read from the stored rows: a
worker's restart changes nothing), a click lists exactly the waits a badge
counts, and a command taken in the console moves the counts by itself.
Screenshots go to the test's tmp folder.
"""

from __future__ import annotations

import re
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest
from playwright.sync_api import Browser, Page, expect

from streams.console.diagram import BPMN_JS_VERSION, STATIC_PREFIX, VIEWER
from tests.console.chromium import chromium, tab
from tests.console.conftest import READ_TOKEN, TOKEN, Cluster, eventually, http, http_full

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def browser(cluster: Cluster) -> Iterator[Browser]:
    with chromium() as b:
        yield b


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    with tab(browser, 1400, 1000, page_errors=True, failed_requests=True) as (pg, errors):
        yield pg
    # The viewer runs under the page's Content-Security-Policy, and throws nothing.
    # (The page's first reads, before the token is entered, are refused: 401.)
    assert [e for e in errors if "Failed to load resource" not in e] == []


def diagram(cluster: Cluster, name: str, token: str = READ_TOKEN) -> dict:  # type: ignore[type-arg]
    status, body = http("GET", f"{cluster.w1.url}/xwait/api/definitions/{name}", token=token)
    assert status == 200, body
    return body  # type: ignore[no-any-return]


def badge(body: dict, node: str, label: str) -> int:  # type: ignore[type-arg]
    return sum(b["count"] for b in body["nodes"].get(node, []) if b["label"] == label)


def test_the_api_gives_each_definitions_bpmn_and_its_counts(cluster: Cluster) -> None:
    status, listed = http("GET", f"{cluster.w2.url}/xwait/api/definitions", token=READ_TOKEN)
    assert status == 200
    assert {"fast-approval", "fast-probe", "fast-two-stage"} <= \
        {d["name"] for d in listed["definitions"]}
    body = diagram(cluster, "fast-approval")
    root = ET.fromstring(body["bpmn"])  # noqa: S314 - the worker's own export
    assert root.tag.endswith("definitions") and 'id="end_escalated"' in body["bpmn"]
    assert body["windowSeconds"] == 3600 and body["complete"] is True
    assert body["window"]["to"] - body["window"]["from"] == 3_600_000
    assert len(body["workers"]) == 2
    assert set(body["census"]) == {"parked", "in_review", "suspended", "done"}
    # Reads need a token; unknown names are 404 with what there is.
    assert http("GET", f"{cluster.w1.url}/xwait/api/definitions", token=None)[0] == 401
    status, missing = http("GET", f"{cluster.w1.url}/xwait/api/definitions/nope")
    assert status == 404 and "fast-approval" in missing["error"]
    # The viewer is served by the worker itself, versioned and cached.
    status, headers, js = http_full(
        "GET", f"{cluster.w1.url}{STATIC_PREFIX}/{VIEWER}", token=None)
    assert status == 200 and headers["Content-Type"].startswith("text/javascript")
    assert f"v{BPMN_JS_VERSION}" in js[:200] and "immutable" in headers["Cache-Control"]
    assert http("GET", f"{cluster.w1.url}{STATIC_PREFIX}/../api/waits", token=None)[0] == 404


def listed(cluster: Cluster, name: str, query: dict[str, str]) -> list[str]:
    """The keys the console's list shows for a badge's query (every page)."""
    keys: list[str] = []
    after = None
    while True:
        q = {"definition": name, **query, "limit": "1000"}
        if after:
            q["after"] = after
        status, body = http("GET", f"{cluster.w1.url}/xwait/api/waits?{urlencode(q)}",
                            token=READ_TOKEN)
        assert status == 200 and body["complete"], body
        keys += [w["key"] for w in body["waits"]]
        after = body["next"]
        if not after:
            return keys


def hour_badges(body: dict) -> list[dict]:  # type: ignore[type-arg]
    """Every count of the hour: on the end events, and beside the diagram."""
    on_nodes = [b for bs in body["nodes"].values() for b in bs if "endedFrom" in b["list"]]
    beside: list[dict] = body["exits"]  # type: ignore[type-arg]
    return on_nodes + beside


def assert_counts_are_what_clicks_list(cluster: Cluster, name: str) -> dict:  # type: ignore[type-arg]
    body = diagram(cluster, name)
    for b in hour_badges(body):
        assert b["count"] == len(listed(cluster, name, b["list"])), b
    return body


def ended(cluster: Cluster, *keys: str) -> None:
    for key in keys:
        cluster.wait_state(key, "done", timeout=90)


def test_the_hours_counts_are_what_a_click_lists_and_survive_a_restart(
        cluster: Cluster) -> None:
    # Waits ended on both workers (a key's partition says which), by several exits.
    tenant = f"rs-{uuid.uuid4().hex[:8]}"
    keys = {w: [] for w in ("w1", "w2")}  # type: dict[str, list[str]]
    received: list[str] = []
    while min(len(v) for v in keys.values()) < 2:
        key = f"{tenant}-{uuid.uuid4().hex[:6]}"
        owner = "w1" if cluster.owner(key) is cluster.w1 else "w2"
        if len(keys[owner]) < 2:
            keys[owner].append(key)
            cluster.start(key, "fast-approval", tenant=tenant)
    for key in keys["w1"][:1] + keys["w2"][:1]:
        cluster.wait_state(key, "parked")
        cluster.client.reply(key, {"decision": "approved"}, tenant=tenant)
        received.append(key)
    cancelled = [keys["w1"][1], keys["w2"][1]]
    for key in cancelled:
        cluster.wait_state(key, "parked")
        cluster.client.command(key, "CANCEL", reason="test", operator="t")
    cluster.client.flush()
    ended(cluster, *received, *cancelled)

    before = assert_counts_are_what_clicks_list(cluster, "fast-approval")
    mine_received = {"tenant": tenant, "state": "done", "outcome": "RECEIVED"}
    assert sorted(listed(cluster, "fast-approval", mine_received)) == sorted(received)

    def counts(body: dict) -> dict[str, int]:  # type: ignore[type-arg]
        return {b["label"]: b["count"] for b in body["exits"]}

    mine = {"received (1 h)": 2, "cancelled (1 h)": 2}
    assert all(counts(before)[label] >= n for label, n in mine.items()), counts(before)

    # w2 restarts: what it counted lives in its rows, not in its memory.
    cluster.w2.stop()
    cluster.w2.start(wait_owned=False)
    for w in cluster.workers:
        w.wait_until(lambda st: len(st["ownedPartitions"]) == 2, 120,
                     "did not settle on 2 of 4 partitions after the restart")
    eventually(lambda: diagram(cluster, "fast-approval"),
               lambda b: len(b["workers"]) == 2 and b["complete"], 60,
               "both workers answering the diagram again")
    after = assert_counts_are_what_clicks_list(cluster, "fast-approval")
    assert all(counts(after)[label] >= counts(before)[label] for label in mine), \
        (counts(before), counts(after))
    for key in received:  # each still listed by the count that includes it
        badge_ = next(b for b in after["nodes"]["end_received"]
                      if b["list"].get("reason") == "reply_valid")
        assert key in listed(cluster, "fast-approval", badge_["list"])


def test_the_diagram_shows_where_waits_stand_and_a_click_lists_them(
        cluster: Cluster, page: Page, tmp_path: Path) -> None:
    tenant = f"dg-{uuid.uuid4().hex[:8]}"
    received, review, escalated = (f"{tenant}-{n}" for n in ("ok", "bad", "late"))
    for key in (received, review, escalated):
        cluster.start(key, "fast-approval", tenant=tenant)
    for key in (received, review):
        cluster.wait_state(key, "parked")
    cluster.client.reply(received, {"decision": "approved"}, tenant=tenant)
    cluster.client.reply(review, {"decision": "perhaps"}, tenant=tenant)
    cluster.client.flush()
    cluster.wait_state(received, "done")
    cluster.wait_state(review, "in_review")
    cluster.wait_state(escalated, "done", timeout=90)  # reminders, deadline, director, end
    counts = assert_counts_are_what_clicks_list(cluster, "fast-approval")
    assert badge(counts, "review_reply", "in review") >= 1
    assert badge(counts, "end_escalated", "deadline_exhausted (1 h)") >= 1

    pg = page
    pg.goto(f"{cluster.w1.url}/xwait/console")
    pg.fill("#token", TOKEN)
    pg.click("#save-token")
    pg.fill("#operator", "Dora Diagram")
    pg.locator("#operator").dispatch_event("change")
    pg.select_option("#def-select", "fast-approval")
    expect(pg.locator("#diagram .djs-container svg")).to_be_visible()
    expect(pg.locator('#diagram [data-element-id="wait"]')).to_be_visible()
    expect(pg.locator('#diagram [data-element-id="end_escalated"]')).to_be_visible()
    reviews = pg.locator('.badges[data-node="review_reply"] .badge[data-label="in review"]')
    # Waited for: the badge is drawn before the counts of the definition just chosen
    # arrive (a clean-clone run read "0 in review" at once, the API said 1).
    expect(reviews).to_have_text(re.compile(r"^[1-9][0-9]* in review$"))
    expect(pg.locator("#diagram-info")).to_contain_text("from 2 worker(s)")

    # Each exit in its own colour: on the diagram, its badges, and the legend.
    def colour(selector: str, prop: str) -> str:
        return str(pg.locator(selector).first.evaluate(
            f"(e) => getComputedStyle(e).{prop}"))
    tones = {t: colour(f'#exits .badge[data-tone="{t}"]', "borderTopColor")
             for t in ("received", "escalated", "send_failed", "cancelled")}
    tones["now"] = colour(".badge.tone-now", "borderTopColor")
    assert len(set(tones.values())) == 5, tones
    ends = {t: colour(f'#diagram [data-element-id="end_{t}"] .djs-visual > circle', "stroke")
            for t in ("received", "escalated")}
    assert ends == {"received": tones["received"], "escalated": tones["escalated"]}
    assert colour('.badges[data-node="end_escalated"] .badge', "borderTopColor") == \
        tones["escalated"]
    pg.locator("#diagram").screenshot(path=str(tmp_path / "console-diagram.png"))

    # A click on the review count lists the waits in review of this definition.
    reviews.click()
    pg.fill("#f-tenant", tenant)
    pg.click("#refresh")
    expect(pg.locator("#waits tr")).to_have_count(1)
    expect(pg.locator(f'#waits tr[data-key="{review}"]')).to_contain_text("in_review")
    # A click on the escalated exit lists the waits that ended there in the hour it
    # counted, as many as it counted.
    shown = pg.locator('.badges[data-node="end_escalated"] .badge').first
    n = int(shown.inner_text().split()[0])
    shown.click()
    expect(pg.locator("#f-outcome")).to_have_value("ESCALATED")
    expect(pg.locator("#f-reason")).to_have_value("deadline_exhausted")
    expect(pg.locator("#f-ended-from")).not_to_have_value("")
    expect(pg.locator("#list-info")).to_have_text(re.compile(rf"^{n} wait\(s\) from 2 "))
    expect(pg.locator(f'#waits tr[data-key="{escalated}"]')).to_contain_text("ESCALATED")

    # Accepting the review in the console moves the counts without a Refresh.
    in_review = int(reviews.inner_text().split()[0])
    accepted = pg.locator('.badges[data-node="end_received"] .badge[data-label='
                          '"review_accepted (1 h)"]')
    before = int(accepted.inner_text().split()[0]) if accepted.count() else 0
    pg.click("#review-refresh")
    row = pg.locator(f'#in-review tr[data-key="{review}"]')
    row.locator(".review-note").fill("fine as it is")
    row.locator(".review-accept").click()
    expect(pg.locator("#message")).to_contain_text("review accepted")
    expect(reviews).to_have_text(f"{in_review - 1} in review")
    expect(accepted).to_have_text(f"{before + 1} review_accepted (1 h)")
    expect(row).to_have_count(0)

    # Another definition: its own shape (a probe has no event-based gateway).
    pg.select_option("#def-select", "fast-probe")
    expect(pg.locator('#diagram [data-element-id="deadline_gate"]')).to_be_visible()
    expect(pg.locator('#diagram [data-element-id="wait"]')).to_have_count(0)
    pg.screenshot(path=str(tmp_path / "console-diagram-probe.png"), full_page=False)


def test_the_list_refuses_an_end_filter_on_waits_not_done(cluster: Cluster) -> None:
    base = f"{cluster.w1.url}/xwait/api/waits?"
    status, body = http("GET", base + "state=parked&endedFrom=0", token=READ_TOKEN)
    assert status == 400 and "finished waits" in body["error"]
    status, body = http("GET", base + "reason=bored", token=READ_TOKEN)
    assert status == 400 and "send_failed" in body["error"]
    status, body = http("GET", f"{cluster.w1.url}/xwait/api/definitions/fast-approval?local=1",
                        token=READ_TOKEN)
    assert status == 400 and "endedFrom" in body["error"]
