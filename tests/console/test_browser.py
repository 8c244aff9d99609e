"""The ops console in a real headless Chromium (Debian's package, driven by Playwright).

No browser is downloaded: Playwright drives /usr/bin/chromium (`make browser`
installs it; without it these tests are skipped, with a line that says so).
The page talks to the real workers, which talk to Kafka.  Each test writes
screenshots of what an operator sees to `.xwait/screenshots/`.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.console.chromium import chromium, tab
from tests.console.conftest import (
    TOKEN,
    Cluster,
    eventually,
    http,
    needs_processor_mapping,
    new_key,
)

pytestmark = pytest.mark.kafka

# What an `expect` waits for the page to show (Playwright's own default is 5 s): beside
# two CPU hogs the console took longer than 5 s to show a wait just opened.  Checks that
# poll on purpose pass a short timeout of their own.
expect.set_options(timeout=30_000)
SHOTS = Path(__file__).resolve().parents[2] / ".xwait" / "screenshots"
RAW_MS = re.compile(r"\b1[6-9]\d{11}\b")  # an epoch-millisecond number, as shown by mistake


@pytest.fixture(scope="module")
def browser(cluster: Cluster) -> Iterator[Browser]:
    with chromium() as b:
        SHOTS.mkdir(parents=True, exist_ok=True)
        yield b


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    with tab(browser, 1280, 900) as (pg, errors):
        yield pg
    # The CSP lets the page's own script and style run, and nothing else is needed.
    assert not [e for e in errors if "Content Security Policy" in e], errors


def shot(page: Page, name: str) -> None:
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def until_state(page: Page, state: str, timeout: float = 60) -> None:
    """Reload the open wait until it shows `state` (commands take effect through Kafka)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            expect(page.locator("#d-state")).to_have_text(state, timeout=2000)
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            page.locator("#btn-reload").click()


def until_trace(page: Page, text: str, timeout: float = 60) -> None:
    """Reload the open wait until its trace has an entry with `text`."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            expect(page.locator("#timeline li", has_text=text).first).to_be_visible(
                timeout=2000)
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            page.locator("#btn-reload").click()


def sign_in(page: Page, cluster: Cluster, operator: str | None = None) -> None:
    page.goto(f"{cluster.w1.url}/xwait/console")
    expect(page).to_have_title("xwait console")
    page.fill("#token", TOKEN)
    page.click("#save-token")
    if operator is not None:
        page.fill("#operator", operator)
        page.locator("#operator").dispatch_event("change")


def open_parked(page: Page, key: str) -> None:
    """Open the parked wait of that key by the form, and see it shown as parked."""
    page.fill("#open-key", key)
    page.click("#open-form button")
    expect(page.locator("#d-state")).to_have_text("parked")


def open_a_parked_wait(page: Page, cluster: Cluster, operator: str) -> str:
    """A fresh wait, parked, open in the console of an operator signed in: its key."""
    key = new_key()
    cluster.start(key)
    cluster.wait_state(key, "parked")
    sign_in(page, cluster, operator=operator)
    open_parked(page, key)
    return key


def test_list_open_suspend_resume_and_review_in_the_browser(cluster: Cluster,
                                                            page: Page) -> None:
    pg = page
    tenant = f"ui-{uuid.uuid4().hex[:8]}"
    key, reviewed = new_key(), new_key()
    cluster.start(key, tenant=tenant, payload='{"expense": 42, "amount": 120}')
    cluster.start(reviewed, tenant=tenant)
    cluster.wait_state(key, "parked")
    cluster.wait_state(reviewed, "parked")
    cluster.client.reply(reviewed, {"decision": "perhaps"}, tenant=tenant)
    cluster.client.flush()
    cluster.wait_state(reviewed, "in_review")

    # Without the token nothing is listed: reads need it too.
    pg.goto(f"{cluster.w1.url}/xwait/console")
    expect(pg.locator("#error")).to_contain_text("401")
    expect(pg.locator("#waits tr")).to_have_count(0)
    pg.fill("#token", TOKEN)
    pg.click("#save-token")

    # The list, filtered by tenant, both workers merged.
    pg.fill("#f-tenant", tenant)
    pg.click("#refresh")
    expect(pg.locator(f'#waits tr[data-key="{key}"]')).to_be_visible()
    expect(pg.locator(f'#waits tr[data-key="{reviewed}"]')).to_contain_text("in_review")

    # Open a wait: its status, payload, dates (never raw milliseconds), its trace.
    pg.locator(f'#waits tr[data-key="{key}"] button').click()
    expect(pg.locator("#d-state")).to_have_text("parked")
    expect(pg.locator("#timeline li").first).to_be_visible()
    expect(pg.locator("#facts")).to_contain_text(tenant)
    expect(pg.locator("#facts .payload")).to_have_text('{"expense": 42, "amount": 120}')
    assert not RAW_MS.search(pg.locator("#detail").inner_text())
    shot(pg, "console-parked")

    # The first command asks who the operator is, once; the trace then names them.
    pg.fill("#cmd-reason", "waiting for the auditor")
    pg.click("#btn-suspend")
    expect(pg.locator("#who")).to_be_visible()
    pg.fill("#who-name", "Petra Operator")
    pg.click("#who-ok")
    expect(pg.locator("#message")).to_contain_text("suspend accepted")
    until_state(pg, "suspended")
    expect(pg.locator("#facts")).to_contain_text("waiting for the auditor")
    expect(pg.locator("#facts")).to_contain_text("left on resume: deadline")
    expect(pg.locator("#timeline")).to_contain_text("by Petra Operator")
    expect(pg.locator("#btn-resume")).to_be_enabled()
    expect(pg.locator("#btn-suspend")).to_be_disabled()
    pg.click("#btn-resume")  # not asked again
    expect(pg.locator("#message")).to_contain_text("resume accepted")
    until_state(pg, "parked")

    # The review queue: answer with Accept and a note, then see the result.
    pg.click("#review-refresh")
    row = pg.locator(f'#in-review tr[data-key="{reviewed}"]')
    expect(row).to_be_visible()
    note = row.locator(".review-note")
    note.fill("checked with the manager")
    # The queue refreshes itself after every answer (and on the token, the
    # button): a refresh while the operator types keeps the field and its focus.
    pg.evaluate("loadReview()")
    expect(note).to_be_focused()
    expect(note).to_have_value("checked with the manager")
    row.locator(".review-accept").click()
    expect(pg.locator("#message")).to_contain_text("review accepted")
    # The review opened the wait; done, it leaves the list of waits not done.
    expect(pg.locator("#open-key")).to_have_value(reviewed)
    until_state(pg, "done")
    expect(pg.locator(f'#waits tr[data-key="{reviewed}"]')).to_have_count(0)
    expect(pg.locator("#facts")).to_contain_text("review_accepted")
    expect(pg.locator("#facts")).to_contain_text("checked with the manager")
    pg.click("#review-refresh")
    expect(pg.locator(f'#in-review tr[data-key="{reviewed}"]')).to_have_count(0)


def test_investigate_finished_waits_confirm_a_cancel_and_clear_a_missing_wait(
        cluster: Cluster, page: Page) -> None:
    pg = page
    prefix = f"inv{uuid.uuid4().hex[:6]}-"
    keep, cancel, delivered = (prefix + new_key() for _ in range(3))
    chained = prefix + new_key()
    for key in (keep, cancel, delivered):
        cluster.start(key, tenant="acme")
    cluster.start(chained, "fast-two-stage", tenant="acme")
    for key in (keep, cancel, delivered, chained):
        cluster.wait_state(key, "parked")
    http("POST", f"{cluster.w1.url}/xwait/api/waits/{delivered}/deliver",
         {"responseData": {"decision": "approved"}, "operator": "dora", "reason": "by phone"})
    cluster.wait_state(delivered, "done")
    sign_in(pg, cluster, operator="Quinn")

    # Search by key prefix: the open ones; the chained wait shows its stage and party.
    pg.fill("#f-key", prefix)
    pg.click("#refresh")
    expect(pg.locator("#waits tr")).to_have_count(3)
    expect(pg.locator(f'#waits tr[data-key="{chained}"] .stage')).to_contain_text(
        "1 of 2: manager (party manager)")

    # Finished waits: their outcome, response, operator and trace, purge time as a date.
    pg.select_option("#f-state", "done")
    pg.click("#refresh")
    expect(pg.locator("#waits tr")).to_have_count(1)
    pg.locator(f'#waits tr[data-key="{delivered}"] button').click()
    expect(pg.locator("#d-state")).to_have_text("done")
    facts = pg.locator("#facts")
    expect(facts).to_contain_text("RECEIVED (delivered)")
    expect(facts).to_contain_text("dora: by phone")
    expect(facts.locator(".response")).to_have_text('{"decision":"approved"}')
    expect(facts).to_contain_text("Kept until")
    expect(pg.locator("#timeline")).to_contain_text("ended")
    assert not RAW_MS.search(pg.locator("#detail").inner_text())
    # Nothing can be done to a finished wait, and the buttons look it.
    for button in ("#btn-suspend", "#btn-cancel", "#btn-deliver", "#btn-reschedule"):
        expect(pg.locator(button)).to_be_disabled()
        expect(pg.locator(button)).to_have_css("cursor", "not-allowed")
    enabled = pg.locator("#btn-reload").evaluate("b => getComputedStyle(b).color")
    disabled = pg.locator("#btn-cancel").evaluate("b => getComputedStyle(b).color")
    assert enabled != disabled
    shot(pg, "console-finished")

    # Cancel asks first: "Keep it" changes nothing, confirming cancels.
    open_parked(pg, cancel)
    pg.fill("#cmd-reason", "duplicate expense")
    pg.click("#btn-cancel")
    expect(pg.locator("#confirm")).to_be_visible()
    expect(pg.locator("#confirm-text")).to_contain_text("duplicate expense")
    shot(pg, "console-confirm-cancel")
    pg.click("#confirm-no")
    expect(pg.locator("#confirm")).to_be_hidden()
    # Nothing was sent: no "accepted", and the reason is still there for the real cancel.
    expect(pg.locator("#message")).not_to_contain_text("cancel accepted")
    expect(pg.locator("#cmd-reason")).to_have_value("duplicate expense")
    pg.click("#btn-reload")
    expect(pg.locator("#d-state")).to_have_text("parked")
    pg.click("#btn-cancel")
    pg.click("#confirm-yes")
    expect(pg.locator("#message")).to_contain_text("cancel accepted")
    until_state(pg, "done")
    expect(pg.locator("#facts")).to_contain_text("CANCELLED (cancelled_by_operator)")
    expect(pg.locator("#facts")).to_contain_text("Quinn: duplicate expense")

    # Search by outcome finds it; auto-refresh picks up a change made elsewhere.
    pg.select_option("#f-outcome", "CANCELLED")
    pg.click("#refresh")
    expect(pg.locator("#waits tr")).to_have_count(1)
    pg.select_option("#f-outcome", "")
    pg.select_option("#f-state", "")
    pg.check("#auto")
    pg.click("#refresh")
    expect(pg.locator(f'#waits tr[data-key="{keep}"]')).to_contain_text("parked")
    http("POST", f"{cluster.w2.url}/xwait/api/waits/{keep}/suspend",
         {"reason": "elsewhere", "operator": "zed"})
    expect(pg.locator(f'#waits tr[data-key="{keep}"]')).to_contain_text("suspended",
                                                                         timeout=30_000)
    pg.uncheck("#auto")

    # A key that does not exist: the error says so and the old detail is gone.
    pg.fill("#open-key", "no-such-" + new_key())
    pg.click("#open-form button")
    expect(pg.locator("#error")).to_contain_text("404")
    expect(pg.locator("#detail-body")).to_be_hidden()
    expect(pg.locator("#facts dd")).to_have_count(0)


def test_pages_of_results_and_a_usable_layout_at_800_pixels(cluster: Cluster,
                                                            page: Page) -> None:
    pg = page
    prefix = f"pg{uuid.uuid4().hex[:6]}-"
    keys = [prefix + new_key() for _ in range(12)]
    for i, key in enumerate(keys):
        cluster.client.start(key, "slow-approval", deadline=f"PT{20 + i}M")
    cluster.client.flush()
    eventually(lambda: http("GET", f"{cluster.w1.url}/xwait/api/waits?key={prefix}"),
               lambda r: r[0] == 200 and r[1]["count"] == 12, 60, "twelve waits listed")
    pg.set_viewport_size({"width": 800, "height": 900})
    sign_in(pg, cluster)
    pg.fill("#f-key", prefix)
    pg.select_option("#f-limit", "10")
    pg.click("#refresh")
    expect(pg.locator("#waits tr")).to_have_count(10)
    expect(pg.locator("#waits tr").first).to_have_attribute("data-key", keys[0])
    shot(pg, "console-800px")
    pg.click("#page-next")
    expect(pg.locator("#waits tr")).to_have_count(2)
    expect(pg.locator("#waits tr").first).to_have_attribute("data-key", keys[10])
    expect(pg.locator("#page-next")).to_be_disabled()
    expect(pg.locator("#page-info")).to_have_text("page 2")
    pg.click("#page-first")
    expect(pg.locator("#waits tr")).to_have_count(10)
    # Nothing wider than the window: every control reachable without sideways scrolling.
    width = pg.evaluate("document.documentElement.scrollWidth")
    assert width <= 800, width
    pg.locator(f'#waits tr[data-key="{keys[0]}"] button').click()
    expect(pg.locator("#d-state")).to_have_text("parked")
    box = pg.locator("#btn-reschedule").bounding_box()
    assert box is not None and box["x"] + box["width"] <= 800
    shot(pg, "console-800px-detail")


@needs_processor_mapping
def test_reschedule_from_the_console(cluster: Cluster, page: Page) -> None:
    open_a_parked_wait(page, cluster, "Rita")
    page.select_option("#resched-mode", "moveBy")
    page.fill("#resched-value", "PT30M")
    page.fill("#cmd-reason", "vendor on holiday")
    page.click("#btn-reschedule")
    expect(page.locator("#message")).to_contain_text("reschedule accepted")
    until_trace(page, "rescheduled")
    expect(page.locator("#timeline")).to_contain_text("+30 min): vendor on holiday (by Rita)")
    shot(page, "console-rescheduled")


@needs_processor_mapping
def test_a_reason_goes_with_one_command_only_never_into_the_next_ones_trace(
        cluster: Cluster, page: Page) -> None:
    """Issue 31: a reschedule was recorded with the reason of the suspend before it."""
    open_a_parked_wait(page, cluster, "Nina")

    # A suspend needs a reason: without one nothing is sent, and the page says why.
    page.click("#btn-suspend")
    expect(page.locator("#error")).to_contain_text("needs a reason")
    page.fill("#cmd-reason", "waiting for the vendor")
    page.click("#btn-suspend")
    expect(page.locator("#message")).to_contain_text("suspend accepted")
    # Sent, the reason is gone from the box: it belonged to that command.
    expect(page.locator("#cmd-reason")).to_have_value("")
    until_state(page, "suspended")
    expect(page.locator("#facts")).to_contain_text("reason: waiting for the vendor")

    # The next command, without a reason typed, carries none.
    page.select_option("#resched-mode", "moveBy")
    page.fill("#resched-value", "PT30M")
    page.click("#btn-reschedule")
    expect(page.locator("#message")).to_contain_text("reschedule accepted")
    until_trace(page, "rescheduled")
    rescheduled = page.locator("#timeline li", has_text="rescheduled")
    expect(rescheduled).to_contain_text("(by Nina)")
    expect(rescheduled).not_to_contain_text("waiting for the vendor")
    shot(page, "console-reason-per-command")

    # Opening another wait empties a reason typed for this one.
    other = new_key()
    cluster.start(other)
    cluster.wait_state(other, "parked")
    page.fill("#cmd-reason", "meant for the first wait")
    page.fill("#open-key", other)
    # A refresh of the open wait meanwhile (the page's own, after a command or
    # every few seconds) leaves the key being typed alone: it put the open
    # wait's key back, and the click opened the suspended wait again.
    page.click("#btn-reload")
    expect(page.locator("#open-key")).to_have_value(other)
    page.click("#open-form button")
    expect(page.locator("#d-state")).to_have_text("parked")
    expect(page.locator("#cmd-reason")).to_have_value("")


def test_a_bulk_action_from_the_filtered_list_shows_the_count_before_it_sends(
        cluster: Cluster, page: Page) -> None:
    pg = page
    tenant = f"bulk-{uuid.uuid4().hex[:8]}"
    keys = [new_key() for _ in range(5)]
    for key in keys:
        cluster.start(key, tenant=tenant)
    other = new_key()
    cluster.start(other, tenant=f"{tenant}-not")
    for key in (*keys, other):
        cluster.wait_state(key, "parked")
    sign_in(pg, cluster, operator="Bea")
    pg.fill("#f-tenant", tenant)
    pg.click("#refresh")
    expect(pg.locator("#waits tr")).to_have_count(5)

    # Without a reason, nothing is asked and nothing is sent.
    pg.select_option("#bulk-command", "suspend")
    pg.click("#bulk-go")
    expect(pg.locator("#error")).to_contain_text("needs a reason")
    pg.fill("#bulk-reason", "quarterly audit")

    # The confirmation shows the count; "Send nothing" changes nothing.
    pg.click("#bulk-go")
    expect(pg.locator("#bulk-confirm")).to_be_visible()
    expect(pg.locator("#bulk-h")).to_have_text("Suspend 5 waits?")
    expect(pg.locator("#bulk-text")).to_contain_text(f"tenant={tenant}")
    expect(pg.locator("#bulk-text")).to_contain_text("quarterly audit")
    expect(pg.locator("#bulk-sample li")).to_have_count(5)
    shot(pg, "console-bulk-confirm")
    pg.click("#bulk-no")
    expect(pg.locator("#bulk-confirm")).to_be_hidden()
    expect(pg.locator("#message")).to_contain_text("nothing sent")
    assert all(cluster.status(k)[1]["state"] == "parked" for k in keys)

    # Confirmed: every wait of the filter is suspended, the summary says so, the list too.
    pg.click("#bulk-go")
    pg.click("#bulk-yes")
    expect(pg.locator("#message")).to_contain_text("5 of 5 done; applied 5, skipped 0, "
                                                   "refused 0", timeout=90_000)
    for key in keys:
        cluster.wait_state(key, "suspended")
    assert cluster.status(other)[1]["state"] == "parked", "another tenant's wait"
    expect(pg.locator("#waits tr", has_text="suspended")).to_have_count(5)
    pg.locator(f'#waits tr[data-key="{keys[0]}"] button').click()
    expect(pg.locator("#timeline")).to_contain_text("quarterly audit (by Bea, operation suspend-")
    shot(pg, "console-bulk-done")

    # Filters only finished waits have are refused before anything is asked.
    pg.select_option("#f-state", "done")
    pg.click("#bulk-go")
    expect(pg.locator("#error")).to_contain_text("acts on waits not done")
