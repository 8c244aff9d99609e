"""The test clock: a worker's time read from a file that a test moves (``XWAIT_CLOCK=file:PATH``).

A worker decides by the clock it is given (`WorkerContext.clock`): the wall
clock in production.  The test kit (`streams.testing.kit`) gives its worker
a file instead, and moves time by writing it; the worker's probes, its
stream time, its timers and the time of every decision then follow the
file, and a test that says "three days later" waits for the worker, not for
three days.  The decisions are the production ones: only the source of
``now`` differs.

The file holds one number, epoch milliseconds, in decimal.  It is written
whole and renamed into place (`write_clock`), so a reader sees the old
value or the new one, never half of one.  The reader (`FileClock`) reads it
at every call (a few microseconds; the worker asks a few times per batch
and once per record taken), and never goes back: a value below the last one
read, or a file that cannot be read (the kit's session ended before the
worker), reads as the last value.

A test clock is for tests only.  A worker refuses it on input topics the
broker stamps (``LogAppendTime``, what ``xwait topics create`` makes): there
a record's time is the broker's wall clock, and a decision at a test time
would race it (`refuse_on_broker_time`).  The kit's topics are stamped by
producers (``CreateTime``), whose records a worker decides at its own time,
when it takes them (`streams.processor.model.InputRecord.event_time`).
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from streams.config import Settings
from streams.errors import ConfigError
from streams.processor.context import wall_ms
from streams.processor.sequencer import CLOCKED_ROLES

log = logging.getLogger(__name__)

WALL = "wall"
FILE_PREFIX = "file:"
TIMESTAMP_TYPE = "message.timestamp.type"


def clock_path(setting: str) -> Path | None:
    """The file of a ``file:PATH`` clock setting; None for the wall clock."""
    if setting == WALL:
        return None
    if setting.startswith(FILE_PREFIX) and setting[len(FILE_PREFIX):]:
        return Path(setting[len(FILE_PREFIX):])
    raise ConfigError(f"XWAIT_CLOCK={setting!r}: expected 'wall' or 'file:PATH' (tests only)")


def read_clock(path: Path) -> int:
    """The epoch milliseconds the file holds; ConfigError when it holds none."""
    try:
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"XWAIT_CLOCK=file:{path}: Expected a readable file holding epoch "
                          f"milliseconds, but {getattr(exc, 'strerror', None) or exc}") from exc
    try:
        value = int(text.strip())
    except ValueError:
        raise ConfigError(f"XWAIT_CLOCK=file:{path}: Expected epoch milliseconds, but the file "
                          f"holds {text[:40]!r}") from None
    if value <= 0:
        raise ConfigError(f"XWAIT_CLOCK=file:{path}: Expected epoch milliseconds above 0, "
                          f"but the file holds {value}")
    return value


def write_clock(path: Path, ms: int) -> None:
    """Set the clock: written to a file beside it, then renamed over it (atomic)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(f"{ms}\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class FileClock:
    """Epoch milliseconds from a file, never going back (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.last = read_clock(path)  # refused here, at start, when unreadable

    def __call__(self) -> int:
        try:
            value = int(self.path.read_bytes())
        except (OSError, ValueError):
            return self.last
        if value > self.last:
            self.last = value
        return self.last


def worker_clock(settings: Settings) -> Callable[[], int]:
    """A worker's clock (`WorkerContext.clock`) for XWAIT_CLOCK: the wall clock, or a
    `FileClock` once the input topics are found stamped by producers (asked of the broker:
    the worker made its topics before)."""
    path = clock_path(settings.clock)
    if path is None:
        return wall_ms
    from streams import topics  # only for a test clock: an admin client's request

    clocked = {role.value for role in CLOCKED_ROLES}
    specs = [s for s in topics.load_specs(settings) if s.role in clocked]
    refuse_on_broker_time(settings.clock, {
        st.spec.name: st.config.get(TIMESTAMP_TYPE, "") for st in topics.describe(settings, specs)})
    log.warning("TEST CLOCK: this worker's time is read from %s, not the wall clock "
                "(XWAIT_CLOCK); for tests only", path)
    return FileClock(path)


def refuse_on_broker_time(setting: str, timestamp_types: Mapping[str, str]) -> None:
    """Refuse a test clock when an input topic is stamped by the broker (see the module
    docstring); `timestamp_types` is each input topic's ``message.timestamp.type``."""
    if clock_path(setting) is None:
        return
    stamped = sorted(t for t, kind in timestamp_types.items() if kind != "CreateTime")
    if stamped:
        raise ConfigError(
            f"XWAIT_CLOCK={setting}: Expected input topics stamped by producers (CreateTime), "
            f"as the test kit makes them, but {', '.join(stamped)} "
            f"{'is' if len(stamped) == 1 else 'are'} stamped by the broker (LogAppendTime): "
            "a test clock is for tests only; unset XWAIT_CLOCK in production")


__all__ = ["FILE_PREFIX", "WALL", "FileClock", "clock_path", "read_clock",
           "refuse_on_broker_time", "worker_clock", "write_clock"]
