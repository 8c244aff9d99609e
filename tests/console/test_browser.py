"""The ops console in a real headless Chromium (Debian's package, driven by Playwright).

No browser is downloaded: Playwright drives /usr/bin/chromium (`make browser`
installs it).  The page talks to the real workers, which talk to Kafka.
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect, sync_playwright

from tests.console.conftest import TOKEN, Cluster, new_key

pytestmark = pytest.mark.kafka

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
TIMEOUT_MS = 60_000


@pytest.fixture(scope="module")
def page(cluster: Cluster) -> Iterator[Page]:
    if not CHROMIUM.exists() and shutil.which("chromium") is None:
        pytest.fail("no /usr/bin/chromium: run `make browser` (apt-get install chromium)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            pg = browser.new_page()
            pg.set_default_timeout(TIMEOUT_MS)
            yield pg
        finally:
            browser.close()


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


def test_list_open_suspend_resume_and_review_in_the_browser(cluster: Cluster,
                                                            page: Page) -> None:
    pg = page
    tenant = f"ui-{uuid.uuid4().hex[:8]}"
    key, reviewed = new_key(), new_key()
    cluster.start(key, tenant=tenant)
    cluster.start(reviewed, tenant=tenant)
    cluster.wait_state(key, "parked")
    cluster.wait_state(reviewed, "parked")
    cluster.client.reply(reviewed, {"decision": "perhaps"}, tenant=tenant)
    cluster.client.flush()
    cluster.wait_state(reviewed, "in_review")

    pg.goto(f"{cluster.w1.url}/xwait/console")
    expect(pg).to_have_title("xwait console")
    # The list, filtered by tenant, both workers merged.
    pg.fill("#f-tenant", tenant)
    pg.click("#refresh")
    expect(pg.locator(f'#waits tr[data-key="{key}"]')).to_be_visible()
    expect(pg.locator(f'#waits tr[data-key="{reviewed}"]')).to_contain_text("in_review")

    # Open a wait: its status and its trace as a timeline.
    pg.locator(f'#waits tr[data-key="{key}"] button').click()
    expect(pg.locator("#d-state")).to_have_text("parked")
    expect(pg.locator("#timeline li").first).to_be_visible()
    expect(pg.locator("#facts")).to_contain_text(tenant)

    # Without the token the command is refused, visibly, and nothing changes.
    pg.click("#btn-suspend")
    expect(pg.locator("#error")).to_contain_text("401")
    expect(pg.locator("#d-state")).to_have_text("parked")

    # With the token: suspend, then resume.
    pg.fill("#token", TOKEN)
    pg.click("#save-token")
    pg.fill("#cmd-reason", "waiting for the auditor")
    pg.click("#btn-suspend")
    expect(pg.locator("#message")).to_contain_text("suspend accepted")
    until_state(pg, "suspended")
    expect(pg.locator("#facts")).to_contain_text("waiting for the auditor")
    expect(pg.locator("#btn-resume")).to_be_enabled()
    pg.click("#btn-resume")
    expect(pg.locator("#message")).to_contain_text("resume accepted")
    until_state(pg, "parked")

    # The review queue: answer with Accept and a note, then see the result.
    pg.click("#review-refresh")
    row = pg.locator(f'#in-review tr[data-key="{reviewed}"]')
    expect(row).to_be_visible()
    row.locator(".review-note").fill("checked with the manager")
    row.locator(".review-accept").click()
    expect(pg.locator("#message")).to_contain_text("review accepted")
    until_state(pg, "done")
    expect(pg.locator("#facts")).to_contain_text("review_accepted")
    pg.click("#review-refresh")
    expect(pg.locator(f'#in-review tr[data-key="{reviewed}"]')).to_have_count(0)
