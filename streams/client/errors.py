"""What the SDK refuses, and why; every class hangs from ``streams.errors.XwaitError``::

    XwaitError                  streams.errors
    └── ClientError             streams.errors, re-exported here
        ├── KafkaUnavailable    streams.errors: the broker did not answer in time: check
        │                       XWAIT_BOOTSTRAP and that Kafka runs
        ├── InvalidRequest      refused before anything was produced: fix the argument
        │   ├── UnknownDefinition   no wait definition has that name (.known lists them)
        │   ├── UnknownVersion      no stored version of the wait's definition has that
        │   │                       version (migrate; .known lists them)
        │   ├── UnknownChannel      the wait's definition (or, unknown, every one) refuses it
        │   └── NoSuchWait          the workers know no wait with that key: nothing sent
        │                           (force=True sends anyway, for a reply that overtakes
        │                           its request)
        ├── TopicMissing        the contract's topic does not exist: run `xwait topics create`
        ├── DeliveryFailed      Kafka refused or did not confirm records (.failed, .delivered)
        ├── UndecodableOutput   an outcomes/actions/rejected record the codec cannot read
        ├── ResultTimeout       no outcome for the key within the timeout (also a TimeoutError)
        └── ReceiptTimeout      no receipt for a reply or command within the timeout (also a
                                TimeoutError): it was sent, and is decided when a worker can

The split matters to callers: an ``InvalidRequest`` is always raised *before*
anything reaches Kafka, so retrying it unchanged is pointless; a
``DeliveryFailed`` says which keys did not make it, so exactly those can be
retried (the wait key makes a retried StartWait a recognised duplicate); a
``KafkaUnavailable`` may pass once the broker is back.  ``except
ClientError`` catches all of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from streams.errors import ClientError, KafkaUnavailable

__all__ = [
    "ClientError",
    "DeliveryFailed",
    "InvalidRequest",
    "KafkaUnavailable",
    "NoSuchWait",
    "ReceiptTimeout",
    "ResultTimeout",
    "TopicMissing",
    "UndecodableOutput",
    "UnknownChannel",
    "UnknownDefinition",
    "UnknownVersion",
]


class InvalidRequest(ClientError):
    """An argument xwait cannot use; nothing was produced.

    ``item`` is the index of the offending item of a batch (``start_many``),
    and ``problem`` the message without the ``item N:`` prefix, so that a
    caller reading a file can name the line instead.
    """

    item: int | None = None

    @property
    def problem(self) -> str:
        text = str(self)
        prefix = f"item {self.item}: "
        return text.removeprefix(prefix) if self.item is not None else text


class UnknownDefinition(InvalidRequest):
    """A definition name no file in ``topology/waits`` declares."""

    def __init__(self, name: str, known: Sequence[str], folder: str) -> None:
        self.name = name
        self.known = tuple(sorted(known))
        shown = ", ".join(self.known) if self.known else "none"
        super().__init__(
            f"unknown wait definition {name!r}: the definitions in {folder} are {shown}"
        )


class UnknownVersion(InvalidRequest):
    """A version to migrate to that ``<prefix>.definitions`` does not hold.

    ``definition`` is the wait's definition when a worker named it, else None
    (no worker answered, or ``force``): then no definition has the version.
    ``known`` maps each definition considered to its stored versions.
    """

    def __init__(self, version: str, definition: str | None,
                 known: Mapping[str, Sequence[str]], topic: str) -> None:
        self.version = version
        self.definition = definition
        self.known = {name: tuple(sorted(versions)) for name, versions in sorted(known.items())}
        if definition is not None:
            versions = self.known.get(definition, ())
            shown = ", ".join(versions) if versions else "none"
            text = (f"unknown version {version!r} of definition {definition!r}: the versions "
                    f"of {definition!r} in {topic} are {shown}")
        else:
            shown = "; ".join(f"{name}: {', '.join(v)}" for name, v in self.known.items())
            text = (f"unknown version {version!r}: no definition in {topic} has it; the "
                    f"versions there are {shown or 'none'}")
        super().__init__(text)


class UnknownChannel(InvalidRequest):
    """A reply channel the wait's definition (or, when unknown, every definition) refuses."""

    def __init__(self, channel: str, known: Sequence[str], definition: str | None = None) -> None:
        self.channel = channel
        self.known = tuple(sorted(known))
        self.definition = definition
        whose = (f"the wait's definition {definition!r} accepts" if definition is not None
                 else "the wait definitions accept")
        super().__init__(
            f"unknown reply channel {channel!r}: {whose} "
            f"{', '.join(self.known) if self.known else 'no channel'}"
        )


class NoSuchWait(InvalidRequest):
    """The workers answered that no wait has this key, so a reply or command would be refused.

    Seed 001's "no such event": the processor would only reject the record as
    ``unmatched`` once the early-reply TTL ran out, minutes later. Pass
    ``force=True`` (CLI: ``--force``) to send anyway, for a reply that
    overtakes its request. ``early_replies`` and ``early_commands`` count what
    the worker already holds for the key; ``sending`` names what was not sent
    (``"reply"``, ``"cancel"``, ...), None when nothing was to be sent (``result``).
    """

    def __init__(self, key: str, where: str, early_replies: int = 0,
                 early_commands: int = 0, sending: str | None = None) -> None:
        self.key = key
        self.where = where
        self.early_replies = early_replies
        self.early_commands = early_commands
        self.sending = sending
        super().__init__(self.explain("force=True"))

    def explain(self, force: str) -> str:
        """The message, naming ``force`` as the way to send anyway (``--force`` in the CLI)."""
        held = ""
        if self.early_replies or self.early_commands:
            held = (f" ({self.early_replies} reply(s) and {self.early_commands} command(s) are "
                    "held for it, waiting for its request)")
        text = (f"Expected a wait with key {self.key!r}, but the worker at {self.where} "
                f"knows none{held}")
        if self.sending is None:
            return text + ", and its outcomes partition holds no outcome for it"
        if self.sending == "reply":
            return (text + "; the reply was not sent. A reply that overtakes its request is "
                    f"held until the request arrives: send it anyway with {force}")
        return (text + f"; the {self.sending} was not sent. Send it anyway with {force}: it "
                "is held for the wait's request, like an early reply, and rejected as "
                "unmatched if none comes within the early-reply TTL")


class ResultTimeout(ClientError, TimeoutError):
    """No outcome for the key arrived within the timeout: the wait is still open (or unknown)."""

    def __init__(self, key: str, timeout: float) -> None:
        self.key = key
        self.timeout = timeout
        super().__init__(f"Expected an outcome for key {key!r} within {timeout:g} s, but none "
                         "arrived: the wait is still open")


class ReceiptTimeout(ClientError, TimeoutError):
    """No receipt for a reply or command arrived within the timeout.

    The record was sent (Kafka acknowledged it) and a worker decides it when it
    gets to it: the worker owning its partition is down, restoring, or behind.
    """

    def __init__(self, what: str, receipt_id: str, timeout: float) -> None:
        self.what = what
        self.receipt_id = receipt_id
        self.timeout = timeout
        super().__init__(f"Expected a receipt for the {what} within {timeout:g} s, but none "
                         f"arrived (receipt id {receipt_id}): it was sent, and is decided "
                         "when a worker owning its partition gets to it")


class TopicMissing(ClientError):
    """The broker answers but lacks a topic of the contract."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        super().__init__(
            f"topic {topic!r} does not exist: run `xwait topics create` with the same prefix"
        )


class DeliveryFailed(ClientError):
    """Records Kafka refused, or did not confirm before the flush timeout.

    ``failed`` holds ``(wait key, error text)`` pairs; ``delivered`` counts the
    records of the same flush that Kafka did confirm. A record reported as not
    confirmed in time may still arrive later: retrying it is safe because the
    processor recognises a repeated request or replyId as a duplicate.
    """

    def __init__(self, failed: Sequence[tuple[str, str]], delivered: int) -> None:
        self.failed = tuple(failed)
        self.delivered = delivered
        first_key, first_error = self.failed[0] if self.failed else ("", "")
        super().__init__(
            f"{len(self.failed)} record(s) not delivered ({delivered} delivered); "
            f"first: key {first_key!r}: {first_error}"
        )


class UndecodableOutput(ClientError):
    """A record on an output topic the codec cannot read (for example a newer schema).

    The consumer has already moved past it, so the next poll continues with
    the following record; ``value`` holds the bytes for a person to inspect.
    """

    def __init__(self, topic: str, partition: int, offset: int, value: bytes | None,
                 detail: str) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.value = value
        self.detail = detail
        super().__init__(f"{topic}[{partition}]@{offset}: {detail}")
