"""How fast a bulk operation goes (streams.client.bulk), in a module that imports nothing:
the CLI's parser shows these defaults in its help without loading the operation's code.
"""

from __future__ import annotations

__all__ = ["CONFIRM_TIMEOUT_S", "DEFAULT_RATE"]

DEFAULT_RATE = 50.0
"""Waits a second: a few per cent of what one worker decides, so an operation over a
hundred thousand waits takes about half an hour and leaves the workers' lag alone.
Each wait costs a status read and, when commanded, one Kafka round trip and a
second read to confirm it, one after the other: one CLI did 25 to 75 a second against
a local broker and worker on a busy two-core machine (load 20 to 30), so a --rate far
above that is not reached."""

CONFIRM_TIMEOUT_S = 30.0
"""How long after the last command a run waits for the workers to decide it: a healthy
worker decides a command within a second; one recovering from a restart takes longer."""
