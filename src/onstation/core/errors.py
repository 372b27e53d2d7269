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

TYPE_CHECKING = False  # typing costs import time on the hook hot path
if TYPE_CHECKING:
    from typing import Any

    from onstation.core.exit_codes import ExitCode as ExitCode  # noqa: PLC0414 - re-exported
else:

    def __getattr__(name: str) -> object:
        # ``from onstation.core.errors import ExitCode`` still works; the enum is imported
        # the first time it is named (see _Code).
        if name == "ExitCode":
            from onstation.core.exit_codes import ExitCode

            return ExitCode
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _Code:
    """An error class's exit code, held as an int and read as its :class:`ExitCode`.

    Every hook process imports these error classes (most only to catch one), while the exit
    code is read only where an error ends a command: importing ``enum`` for it there, not
    here, saves each hook call about 1.5 ms. A non-data descriptor, so an instance may still
    be given its own code.
    """

    __slots__ = ("value",)

    def __init__(self, value: int) -> None:
        self.value = value

    def __get__(self, obj: object, owner: type | None = None) -> ExitCode:
        from onstation.core.exit_codes import ExitCode

        return ExitCode(self.value)


class OnstationError(Exception):
    """Base of every error onstation raises on purpose."""

    if TYPE_CHECKING:
        exit_code: ExitCode
    else:
        exit_code = _Code(1)
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

    exit_code = _Code(2)  # ExitCode.BAD_INPUT
    kind = "bad_input"


class StaleGeneration(OnstationError):
    """A write carried a generation that is no longer the live one; the denial is on record."""

    exit_code = _Code(3)  # ExitCode.DENIED
    kind = "denied"


class BlockedByPolicy(OnstationError):
    """A policy (respawn governor, breaker, halt gate) refused the request."""

    exit_code = _Code(4)  # ExitCode.BLOCKED
    kind = "blocked"


class Conflict(OnstationError):
    """A compare-and-swap lost, a live lease exists, or a transition is not allowed."""

    exit_code = _Code(5)  # ExitCode.CONFLICT
    kind = "conflict"
