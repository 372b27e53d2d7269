"""The error hierarchy every layer raises, each kind tied to one documented exit code.

::

    OnstationError            exit 1  anything else
    ├── BadInput              exit 2  malformed or unknown input; nothing was changed
    ├── StaleGeneration       exit 3  the presented generation is stale or fenced (denial recorded)
    ├── BlockedByPolicy       exit 4  respawn limit, open breaker or halt gate
    └── Conflict              exit 5  a compare-and-swap lost, a live lease exists,
                                      or the transition is not allowed from the current state
"""

from __future__ import annotations

from enum import IntEnum

TYPE_CHECKING = False  # typing costs import time on the hook hot path
if TYPE_CHECKING:
    from typing import Any


class ExitCode(IntEnum):
    """Process exit codes of the CLI; scripts branch on them.

    Each code's :attr:`description` is the one text of the exit-code table: ``onstation
    --help`` prints it and the README's table is tested against it.
    """

    OK = 0
    ERROR = 1
    BAD_INPUT = 2
    DENIED = 3
    BLOCKED = 4
    CONFLICT = 5

    @property
    def description(self) -> str:
        """What the code means, for people reading ``--help`` or the README."""
        return _EXIT_CODE_DESCRIPTIONS[self]


_EXIT_CODE_DESCRIPTIONS: dict[ExitCode, str] = {
    ExitCode.OK: "ok",
    ExitCode.ERROR: "anything else (e.g. the ledger cannot be opened)",
    ExitCode.BAD_INPUT: "bad input or usage; nothing was changed",
    ExitCode.DENIED: "denied: the generation is stale or fenced (the denial is recorded)",
    ExitCode.BLOCKED: "blocked by policy: respawn limit, breaker or halt",
    ExitCode.CONFLICT: (
        "conflict: a compare-and-swap lost, a live lease exists, or the transition is invalid"
    ),
}


class OnstationError(Exception):
    """Base of every error onstation raises on purpose."""

    exit_code: ExitCode = ExitCode.ERROR
    kind: str = "error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details

    def to_json(self) -> dict[str, Any]:
        """The machine-readable form printed by ``--json``."""
        return {"error": self.kind, "message": self.message, **self.details}


class BadInput(OnstationError):
    """The input was malformed, out of range or names something that does not exist."""

    exit_code = ExitCode.BAD_INPUT
    kind = "bad_input"


class StaleGeneration(OnstationError):
    """A write carried a generation that is no longer the live one; the denial is on record."""

    exit_code = ExitCode.DENIED
    kind = "denied"


class BlockedByPolicy(OnstationError):
    """A policy (respawn governor, breaker, halt gate) refused the request."""

    exit_code = ExitCode.BLOCKED
    kind = "blocked"


class Conflict(OnstationError):
    """A compare-and-swap lost, a live lease exists, or a transition is not allowed."""

    exit_code = ExitCode.CONFLICT
    kind = "conflict"
