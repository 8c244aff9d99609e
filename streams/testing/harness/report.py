"""What a bench shows: Markdown tables, the plot's backend, a plot published to a tracked path."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def table(head: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """The lines of a Markdown table: the header, its separator, a line per row."""
    return (["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
            + ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows])


def pyplot() -> Any:
    """matplotlib's pyplot drawing to files only (Agg): a bench runs without a display.
    Imported when a plot is drawn, so that a bench that draws none needs no matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def publish(png: Path, target: Path | None) -> Path | None:
    """Copy the plot to `target` (a tracked path a page shows, e.g. docs/scale.png);
    the copy, or None without a target."""
    if target is None:
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(png, target)
    return target


__all__ = ["publish", "pyplot", "table"]
