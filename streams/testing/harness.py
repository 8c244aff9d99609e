"""What every bench shares: the machine a run was measured on.

The benches under bench/ are scripts over `streams.testing`; what more than
one of them needs lives here, importable without touching `sys.path`.
"""

from __future__ import annotations

import os
import platform
from typing import Any


def machine() -> dict[str, Any]:
    """Host, cores, Python and the load average: beside every figure a bench writes
    (machines here differ up to four times from day to day)."""
    return {"host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(),
            "loadavg": os.getloadavg()}


__all__ = ["machine"]
