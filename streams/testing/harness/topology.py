"""A run's topology folder: the repository's topics.yaml and the definitions a bench chose,
each edited as the bench needs (a deadline replaced, timers stretched, a TTL shortened)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml

from streams.config import REPO_ROOT

TOPICS = REPO_ROOT / "topology" / "topics.yaml"
SHIPPED = REPO_ROOT / "topology" / "waits"  # the definitions users get
BENCH_WAITS = REPO_ROOT / "bench" / "waits"  # the benches' own (park-bench, bench-long, ...)

Edit = Callable[[dict[str, Any], str], list[str]]
"""Changes a definition (its document, its name) in place; says what it changed."""


def make_topology(folder: Path, definitions: Iterable[Path], edit: Edit | None = None
                  ) -> list[str]:
    """`folder` with topics.yaml and `definitions` (YAML files) under waits/; without
    `edit` they are copied unchanged.  What `edit` changed, definition by definition."""
    (folder / "waits").mkdir(parents=True)
    shutil.copy(TOPICS, folder / "topics.yaml")
    changes: list[str] = []
    for src in definitions:
        dest = folder / "waits" / src.name
        if edit is None:
            shutil.copy(src, dest)
            continue
        doc = yaml.safe_load(src.read_text(encoding="utf-8"))
        if isinstance(doc, dict):
            changes += edit(doc, str(doc.get("name", src.stem)))
        dest.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return changes


__all__ = ["BENCH_WAITS", "SHIPPED", "TOPICS", "make_topology"]
