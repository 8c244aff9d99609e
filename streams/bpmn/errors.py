"""What the BPMN import refuses: a file that is not BPMN, or a shape that breaks the pattern."""

from __future__ import annotations

from streams.errors import XwaitError

__all__ = ["BpmnError"]


class BpmnError(XwaitError):
    """A BPMN file xwait cannot take as an external wait; the message names the node.

    ``node`` is the id of the element at fault (None when the file as a
    whole is wrong: not XML, not BPMN, no process).
    """

    def __init__(self, source: str, message: str, node: str | None = None) -> None:
        self.source = source
        self.node = node
        super().__init__(f"{source}: {message}")
