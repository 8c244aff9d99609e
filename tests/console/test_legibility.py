"""Every shipped definition's diagram is legible in the console on a 1280x800 screen.

Measured in Debian's Chromium, from the DOM: each label of the diagram (task
names, event and gateway labels, flow names) is drawn at least 11 px high on
the screen (its font size times the canvas's scale), no two labels overlap,
no line is drawn through a label, and a diagram larger than the view is
panned and zoomed rather than shrunk.  Screenshots of what was measured go
to the test's tmp folder (named in the output, for a person to look at).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.console.chromium import chromium, tab
from tests.console.conftest import READ_TOKEN, SHIPPED, Cluster

pytestmark = pytest.mark.kafka

NAMES = sorted(p.stem for p in SHIPPED.glob("*.yaml"))
MIN_PX = 11.0  # bpmn-js draws external labels at 11 px, task names at 12 px, at scale 1

# Every label's text: its screen font size, its box on the screen, whether it is shown.
MEASURE = """() => {
  const out = [];
  for (const text of document.querySelectorAll('#diagram .djs-element text')) {
    const content = text.textContent.trim();
    if (!content) continue;
    const scale = text.getScreenCTM().a;
    const size = parseFloat(getComputedStyle(text).fontSize);
    const lines = [...text.querySelectorAll('tspan')].map((t) => {
      const r = t.getBoundingClientRect();
      return {x: r.x, y: r.y, w: r.width, h: r.height};
    });
    const owner = text.closest('.djs-element').getAttribute('data-element-id');
    out.push({owner, content, px: size * scale, lines});
  }
  return out;
}"""


@pytest.fixture(scope="module")
def browser(cluster: Cluster) -> Iterator[Browser]:
    with chromium() as b:
        yield b


@pytest.fixture
def page(browser: Browser, cluster: Cluster) -> Iterator[Page]:
    with tab(browser, 1280, 800, page_errors=True) as (pg, errors):
        pg.goto(f"{cluster.w1.url}/xwait/console")
        pg.fill("#token", READ_TOKEN)
        pg.click("#save-token")
        yield pg
    assert [e for e in errors if "Failed to load resource" not in e] == []


# Each flow's stretches on the screen (the viewer's own waypoints through the canvas's
# transform), to find a line drawn through a label.
FLOWS = """() => {
  const svg = document.querySelector('#diagram svg');
  const ctm = document.querySelector('#diagram .viewport').getScreenCTM();
  const out = [];
  for (const flow of viewer.get('elementRegistry').filter((e) => e.waypoints)) {
    const pts = flow.waypoints.map((w) => {
      const p = svg.createSVGPoint(); p.x = w.x; p.y = w.y;
      const q = p.matrixTransform(ctm); return [q.x, q.y];
    });
    out.push({id: flow.id, source: flow.source.id, target: flow.target.id, pts});
  }
  return out;
}"""


def crossed(labels: list[dict[str, Any]], flows: list[dict[str, Any]]) -> list[str]:
    """Labels a flow's line runs through (inside the text's box by more than 1 px)."""
    found = []
    for lab in labels:
        for line in lab["lines"]:
            x0, y0 = line["x"] + 1, line["y"] + 1
            x1, y1 = line["x"] + line["w"] - 1, line["y"] + line["h"] - 1
            for flow in flows:
                for (ax, ay), (bx, by) in zip(flow["pts"], flow["pts"][1:], strict=False):
                    if (min(ax, bx) < x1 and max(ax, bx) > x0
                            and min(ay, by) < y1 and max(ay, by) > y0):
                        found.append(f"{lab['owner']} {lab['content']!r} crossed by "
                                     f"{flow['source']} -> {flow['target']}")
    return found


def overlapping(labels: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Pairs of labels of different elements whose lines' boxes intersect (by > 1 px)."""
    boxes = [(lab["owner"], lab["content"], line) for lab in labels for line in lab["lines"]]
    found = []
    for i, (oa, ca, a) in enumerate(boxes):
        for ob, cb, b in boxes[i + 1:]:
            if oa == ob:
                continue
            if (min(a["x"] + a["w"], b["x"] + b["w"]) - max(a["x"], b["x"]) > 1
                    and min(a["y"] + a["h"], b["y"] + b["h"]) - max(a["y"], b["y"]) > 1):
                found.append((f"{oa}: {ca}", f"{ob}: {cb}"))
    return found


def show(pg: Page, name: str) -> None:
    pg.select_option("#def-select", name)
    # Drawn, and its counts shown (the info line names the definition once they are).
    pg.wait_for_function(
        "(n) => document.querySelector('#diagram-info').textContent.startsWith(n + ':')", arg=name)
    expect(pg.locator('#diagram [data-element-id="end_received"]')).to_be_attached()


@pytest.mark.parametrize("name", NAMES)
def test_every_label_of_a_shipped_diagram_is_legible_at_1280_by_800(
        cluster: Cluster, page: Page, name: str, tmp_path: Path) -> None:
    pg = page
    show(pg, name)
    shot = tmp_path / f"diagram-{name}.png"
    pg.locator("#shape-h").scroll_into_view_if_needed()
    pg.screenshot(path=str(shot))  # the 1280x800 screen, as an operator sees it
    print(f"screenshot: {shot}")  # noqa: T201 - for a person to look at
    labels = pg.evaluate(MEASURE)
    assert len(labels) >= 8, labels  # the diagram was drawn, labels and all
    small = [(lab["owner"], lab["content"], round(lab["px"], 1)) for lab in labels
             if lab["px"] < MIN_PX - 0.01]
    assert small == [], f"labels drawn below {MIN_PX} px on screen"
    # Each line's box is as high as its font: the text is really drawn that size.
    assert min(line["h"] for lab in labels for line in lab["lines"]) >= MIN_PX
    assert overlapping(labels) == []
    assert crossed(labels, pg.evaluate(FLOWS)) == []
    mark = pg.locator(".bjs-powered-by").bounding_box()
    assert mark is not None  # the bpmn.io watermark stays visible (its licence)
    under = [lab["content"] for lab in labels for line in lab["lines"]
             if overlapping([{"owner": "mark", "content": "", "lines": [
                 {"x": mark["x"], "y": mark["y"], "w": mark["width"], "h": mark["height"]}]},
                 {**lab, "lines": [line]}])]
    assert under == [], "labels under the watermark"
    # The start is in view whatever the diagram's size: the operator starts reading there.
    expect(pg.locator('#diagram [data-element-id="start"]')).to_be_in_viewport()


def test_a_large_diagram_is_panned_and_zoomed_not_shrunk(page: Page, tmp_path: Path) -> None:
    pg = page
    show(pg, "two-stage-approval")
    zoom = pg.locator("#zoom-level")
    expect(zoom).to_have_text("100 %")
    end = pg.locator('#diagram [data-element-id="end_received"]')
    expect(end).not_to_be_in_viewport()  # wider than the view: the right part is off it
    box = pg.locator("#diagram").bounding_box()
    assert box is not None
    # Dragged to the left, the diagram shows its right end.
    pg.mouse.move(box["x"] + box["width"] - 40, box["y"] + box["height"] / 2)
    pg.mouse.down()
    pg.mouse.move(box["x"] + 40, box["y"] + box["height"] / 2, steps=8)
    pg.mouse.up()
    pg.locator("#diagram").focus()
    for _ in range(12):
        pg.keyboard.press("ArrowRight")
    expect(end).to_be_in_viewport()
    pg.locator("#diagram").screenshot(path=str(tmp_path / "panned.png"))
    # The buttons zoom; Fit brings back the legible fit; the whole diagram is one click.
    pg.click("#zoom-in")
    expect(zoom).to_have_text("125 %")
    pg.click("#zoom-fit")
    expect(zoom).to_have_text("100 %")
    pg.click("#zoom-whole")
    expect(zoom).to_contain_text("labels below 11 px")
    expect(end).to_be_in_viewport()
    expect(pg.locator('#diagram [data-element-id="start"]')).to_be_in_viewport()
    pg.locator("#diagram").screenshot(path=str(tmp_path / "whole.png"))
    pg.locator("#diagram").press("0")
    expect(zoom).to_have_text("100 %")
