"""The tool-call journal: the outcome of each tool call of an admitted body.

The hooks record every call's end as the host reports it (succeeded, failed, denied,
interrupted), with a short, redacted summary of the call; a relief reads a generation's rows
to give its capsule the tool pairs and the test runs (issue 13). A write is bound to the
body's generation like every write on behalf of an agent: a stale one is denied, with a
receipt. It records no history event: it runs after every tool call, one insert.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from onstation.core.errors import BadInput
from onstation.core.names import validate_free_text, validate_name
from onstation.core.types import Record
from onstation.ledger.backends import Row, Tx
from onstation.ledger.base import _at
from onstation.ledger.correspondence import Correspondence

#: What became of a tool call.
OUTCOMES = ("succeeded", "failed", "denied", "interrupted")
#: Bounds of what is kept of a call (the writer shortens; the ledger refuses longer).
MAX_SUMMARY = 500
MAX_DETAIL = 400
_MAX_ID = 256
#: The most rows one read returns.
MAX_LIMIT = 10_000


@dataclass(frozen=True)
class ToolOutcome(Record):
    """One tool call of a body and what became of it."""

    id: int
    node: str
    generation: int
    session_id: str
    tool_use_id: str | None
    tool: str
    call_summary: str
    outcome: str
    exit_code: int | None
    detail: str | None
    at: datetime


def _outcome(r: Row) -> ToolOutcome:
    return ToolOutcome(int(r[0]), str(r[1]), int(r[2]), str(r[3]), r[4], str(r[5]), str(r[6]),
                       str(r[7]), None if r[8] is None else int(r[8]), r[9],
                       _at(r[10]))  # fmt: skip


def _text(value: object, field: str, max_length: int, *, empty: bool = False) -> None:
    if not isinstance(value, str):
        raise BadInput(f"{field}: must be a string", field=field)
    validate_free_text(value, field, max_length)
    if not empty and not value.strip():
        raise BadInput(f"{field}: must not be empty", field=field)


class ToolOutcomes(Correspondence):
    """The tool-call journal over one ledger; part of
    :class:`~onstation.ledger.bodies.HarnessLedger`."""

    def record_tool_outcome(
        self, node: str, *, generation: int, session_id: str, tool_use_id: str | None,
        tool: str, call_summary: str, outcome: str, exit_code: int | None = None,
        detail: str | None = None,
    ) -> None:  # fmt: skip
        """Journal one tool call's outcome for ``generation`` of ``node``.

        A stale generation (fenced, or its lease ended) is denied with a receipt
        (:class:`~onstation.core.errors.StaleGeneration`) and nothing is journaled."""
        validate_name(node, "node")
        if isinstance(generation, bool) or not isinstance(generation, int) or generation < 1:
            raise BadInput("generation: must be a positive integer", field="generation")
        _text(session_id, "session_id", _MAX_ID)
        if tool_use_id is not None:
            _text(tool_use_id, "tool_use_id", _MAX_ID)
        _text(tool, "tool", _MAX_ID)
        _text(call_summary, "call_summary", MAX_SUMMARY, empty=True)
        if outcome not in OUTCOMES:
            raise BadInput(f"outcome: must be one of {', '.join(OUTCOMES)}", field="outcome")
        if exit_code is not None and (
            isinstance(exit_code, bool)
            or not isinstance(exit_code, int)
            or not -(2**31) <= exit_code < 2**31
        ):
            raise BadInput("exit_code: must be a 32-bit integer or absent", field="exit_code")
        if detail is not None:
            _text(detail, "detail", MAX_DETAIL, empty=True)

        def write(tx: Tx, now: int) -> None:
            self.ledger._guard(tx, now, node, generation, f"tool outcome {tool}"[:200])
            tx.run(self._q("tool_outcome_insert"),
                   (node, generation, session_id, tool_use_id, tool, call_summary, outcome,
                    exit_code, detail, now))  # fmt: skip

        # Relaxed, as the hook fast path commits the same row (synchronous=NORMAL there):
        # evidence for the capsule, never authority (docs/decisions.md, the durability table).
        self.ledger._write(write, relaxed=True)

    def tool_outcomes(self, node: str, *, generation: int, limit: int = 200) -> list[ToolOutcome]:
        """The newest ``limit`` tool calls journaled for ``generation`` of ``node``, in the
        order they were made."""
        validate_name(node, "node")
        if isinstance(generation, bool) or not isinstance(generation, int) or generation < 1:
            raise BadInput("generation: must be a positive integer", field="generation")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise BadInput(f"limit: must be an integer from 1 to {MAX_LIMIT}", field="limit")
        rows = self.ledger._read_single(
            lambda tx, _now: tx.all(
                self._q("tool_outcomes_of_generation"), (node, generation, limit)
            )
        )
        return [_outcome(r) for r in rows]


__all__ = ["MAX_DETAIL", "MAX_SUMMARY", "OUTCOMES", "ToolOutcome", "ToolOutcomes"]
