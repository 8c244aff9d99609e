"""`xwait worker`: run one stream-processing worker until interrupted.

Equivalent to `faust -A streams.app worker` (see `streams.app`), with
xwait's settings applied and two checks first, so that the usual start-up
mistakes are one line and an exit code instead of faust's 35-line
traceback and exit 1:

* the broker answers a metadata request within 5 s (else exit 3);
* the web port can be bound (else exit 2: choose another with --web-port).
"""

from __future__ import annotations

import errno
import logging
import socket

from streams import codec
from streams.cli import EXIT_OK
from streams.client._kafka import probe
from streams.config import LIBRDKAFKA_LOGGER, Settings
from streams.errors import ConfigError
from streams.frame import preflight

__all__ = ["ExpectedNoise", "check_web_port", "prepare", "run_worker"]


class ExpectedNoise(logging.Filter):
    """Drops the log records a healthy start is known to produce, and nothing else.

    On a group's first start the broker has not yet loaded the group's
    coordinator: aiokafka logs ``GroupCoordinatorNotAvailableError`` at
    ERROR and retries, which always works a moment later. An operator who
    sees ``[ERROR]`` on a healthy start learns to ignore errors; so only
    these, which carry no information, are dropped.
    """

    NOISE = ("GroupCoordinatorNotAvailable", "CoordinatorNotAvailable",
             "NotCoordinatorForGroup", "CoordinatorLoadInProgress")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR or not record.name.startswith(("aiokafka", "faust")):
            return True
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            text += type(record.exc_info[1]).__name__
        return not any(name in text for name in self.NOISE)


NOISY_LOGGERS = ("aiokafka.consumer.group_coordinator", "aiokafka.consumer.consumer",
                 "aiokafka.consumer.fetcher", "aiokafka.client", "aiokafka.conn",
                 "faust.transport.drivers.aiokafka", "faust.transport.consumer")
"""The modules whose loggers (``logging.getLogger(__name__)``) log a missing coordinator."""


def check_web_port(settings: Settings) -> None:
    """Bind the web address once, the way faust will, to fail early when it is taken."""
    host = settings.web_host or "0.0.0.0"  # noqa: S104 - an empty host binds every interface
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as aiohttp does
        try:
            sock.bind((host.strip("[]"), settings.web_port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ConfigError(
                    f"Expected web port {settings.web_port} on {host} to be free, but another "
                    "process listens there; choose another with --web-port or XWAIT_WEB_PORT"
                ) from exc
            raise ConfigError(
                f"Expected to bind the web server to {host}:{settings.web_port}, but "
                f"{exc.strerror or exc}; check XWAIT_WEB_HOST and XWAIT_WEB_PORT") from exc


def prepare(settings: Settings) -> None:
    """What every way of starting a worker does before faust runs.

    The checks above, the codec (a Schema Registry when one is configured:
    streams.codec.configure), and the filter for expected start-up noise.
    """
    # The probe's own retries would print a line each: it reports in one.
    quiet, LIBRDKAFKA_LOGGER.propagate = LIBRDKAFKA_LOGGER.propagate, False
    try:
        probe(settings)
    finally:
        LIBRDKAFKA_LOGGER.propagate = quiet
    check_web_port(settings)
    codec.configure(settings)
    # A logger's filters see only the records logged on it (not its children's),
    # and faust replaces the handlers when it starts: so the emitting loggers.
    noise = ExpectedNoise()
    for name in NOISY_LOGGERS:
        logging.getLogger(name).addFilter(noise)


def run_worker(settings: Settings) -> int:
    prepare(settings)
    # The broker's answers come while faust is imported (streams.frame.preflight).
    started = preflight.begin(settings)
    from streams.frame.app import run

    run(settings, started)  # faust's worker exits the process when it stops
    return EXIT_OK
