"""How a wait's stage reads, in the console and in `xwait status`: no stray commas."""

from __future__ import annotations

from typing import Any

import pytest

from streams.cli.status import _stage
from streams.console.waits import stage_text


def _stage_of(count: int, party: str | None, escalated_to: str | None,
              index: int = 0) -> dict[str, Any]:
    return {"index": index, "count": count, "name": "finance" if count > 1 else "default",
            "party": party, "escalatedTo": escalated_to, "variant": "chained"}


@pytest.mark.parametrize(("stage", "text"), [
    (_stage_of(1, None, "director"), "escalated to director"),
    (_stage_of(1, "acme", "director"), "acme, escalated to director"),
    (_stage_of(1, "acme", None), "acme"),
    (_stage_of(1, None, None), ""),
    (_stage_of(3, "fin", None, index=1), "2 of 3: finance (party fin)"),
    (_stage_of(3, None, "cfo", index=1), "2 of 3: finance, escalated to cfo"),
    (_stage_of(3, "fin", "cfo", index=2), "3 of 3: finance (party fin), escalated to cfo"),
])
def test_a_stage_reads_without_a_leading_comma_and_the_cli_says_the_same(
        stage: dict[str, Any], text: str) -> None:
    assert stage_text(stage) == text
    assert _stage({"stage": {**stage, "text": text}}) == (text or None)
    # A worker from before the text: the CLI composes the same words.
    assert _stage({"stage": stage}) == (text or None)
