"""What an operator or a channel adapter tells a wait: commands and action results.

Kept apart from `client.py` (starting waits, replies, results, the producer)
so that each file reads in one sitting; `XwaitClient` is these methods plus
its own.  Each command is checked here before anything is produced, so a
mistake is an exception at the caller, not a Rejected record found later.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, Literal

from streams import config
from streams.client.errors import InvalidRequest, UnknownVersion
from streams.client.records import Receipt
from streams.codec import RecordType
from streams.core.durations import parse_duration_ms, parse_signed_duration_ms
from streams.core.events import PARTY_SEPARATOR
from streams.core.keys import key_problem
from streams.core.operations import operation_id_problem
from streams.headers import Headers

__all__ = ["Commands", "ReviewDecision", "check_key", "json_text", "wait_key_of"]

ReviewDecision = Literal["Accept", "Submit Correction"]


def json_text(value: Any, what: str) -> str:
    """JSON text of ``value``; a ``str`` must already be JSON text (checked, kept verbatim)."""
    if isinstance(value, str):
        try:
            json.loads(value)
        except ValueError as exc:
            raise InvalidRequest(f"{what} is not valid JSON text: {exc}") from exc
        return value
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidRequest(f"{what} is not representable as JSON: {exc}") from exc


def check_key(key: str, what: str) -> None:
    """A wait key the worker takes (streams.core.keys), or InvalidRequest before sending."""
    if not isinstance(key, str) or not key.strip():
        raise InvalidRequest(f"{what} must be a non-empty string, got {key!r}")
    if PARTY_SEPARATOR in key:
        raise InvalidRequest(
            f"{what} {key!r} contains {PARTY_SEPARATOR!r}, which separates a wait key "
            "from a party (WAITKEY~PARTY) and cannot be part of a wait key"
        )
    problem = key_problem(key.encode("utf-8", "surrogatepass"))
    if problem is not None:
        shown = key if len(key) <= 40 else f"{key[:40]}..."
        raise InvalidRequest(f"{what} {shown!r}: {problem}")


def _check_operation(operation: str | None) -> None:
    """InvalidRequest, before sending, for an operation id the worker would refuse."""
    if operation is not None:
        problem = operation_id_problem(operation)
        if problem is not None:
            raise InvalidRequest(f"operation: {problem}")


def wait_key_of(correlation_key: str) -> str:
    """The WAITKEY of ``WAITKEY`` or ``WAITKEY~PARTY``; InvalidRequest for anything else."""
    wait_key, sep, party = correlation_key.partition(PARTY_SEPARATOR) \
        if isinstance(correlation_key, str) else ("", "", "")
    check_key(wait_key, "the wait key of the correlation key")
    if sep and (not party or PARTY_SEPARATOR in party):
        raise InvalidRequest(
            f"correlation key {correlation_key!r}: expected WAITKEY or WAITKEY~PARTY")
    return wait_key


class Commands(ABC):
    """Operator commands and action results; the producing is the client's."""

    settings: config.Settings

    @abstractmethod
    def _check_wait(self, wait_key: str, force: bool, sending: str | None
                    ) -> dict[str, Any] | None:
        """The wait's status from a worker; NoSuchWait when none has the key."""

    @abstractmethod
    def _stored_versions(self) -> tuple[str, dict[str, list[str]]]:
        """The definitions topic's name, and each definition's stored versions in it."""

    @abstractmethod
    def _send_one(self, role: str, key: str, record_type: RecordType,
                  record: Mapping[str, Any], wait: bool | float = False) -> Receipt | None:
        """Produce one record to the role's topic and wait for Kafka to take it; with
        ``wait``, then for its receipt."""

    @abstractmethod
    def _produce(self, topic: str, key: str, record_type: RecordType,
                 record: Mapping[str, Any], headers: Headers | None = None) -> None:
        """Produce one record; the next flush waits for it."""

    # -- action results (rule 12, docs/rules.md) ---------------------------------------

    def report_delivered(self, correlation_key: str, action_id: str, *,
                         at: int | None = None, wait: bool = True) -> None:
        """Tell the wait its channel adapter carried out the action ``action_id``.

        ``correlation_key`` is the action's (``WAITKEY`` or ``WAITKEY~PARTY``).
        Written to the replies topic keyed by WAITKEY, beside the replies. No
        worker is asked first (an adapter reports in bulk): a result for no
        wait, an unknown action or a wait that ended is rejected with its
        reason.  ``wait=False`` leaves the record to the next :meth:`flush`.
        """
        self._report(correlation_key, action_id, "delivered", None, False, at, wait)

    def report_failed(self, correlation_key: str, action_id: str, error: str, *,
                      permanent: bool = False, at: int | None = None,
                      wait: bool = True) -> None:
        """Tell the wait the action ``action_id`` could not be carried out, and why.

        ``permanent=True`` when sending again cannot help (a 4xx answer other
        than 408, 425 and 429, an unknown address): the definition's
        ``on_send_failure`` path is taken at once; otherwise it is sent again
        after its backoff, up to its retries.
        """
        if not isinstance(error, str) or not error:
            raise InvalidRequest(f"error must be a non-empty string, got {error!r}")
        self._report(correlation_key, action_id, "failed", error, permanent, at, wait)

    def _report(self, correlation_key: str, action_id: str, status: str, error: str | None,
                permanent: bool, at: int | None, wait: bool) -> None:
        wait_key = wait_key_of(correlation_key)
        if not isinstance(action_id, str) or not action_id:
            raise InvalidRequest(f"action id must be a non-empty string, got {action_id!r}")
        record = {"correlationKey": correlation_key, "actionId": action_id, "status": status,
                  "error": error, "permanent": permanent, "at": at}
        if wait:
            self._send_one("replies", wait_key, RecordType.ACTION_RESULT, record)
        else:
            self._produce(self.settings.topic("replies"), wait_key, RecordType.ACTION_RESULT,
                          record)

    # -- operator commands -----------------------------------------------------

    # Every command raises NoSuchWait, before anything is produced, when a
    # worker says no wait has the key; force=True sends anyway.  ``operation``
    # names the bulk operation the command belongs to (streams.client.bulk):
    # the wait's trace entry names it, and the wait takes only one command of
    # it (a second is rejected duplicate).  With wait=True (or a timeout in
    # seconds) a command returns its Receipt, decided by the worker: applied
    # (with the outcome when it ended the wait), held (before its request, or a
    # DELIVER while the wait is suspended), unchanged (it asked for what already
    # was) or refused (with the reason); ReceiptTimeout when none came in time.
    # Without it, None once Kafka took the command.

    def suspend(self, correlation_key: str, reason: str, *, operator: str | None = None,
                force: bool = False, operation: str | None = None,
                wait: bool | float = False) -> Receipt | None:
        """Pause the wait's deadlines, keeping its place (idempotent)."""
        return self._command(correlation_key, "SUSPEND", force, wait, reason=reason,
                             operator=operator, operationId=operation)

    def resume(self, correlation_key: str, *, reason: str | None = None,
               operator: str | None = None, force: bool = False,
               operation: str | None = None, wait: bool | float = False) -> Receipt | None:
        """Restore what was left of the deadlines; decide replies that came meanwhile."""
        return self._command(correlation_key, "RESUME", force, wait, reason=reason,
                             operator=operator, operationId=operation)

    def cancel(self, correlation_key: str, reason: str, *, operator: str | None = None,
               force: bool = False, operation: str | None = None,
               wait: bool | float = False) -> Receipt | None:
        """End a wait that is not done as CANCELLED (reason ``cancelled_by_operator``).

        The outcome names ``operator`` and carries ``reason`` as its ``operatorReason``.
        """
        return self._command(correlation_key, "CANCEL", force, wait, reason=reason,
                             operator=operator, operationId=operation)

    def deliver(self, correlation_key: str, response_data: Any, *, reason: str | None = None,
                operator: str | None = None, force: bool = False,
                wait: bool | float = False) -> Receipt | None:
        """Hand in an answer as if a reply had arrived (still validated, never channel-checked)."""
        return self._command(correlation_key, "DELIVER", force, wait, reason=reason,
                             operator=operator,
                             responseData=json_text(response_data, "response data"))

    def review(self, correlation_key: str, outcome: ReviewDecision, note: str, *,
               corrected_data: Any = None, operator: str | None = None,
               reason: str | None = None, force: bool = False,
               wait: bool | float = False) -> Receipt | None:
        """Answer a REVIEW_NEEDED action: ``Accept`` the reply, or ``Submit Correction``.

        A correction needs ``corrected_data``; an acceptance must not have any
        (the accepted reply's own data is kept).  The trace records the note,
        then ``reason`` if given, and the operator.
        """
        if outcome not in ("Accept", "Submit Correction"):
            raise InvalidRequest(
                f"review outcome must be 'Accept' or 'Submit Correction', got {outcome!r}")
        if outcome == "Submit Correction" and corrected_data is None:
            raise InvalidRequest("'Submit Correction' needs the corrected data")
        if outcome == "Accept" and corrected_data is not None:
            raise InvalidRequest("'Accept' keeps the reply's data; corrected data is only "
                                 "for 'Submit Correction'")
        data = None if corrected_data is None else json_text(corrected_data, "corrected data")
        return self._command(correlation_key, "REVIEW", force, wait, reviewOutcome=outcome,
                             reviewNote=note, responseData=data, operator=operator,
                             reason=reason)

    def reschedule(self, correlation_key: str, *, deadline: str | None = None,
                   move_by: str | None = None, reason: str | None = None,
                   operator: str | None = None, force: bool = False,
                   operation: str | None = None,
                   wait: bool | float = False) -> Receipt | None:
        """Move the current deadline of a parked or suspended wait (rule 11, docs/rules.md).

        ``deadline`` is the new deadline as an ISO 8601 duration from now
        (``PT2H``); ``move_by`` shifts the current one (``PT30M`` later,
        ``-PT30M`` earlier). Give exactly one. The worker refuses it, with a
        Rejected record, when the wait is done (``late``), in review, or the
        new deadline has passed (``deadline_passed``); for a suspended wait it
        sets the time left on resume.
        """
        if (deadline is None) == (move_by is None):
            raise InvalidRequest("reschedule needs exactly one of deadline (PT2H: two hours "
                                 "from now) and move_by (PT30M later, -PT30M earlier)")
        try:
            if deadline is not None:
                parse_duration_ms(deadline)
            else:
                parse_signed_duration_ms(move_by or "")
        except ValueError as exc:
            raise InvalidRequest(f"{'deadline' if deadline is not None else 'move_by'}: "
                                 f"{exc}") from None
        return self._command(correlation_key, "RESCHEDULE", force, wait, reason=reason,
                             operator=operator, deadline=deadline, moveBy=move_by,
                             operationId=operation)

    def migrate(self, correlation_key: str, *, version: str | None = None,
                reason: str | None = None, operator: str | None = None,
                force: bool = False, operation: str | None = None,
                wait: bool | float = False) -> Receipt | None:
        """Move a wait not yet done to another version of its definition (rule 13, docs/rules.md).

        ``version`` names it (``xwait definitions`` lists them); None means the
        newest the deciding worker has.  A version ``<prefix>.definitions``
        does not hold for the wait's definition raises :class:`UnknownVersion`
        before anything is produced (for any definition, when no worker named
        the wait's: ``force``, ``check_keys=False``, or none answered).  The
        worker still refuses, with a Rejected record, a version it cannot load
        (``unknown_definition``) or one the wait's variant, stage or escalation
        level does not fit (``invalid_command``).  Recorded in the wait's trace.
        """
        if version is not None and (not isinstance(version, str) or not version):
            raise InvalidRequest(f"version must be a non-empty string, got {version!r}")
        _check_operation(operation)
        found = self._checked(correlation_key, force, "migrate")
        if version is not None:
            self._check_version(version, None if found is None else found.get("definition"))
        return self._send_command(correlation_key, "MIGRATE", wait, reason=reason,
                                  operator=operator, version=version, operationId=operation)

    def _check_version(self, version: str, definition: str | None) -> None:
        """UnknownVersion unless the store holds ``version`` of ``definition`` (or of any)."""
        topic, stored = self._stored_versions()
        if definition is not None:
            if version not in stored.get(definition, ()):
                raise UnknownVersion(version, definition,
                                     {definition: stored.get(definition, [])}, topic)
        elif not any(version in versions for versions in stored.values()):
            raise UnknownVersion(version, None, stored, topic)

    def _command(self, correlation_key: str, command: str, force: bool, wait: bool | float,
                 **fields: Any) -> Receipt | None:
        _check_operation(fields.get("operationId"))
        self._checked(correlation_key, force, command.lower())
        return self._send_command(correlation_key, command, wait, **fields)

    def _checked(self, correlation_key: str, force: bool, sending: str
                 ) -> dict[str, Any] | None:
        check_key(correlation_key, "correlation key")
        return self._check_wait(correlation_key, force, sending)

    def _send_command(self, correlation_key: str, command: str, wait: bool | float = False,
                      **fields: Any) -> Receipt | None:
        record = {"correlationKey": correlation_key, "command": command, **fields}
        return self._send_one("commands", correlation_key, RecordType.COMMAND, record, wait)
