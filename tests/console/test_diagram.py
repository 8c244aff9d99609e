"""Each definition drawn as its BPMN diagram in the console, with live counts on its nodes.

Real workers, a real broker, Debian's Chromium through Playwright: the page
draws the diagram with the vendored bpmn-js, the badges count what the
waits did, and a click lists the waits a badge counts.  Screenshots go to
the test's tmp folder.
"""

from __future__ import annotations

import re
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from streams.console.diagram import BPMN_JS_VERSION, STATIC_PREFIX
from tests.console.conftest import READ_TOKEN, TOKEN, Cluster, eventually, http, http_full
from tests.console.test_browser import ARGS, CHROMIUM, TIMEOUT_MS

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def browser(cluster: Cluster) -> Iterator[Browser]:
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    pg.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.on("requestfailed", lambda r: errors.append(f"request failed: {r.url}"))
    pg.on("pageerror", lambda e: errors.append(str(e)))
    try:
        yield pg
    finally:
        context.close()
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
    assert len(body["workers"]) == 2
    assert set(body["census"]) == {"parked", "in_review", "suspended", "done"}
    # Reads need a token; unknown names are 404 with what there is.
    assert http("GET", f"{cluster.w1.url}/xwait/api/definitions", token=None)[0] == 401
    status, missing = http("GET", f"{cluster.w1.url}/xwait/api/definitions/nope")
    assert status == 404 and "fast-approval" in missing["error"]
    # The viewer is served by the worker itself, versioned and cached.
    status, headers, js = http_full(
        "GET", f"{cluster.w1.url}{STATIC_PREFIX}/bpmn-viewer.production.min.js", token=None)
    assert status == 200 and headers["Content-Type"].startswith("text/javascript")
    assert f"v{BPMN_JS_VERSION}" in js[:200] and "immutable" in headers["Cache-Control"]
    assert http("GET", f"{cluster.w1.url}{STATIC_PREFIX}/../api/waits", token=None)[0] == 404


def test_the_diagram_shows_where_waits_stand_and_a_click_lists_them(
        cluster: Cluster, page: Page, tmp_path: Path) -> None:
    tenant = f"dg-{uuid.uuid4().hex[:8]}"
    received, review, escalated = (f"{tenant}-{n}" for n in ("ok", "bad", "late"))
    before = diagram(cluster, "fast-approval")
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

    def grew(body: dict) -> bool:  # type: ignore[type-arg]
        return all(badge(body, node, label) > badge(before, node, label)
                   for node, label in (("send_reminder", "reminders (1 h)"),
                                       ("run_escalation", "escalations (1 h)"),
                                       ("end_received", "reply_valid (1 h)"),
                                       ("end_escalated", "deadline_exhausted (1 h)"),
                                       ("review_reply", "reviews (1 h)")))
    counts = eventually(lambda: diagram(cluster, "fast-approval"), grew, 30,
                        "the hour's counts to include this test's waits")
    assert badge(counts, "review_reply", "in review") >= 1

    pg = page
    pg.goto(f"{cluster.w1.url}/xwait/console")
    pg.fill("#token", TOKEN)
    pg.click("#save-token")
    pg.select_option("#def-select", "fast-approval")
    expect(pg.locator("#diagram .djs-container svg")).to_be_visible()
    expect(pg.locator('#diagram [data-element-id="wait"]')).to_be_visible()
    expect(pg.locator('#diagram [data-element-id="end_escalated"]')).to_be_visible()
    reviews = pg.locator('.badges[data-node="review_reply"] .badge[data-label="in review"]')
    expect(reviews).to_contain_text("in review")
    # Waited for: the badge is drawn before the counts of the definition just chosen
    # arrive (a clean-clone run read "0 in review" at once, the API said 1).
    expect(reviews).to_have_text(re.compile(r"^[1-9][0-9]* in review$"))
    assert int(reviews.inner_text().split()[0]) >= 1
    expect(pg.locator('.badges[data-node="send_reminder"] .badge')).not_to_have_class("zero")
    expect(pg.locator("#diagram-info")).to_contain_text("from 2 worker(s)")
    pg.screenshot(path=str(tmp_path / "console-diagram.png"), full_page=False)

    # A click on the review count lists the waits in review of this definition.
    reviews.click()
    pg.fill("#f-tenant", tenant)
    pg.click("#refresh")
    expect(pg.locator("#waits tr")).to_have_count(1)
    expect(pg.locator(f'#waits tr[data-key="{review}"]')).to_contain_text("in_review")
    # A click on the escalated exit (the node itself) lists the waits that ended there.
    pg.locator('#diagram [data-element-id="end_escalated"]').click()
    expect(pg.locator("#f-outcome")).to_have_value("ESCALATED")
    pg.fill("#f-tenant", tenant)
    pg.click("#refresh")
    expect(pg.locator(f'#waits tr[data-key="{escalated}"]')).to_contain_text("ESCALATED")
    expect(pg.locator("#waits tr")).to_have_count(1)
    # Another definition: its own shape (a probe has no event-based gateway).
    pg.select_option("#def-select", "fast-probe")
    expect(pg.locator('#diagram [data-element-id="deadline_gate"]')).to_be_visible()
    expect(pg.locator('#diagram [data-element-id="wait"]')).to_have_count(0)
    pg.screenshot(path=str(tmp_path / "console-diagram-probe.png"), full_page=False)
