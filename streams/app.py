"""The faust application, built from the ``XWAIT_*`` environment: ``faust -A streams.app worker``.

The same worker as ``xwait worker`` (which remains the documented way: it
also applies its flags and fails with one line when the broker or the web
port is not there). faust's own flags (``--web-port``, ``-l info``...)
override the settings for faust's part, so give the web options through the
``XWAIT_*`` variables: the console reads them from the settings, too.

Importing this module builds the app (faust's CLI imports ``streams.app``
and uses its ``app``): the settings are read, the wait definitions loaded
(a broken one is refused here) and the checks and codec set-up of
``streams.cli.worker.prepare`` applied.
"""

from __future__ import annotations

import sys

import faust

from streams import config
from streams.cli import EXIT_KAFKA, EXIT_USAGE
from streams.cli.worker import prepare
from streams.codec import RegistryUnavailable
from streams.errors import ConfigError, KafkaUnavailable, XwaitError
from streams.frame.app import build_app

__all__ = ["app", "settings"]

try:
    settings = config.from_env()
    prepare(settings)
    app: faust.App = build_app(settings)
except (KafkaUnavailable, RegistryUnavailable) as exc:  # one line, as `xwait worker` does
    print(f"xwait: {exc}", file=sys.stderr)
    raise SystemExit(EXIT_KAFKA) from None
except ConfigError as exc:
    print(f"xwait: configuration error: {exc}", file=sys.stderr)
    raise SystemExit(EXIT_USAGE) from None
except XwaitError as exc:
    print(f"xwait: {exc}", file=sys.stderr)
    raise SystemExit(1) from None
