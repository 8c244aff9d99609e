#!/usr/bin/env python3
"""Write the documentation site's reference pages from the code: `make reference`.

Each page is built from the one place that owns what it lists, so it cannot
drift from the code:

    docs/reference/contract.md       the topics (topology/topics.yaml), every record and
                                     field (schemas/*.avsc), every outcome and rejection
                                     reason (the enums of the code that emits them)
    docs/reference/configuration.md  every setting: the fields of `streams.config.Settings`
                                     and `Security` (their attribute docstrings and
                                     defaults), the variable `from_env` reads for each,
                                     the CLI flag that overrides it; the webhook adapter's
                                     variables; the development scripts' own
    docs/reference/cli.md            every command and flag of `streams.cli.build_parser()`
    docs/reference/web-api.md        every route a worker serves (`app.page` and the
                                     view's docstring)
    docs/reference/metrics.md        every metric a worker and the webhook adapter export

`--check` writes nothing and exits 1, naming the pages, when a checked-in page
differs from what the code gives (tests/test_reference.py runs it).  A
setting, field or reason without a description stops the generator: say what
it means where it is declared.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from refpages.cli import cli, commands  # scripts/refpages/, beside this script
from refpages.configuration import configuration
from refpages.contract import contract
from refpages.markdown import REPO
from refpages.web import metrics, web_api

OUT = REPO / "docs" / "reference"
REGENERATE = "make reference"

PAGES: dict[str, Callable[[], str]] = {
    "contract.md": contract,
    "configuration.md": configuration,
    "cli.md": cli,
    "web-api.md": web_api,
    "metrics.md": metrics,
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 when a checked-in page differs")
    args = p.parse_args(argv)
    stale = []
    for name, build in PAGES.items():
        text = build()
        page = OUT / name
        if args.check:
            if not page.is_file() or page.read_text() != text:
                stale.append(f"docs/reference/{name}")
        else:
            OUT.mkdir(parents=True, exist_ok=True)
            page.write_text(text)
    if stale:
        print(f"out of date: {', '.join(stale)}: run `{REGENERATE}`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["OUT", "PAGES", "commands", "main"]
