"""`xwait worker`: run one stream-processing worker until interrupted.

Equivalent to `faust -A streams.app worker`, with xwait's settings applied.
"""

from __future__ import annotations

from streams.cli import EXIT_OK
from streams.config import Settings


def run_worker(settings: Settings) -> int:
    from streams.processor.app import run

    run(settings)  # faust's worker exits the process when it stops
    return EXIT_OK
