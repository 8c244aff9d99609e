"""The console's browser tests' Chromium: Debian's package, driven by Playwright.

No browser is downloaded: Playwright drives /usr/bin/chromium (`make browser`
installs it; without it every browser test is skipped, with a line that says so).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
TIMEOUT_MS = 60_000


@contextmanager
def chromium() -> Iterator[Browser]:
    """A headless Chromium for a test module, closed after it; the test skipped without one."""
    if not CHROMIUM.exists():
        # `make test` installs it only as root without a terminal (CI); elsewhere it
        # said so before the suite, and each browser test is skipped with this line.
        pytest.skip(f"no Chromium at {CHROMIUM}: install it (`make browser`, or `sudo "
                    "apt-get install chromium`) to run the console's browser tests")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield b
        finally:
            b.close()


@contextmanager
def tab(browser: Browser, width: int, height: int, *, page_errors: bool = False,
        failed_requests: bool = False) -> Iterator[tuple[Page, list[str]]]:
    """A page of its own (`width` x `height`) and the errors it logged to its console
    (with `page_errors`, the scripts' uncaught ones too; with `failed_requests`, requests
    that failed), for the test to judge after it."""
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    if page_errors:
        page.on("pageerror", lambda e: errors.append(str(e)))
    if failed_requests:
        page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url}"))
    try:
        yield page, errors
    finally:
        context.close()
