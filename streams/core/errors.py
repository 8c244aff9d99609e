"""Errors the decision core and the definition loader raise on purpose.

Only one: a wait definition that is wrong. It hangs from the project's root
``XwaitError`` (``streams.errors``, which imports nothing, so the core stays
free of Kafka and faust). Bad *input records* are never exceptions here: they
become ``Reject`` effects with a reason (house style: bad input is data).
"""

from __future__ import annotations

from streams.errors import XwaitError

__all__ = ["DefinitionError", "XwaitError"]


class DefinitionError(XwaitError):
    """A wait definition refused at start-up; fix the named file and field, then restart.

    The message always names the file, the field and what was expected, because
    the operator reading it at start-up has nothing else to go on.
    """

    def __init__(self, file: str, field: str, expected: str, found: str) -> None:
        self.file = file
        self.field = field
        self.expected = expected
        self.found = found
        super().__init__(f"{file}: field '{field}': Expected {expected}, but {found}.")
